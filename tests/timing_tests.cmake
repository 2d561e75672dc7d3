# Included from tests/CMakeLists.txt (after find_package(GTest)): unit tests of d2k_timing, CPU only.
add_executable(d2k_timing_tests
  ${CMAKE_CURRENT_LIST_DIR}/unit/timing_stats_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unit/timing_criterion_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unit/throttle_test.cpp
)
target_link_libraries(d2k_timing_tests PRIVATE d2k_timing GTest::gtest GTest::gtest_main)
include(GoogleTest)
gtest_discover_tests(d2k_timing_tests DISCOVERY_TIMEOUT 60)
