# Included from tests/CMakeLists.txt: the judges (src/judge, docs/JUDGES.md). Pure checks (citations, verdicts,
# prompts, noise) and whole judging flows against the scripted fake model server on loopback: single levels,
# re-asks, invalid judgments, a campaign in a store (resume, timings kept out of the prompt), JS_design, the CLI.
if(D2K_WITH_STORE_AND_HTTP)
  add_executable(d2k_judge_tests
    ${CMAKE_CURRENT_LIST_DIR}/judge/judge_unit_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/judge/judge_flow_test.cpp
  )
  target_include_directories(d2k_judge_tests PRIVATE "${CMAKE_CURRENT_LIST_DIR}")
  target_link_libraries(d2k_judge_tests PRIVATE d2k_judge GTest::gtest GTest::gtest_main)
  target_compile_definitions(d2k_judge_tests PRIVATE
    D2K_BINARY="$<TARGET_FILE:d2k>"
    D2K_JUDGE_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures/judge")
  add_dependencies(d2k_judge_tests d2k)
  include(GoogleTest)
  gtest_discover_tests(d2k_judge_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
endif()
