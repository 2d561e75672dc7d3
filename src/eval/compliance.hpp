#pragma once
// Types shared by the static compliance checks (CUDA C++ and Triton): a violation names a stable rule, the file
// and line it was found at (line 0: the whole file, or a built library), and says why in one sentence.
#include <string>

namespace d2k {

struct Violation {
  std::string rule;     // a stable rule name, e.g. "stream_creation" (docs/COMPLIANCE.md lists them)
  std::string file;     // the solution's file (or the built library) the finding is in
  int line = 0;         // 1-based; 0 when the finding is about a whole file or a library
  std::string message;  // one sentence for the agent and the trace

  // "file:line: rule: message"
  std::string to_string() const {
    return file + ":" + std::to_string(line) + ": " + rule + ": " + message;
  }
};

}  // namespace d2k
