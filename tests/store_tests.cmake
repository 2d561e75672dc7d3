# Included from tests/CMakeLists.txt: the campaign store, scores and reports (issue 7). The score and report
# tests need no SQLite; the store and CLI tests do (D2K_WITH_STORE_AND_HTTP). The HTML report is rendered by
# headless Chromium when it is installed (the test says it skipped otherwise).
if(D2K_WITH_STORE_AND_HTTP)
  add_executable(d2k_store_tests
    ${CMAKE_CURRENT_LIST_DIR}/unit/score_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/unit/report_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/unit/store_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/cli/store_cli_test.cpp
  )
  target_include_directories(d2k_store_tests PRIVATE "${CMAKE_CURRENT_LIST_DIR}/unit")
  target_link_libraries(d2k_store_tests PRIVATE d2k_store GTest::gtest GTest::gtest_main)
  target_compile_definitions(d2k_store_tests PRIVATE D2K_BINARY="$<TARGET_FILE:d2k>")
  add_dependencies(d2k_store_tests d2k)
  include(GoogleTest)
  gtest_discover_tests(d2k_store_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endif()
