#pragma once
// What the agent runtime, the model providers and the MCP server share about tools.
#include <string>

#include <nlohmann/json.hpp>

namespace d2k::agent {

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::json input_schema;  // a JSON Schema object ({"type": "object", "properties": ...})
};

struct ToolResult {
  std::string text;       // what the model reads
  bool is_error = false;  // a failed tool call is a result the model sees, never an exception
};

}  // namespace d2k::agent
