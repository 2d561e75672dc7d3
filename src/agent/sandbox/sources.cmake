# The agent's sandbox (bubblewrap around the bash tool's commands): part of d2k_tools, next to the runner seam
# it implements (agent/tools/command_runner.hpp). docs/SANDBOX.md.
target_sources(d2k_tools PRIVATE
  agent/sandbox/sandbox_spec.cpp
  agent/sandbox/bwrap_runner.cpp
  agent/sandbox/worker_jail.cpp
)
