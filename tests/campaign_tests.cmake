# Included from tests/CMakeLists.txt: campaigns (src/campaign, `d2k campaign`): the real binary against a fake model
# server that answers many concurrent runs, on the CPU evaluation path with three toy tasks
# (fixtures/campaign_tasks): SIGKILL midway then resume scores as an uninterrupted run, shards merged equal the
# whole, merge conflicts, campaign-file errors, the GPU lock. Built with the store and the agent loop only.
if(D2K_WITH_STORE_AND_HTTP)
  add_executable(d2k_campaign_tests ${CMAKE_CURRENT_LIST_DIR}/campaign/campaign_test.cpp)
  target_include_directories(d2k_campaign_tests PRIVATE "${CMAKE_CURRENT_LIST_DIR}")
  target_link_libraries(d2k_campaign_tests PRIVATE d2k_campaign GTest::gtest GTest::gtest_main)
  target_compile_definitions(d2k_campaign_tests PRIVATE
    D2K_BINARY="$<TARGET_FILE:d2k>"
    D2K_TEST_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures")
  add_dependencies(d2k_campaign_tests d2k)
  include(GoogleTest)
  gtest_discover_tests(d2k_campaign_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 1200)
endif()
