# Tests of the agent's tools and the MCP server: gtest units, and the official MCP Python SDK's client
# driving the real `d2k mcp` over stdio (tests/python_mcp, both protocol eras).
add_executable(d2k_tools_tests
  unit/tools_workspace_test.cpp
  unit/tools_toolbox_test.cpp
  unit/tools_bash_test.cpp
  unit/tools_mcp_server_test.cpp
)
target_include_directories(d2k_tools_tests PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
target_link_libraries(d2k_tools_tests PRIVATE d2k_tools GTest::gtest GTest::gtest_main)
target_compile_definitions(d2k_tools_tests PRIVATE
  D2K_BINARY="$<TARGET_FILE:d2k>"
  D2K_TEST_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures")
gtest_discover_tests(d2k_tools_tests DISCOVERY_TIMEOUT 60)

if(Python3_Interpreter_FOUND)
  add_test(NAME mcp_python_client
           COMMAND ${CMAKE_COMMAND} -E env D2K_BINARY=$<TARGET_FILE:d2k>
                   D2K_TEST_FIXTURES=${CMAKE_CURRENT_SOURCE_DIR}/fixtures
                   ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/python_mcp
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endif()
