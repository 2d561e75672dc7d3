# The built-in agent loop (src/agent/loop): whole episodes against the scripted fake model server on loopback in
# both wire formats, and end-to-end runs of `d2k agent` (SIGKILL and resume, signals, the CPU evaluator on the
# toy task, an external agent through MCP). Built with the providers only (D2K_WITH_STORE_AND_HTTP).
if(D2K_WITH_STORE_AND_HTTP)
  add_executable(d2k_agent_loop_tests
    ${CMAKE_CURRENT_LIST_DIR}/agent_loop/agent_loop_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/agent_loop/agent_cli_test.cpp
  )
  target_include_directories(d2k_agent_loop_tests PRIVATE "${CMAKE_CURRENT_LIST_DIR}")
  target_link_libraries(d2k_agent_loop_tests PRIVATE d2k_agent_loop GTest::gtest GTest::gtest_main)
  target_compile_definitions(d2k_agent_loop_tests PRIVATE
    D2K_BINARY="$<TARGET_FILE:d2k>"
    D2K_TEST_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures"
    D2K_TEST_PYTHON="${Python3_EXECUTABLE}"
    D2K_FAKE_AGENT="${CMAKE_CURRENT_LIST_DIR}/agent_loop/fake_agent.py")
  add_dependencies(d2k_agent_loop_tests d2k)
  include(GoogleTest)
  gtest_discover_tests(d2k_agent_loop_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)

  # Harness overhead per tool call of the built-in loop (docs/AGENTS.md); prints the figure, asserts nothing.
  add_executable(d2k_agent_overhead_bench ${PROJECT_SOURCE_DIR}/bench/agent_overhead.cpp)
  target_include_directories(d2k_agent_overhead_bench PRIVATE "${CMAKE_CURRENT_LIST_DIR}")
  target_link_libraries(d2k_agent_overhead_bench PRIVATE d2k_agent_loop)
  target_compile_definitions(d2k_agent_overhead_bench PRIVATE
    D2K_BINARY="$<TARGET_FILE:d2k>" D2K_TEST_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures")
endif()
