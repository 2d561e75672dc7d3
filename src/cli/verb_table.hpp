#pragma once
// The one table of d2k's verbs: name, one-line help, handler. `d2k help` prints it.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace d2k::cli {

// Exit codes shared by every verb.
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;  // the verb ran and found problems (invalid tasks, failed solutions)
inline constexpr int kUsage = 2;   // bad arguments

struct Verb {
  std::string_view name;
  std::string_view help;
  int (*run)(const std::vector<std::string>& args);  // args after the verb
};

std::span<const Verb> verbs();
const Verb* find_verb(std::string_view name);

// One declaration per verb; each lives in verbs/<name>.cpp.
int run_tasks(const std::vector<std::string>& args);
int run_show(const std::vector<std::string>& args);
int run_validate(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_calibrate(const std::vector<std::string>& args);
int run_mcp(const std::vector<std::string>& args);
int run_score(const std::vector<std::string>& args);
int run_report(const std::vector<std::string>& args);
int run_store(const std::vector<std::string>& args);
int run_agent(const std::vector<std::string>& args);
int run_judge(const std::vector<std::string>& args);
int run_campaign(const std::vector<std::string>& args);

}  // namespace d2k::cli
