# d2k_tools: the agent's tools (workspace, files, bash, evaluate/submit) and the MCP server that serves them.
add_library(d2k_tools STATIC
  agent/tools/workspace.cpp
  agent/tools/command_runner.cpp
  agent/tools/toolbox.cpp
  agent/tools/file_tools.cpp
  agent/tools/public_files.cpp
  mcp/protocol.cpp
  mcp/server.cpp
)
target_include_directories(d2k_tools PUBLIC "${PROJECT_SOURCE_DIR}/src")
target_link_libraries(d2k_tools PUBLIC d2k_core)
