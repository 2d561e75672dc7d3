# The agent's sandbox (docs/SANDBOX.md): the bwrap command line built from a spec (pure, always runs) and the
# bash tool under the real bubblewrap sandbox (skipped, with the reason, where bwrap cannot build one).
add_executable(d2k_sandbox_tests
  sandbox/sandbox_argv_test.cpp
  sandbox/sandbox_bwrap_test.cpp
)
target_include_directories(d2k_sandbox_tests PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
target_link_libraries(d2k_sandbox_tests PRIVATE d2k_tools GTest::gtest GTest::gtest_main)
target_compile_definitions(d2k_sandbox_tests PRIVATE
  D2K_BINARY="$<TARGET_FILE:d2k>"
  D2K_TEST_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures"
  D2K_TASKS_DIR="${PROJECT_SOURCE_DIR}/tasks")
gtest_discover_tests(d2k_sandbox_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
