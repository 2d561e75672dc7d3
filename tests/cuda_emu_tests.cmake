# Hand-written CUDA candidates checked on the CPU through the emulation in bench/cuda_emu (CI has no GPU): the
# kernels, compiled by the host compiler, against a float64 reference. A broken emulation or kernel fails here.
find_package(Threads REQUIRED)
add_executable(d2k_cpu_check_004 "${PROJECT_SOURCE_DIR}/bench/candidates/004_deltanet_cuda/cpu_check.cpp")
target_compile_definitions(d2k_cpu_check_004 PRIVATE D2K_CPU_EMU)
target_compile_options(d2k_cpu_check_004 PRIVATE -Wno-unknown-pragmas)
target_include_directories(d2k_cpu_check_004 PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_link_libraries(d2k_cpu_check_004 PRIVATE Threads::Threads)
add_test(NAME cuda_emu_candidate_004 COMMAND d2k_cpu_check_004 --quick)
# The same with both variant flags: the walk building T itself (D2K_FUSE_T) and wgmma for S_0 K^T, S_0 Q^T.
add_executable(d2k_cpu_check_004_variants "${PROJECT_SOURCE_DIR}/bench/candidates/004_deltanet_cuda/cpu_check.cpp")
target_compile_definitions(d2k_cpu_check_004_variants PRIVATE D2K_CPU_EMU D2K_FUSE_T D2K_WGMMA)
target_compile_options(d2k_cpu_check_004_variants PRIVATE -Wno-unknown-pragmas)
target_include_directories(d2k_cpu_check_004_variants PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_link_libraries(d2k_cpu_check_004_variants PRIVATE Threads::Threads)
add_test(NAME cuda_emu_candidate_004_variants COMMAND d2k_cpu_check_004_variants --quick)
# The warp-specialized walk (D2K_WS): a producer warpgroup builds T, P and the factors a chunk ahead (named barriers,
# mbarrier arrivals, three q/k slots); the split cases still take the default walk.
add_executable(d2k_cpu_check_004_ws "${PROJECT_SOURCE_DIR}/bench/candidates/004_deltanet_cuda/cpu_check.cpp")
target_compile_definitions(d2k_cpu_check_004_ws PRIVATE D2K_CPU_EMU D2K_WS)
target_compile_options(d2k_cpu_check_004_ws PRIVATE -Wno-unknown-pragmas)
target_include_directories(d2k_cpu_check_004_ws PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_link_libraries(d2k_cpu_check_004_ws PRIVATE Threads::Threads)
add_test(NAME cuda_emu_candidate_004_ws COMMAND d2k_cpu_check_004_ws --quick)
# The same with its wgmma forms (D2K_WS_WGMMA=2: S_0 K^T, S_0 Q^T and the state update, B straight from the tensor
# copies' 128-byte-swizzled tiles, K-major and N-major).
add_executable(d2k_cpu_check_004_ws_wgmma "${PROJECT_SOURCE_DIR}/bench/candidates/004_deltanet_cuda/cpu_check.cpp")
target_compile_definitions(d2k_cpu_check_004_ws_wgmma PRIVATE D2K_CPU_EMU D2K_WS D2K_WS_WGMMA=2)
target_compile_options(d2k_cpu_check_004_ws_wgmma PRIVATE -Wno-unknown-pragmas)
target_include_directories(d2k_cpu_check_004_ws_wgmma PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_link_libraries(d2k_cpu_check_004_ws_wgmma PRIVATE Threads::Threads)
add_test(NAME cuda_emu_candidate_004_ws_wgmma COMMAND d2k_cpu_check_004_ws_wgmma --quick)
