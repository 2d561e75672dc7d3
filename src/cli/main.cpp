// d2k: the D2K-Bench harness. Dispatches to the verb table (cli/verb_table.cpp).
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/verb_table.hpp"
#include "d2k/build_info.hpp"

#ifdef D2K_WITH_STORE_AND_HTTP
#include <curl/curl.h>
#include <sqlite3.h>
#endif

namespace {

void print_help() {
  fmt::print("d2k {}: D2K-Bench, can LLM agents turn expert designs into efficient GPU kernels?\n\n", d2k::build::version);
  fmt::print("usage: d2k VERB [options]   (d2k VERB --help for a verb's options)\n\nverbs:\n");
  for (const auto& v : d2k::cli::verbs()) fmt::print("  {:<10} {}\n", v.name, v.help);
  fmt::print("  {:<10} {}\n", "help", "this list; `d2k help VERB` for one verb");
  fmt::print("  {:<10} {}\n", "--version", "d2k's version and its libraries'");
  fmt::print("\nenvironment: D2K_TASKS overrides the tasks folder (default: the source tree's tasks/)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (args.size() >= 2 && args[0] == "help") {
      if (const auto* v = d2k::cli::find_verb(args[1])) return v->run({"--help"});
      fmt::print(stderr, "d2k: no verb '{}' (run `d2k help`)\n", args[1]);
      return d2k::cli::kUsage;
    }
    print_help();
    return args.empty() ? d2k::cli::kUsage : d2k::cli::kOk;
  }
  if (args[0] == "--version") {
    fmt::print("d2k {}\n", d2k::build::version);
#ifdef D2K_WITH_STORE_AND_HTTP
    fmt::print("sqlite {}\n{}\n", sqlite3_libversion(), curl_version());
#endif
    return 0;
  }
  const auto* verb = d2k::cli::find_verb(args[0]);
  if (!verb) {
    fmt::print(stderr, "d2k: no verb '{}' (run `d2k help`)\n", args[0]);
    return d2k::cli::kUsage;
  }
  try {
    return verb->run(std::vector<std::string>(args.begin() + 1, args.end()));
  } catch (const std::exception& e) {
    fmt::print(stderr, "d2k {}: {}\n", verb->name, e.what());
    return d2k::cli::kFailed;
  }
}
