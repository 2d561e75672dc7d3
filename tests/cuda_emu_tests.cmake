# Hand-written CUDA candidates checked on the CPU through the emulation in bench/cuda_emu (CI has no GPU): the
# kernels, compiled by the host compiler, against a float64 reference. A broken emulation or kernel fails here.
find_package(Threads REQUIRED)

# One CTest per form of the 004 expert (tasks/004_chunked_gated_deltanet/expert/solution.cu, developed in
# bench/candidates/004_deltanet_cuda): that folder's cpu_check.cpp built with the form's defines.
function(d2k_cpu_check_004 suffix)
  set(target "d2k_cpu_check_004${suffix}")
  add_executable(${target} "${PROJECT_SOURCE_DIR}/bench/candidates/004_deltanet_cuda/cpu_check.cpp")
  target_compile_definitions(${target} PRIVATE D2K_CPU_EMU ${ARGN})
  target_compile_options(${target} PRIVATE -Wno-unknown-pragmas)
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/include")
  target_link_libraries(${target} PRIVATE Threads::Threads)
  add_test(NAME "cuda_emu_candidate_004${suffix}" COMMAND ${target} --quick)
endfunction()

# The default: the warp-specialized walk with T from the prep and wgmma (D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2); the
# split cases take the classic walk.
d2k_cpu_check_004("")
# The classic walk (state warps that also make P and the factors, T from the prep), the default until 2026-12-06.
d2k_cpu_check_004(_classic D2K_CLASSIC)
# The classic walk with both its variant flags: T built in the walk (D2K_FUSE_T) and wgmma for S_0 K^T, S_0 Q^T.
d2k_cpu_check_004(_variants D2K_FUSE_T D2K_WGMMA)
# The warp-specialized walk building T itself (D2K_WS): named barriers, mbarrier arrivals, three q/k slots.
d2k_cpu_check_004(_ws D2K_WS)
# The same with its wgmma forms (=2: S_0 K^T, S_0 Q^T and the state update, B straight from the tensor copies'
# 128-byte-swizzled tiles, K-major and N-major).
d2k_cpu_check_004(_ws_wgmma D2K_WS D2K_WS_WGMMA=2)
# The default with v_new = T y and o += v_new P^T as wgmma too (D2K_WS_WGMMA=3): whole tiles, zeros above the diagonal.
d2k_cpu_check_004(_wgmma3 D2K_WS D2K_WS_PREP D2K_WS_WGMMA=3)
# The default with the packed prep (D2K_PREP_PACK: T's fp32 blocks inside A's matrix, 36 KB of shared memory).
d2k_cpu_check_004(_prep_pack D2K_PREP_PACK)
# The persistent prep (D2K_PREP_PERSIST: two k tiles, the next item's copies in flight), on three CTAs so that each
# walks many items and both tiles' mbarrier phases turn over.
d2k_cpu_check_004(_prep_persist D2K_PREP_PERSIST D2K_PREP_GRID=3)
# (T's rows leave there through tensor stores from a staging tile, partial chunks by the threads' stores.) The same
# with the threads' stores for every chunk (D2K_PREP_TSTORE_OFF, the form before 2026-12-07).
d2k_cpu_check_004(_prep_tstore_off D2K_PREP_PERSIST D2K_PREP_GRID=3 D2K_PREP_TSTORE_OFF)
# T itself from the prep (its three block-substitution levels; D2K_T_FULL, the form before 2026-12-07) instead of
# the diagonal inverses and the walks' block substitution for v_new, in the warp-specialized walk and (the split
# cases) the classic one.
d2k_cpu_check_004(_t_full D2K_T_FULL)

# The 007 "phased" candidate (bench/candidates/007_topk_phased): every route of its decisions (plain, list, tested,
# the list's overflow, the tested rows' continuation) and both load paths, judged by support and, for batches of
# one repeated row, by distribution.
add_executable(d2k_cpu_check_007_phased "${PROJECT_SOURCE_DIR}/bench/candidates/007_topk_phased/cpu_check.cpp")
target_compile_definitions(d2k_cpu_check_007_phased PRIVATE D2K_CPU_EMU)
target_compile_options(d2k_cpu_check_007_phased PRIVATE -Wno-unknown-pragmas)
target_include_directories(d2k_cpu_check_007_phased PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_link_libraries(d2k_cpu_check_007_phased PRIVATE Threads::Threads)
add_test(NAME cuda_emu_candidate_007_phased COMMAND d2k_cpu_check_007_phased --quick)
set_tests_properties(cuda_emu_candidate_007_phased PROPERTIES TIMEOUT 900)
