// d2k-worker: embeds CPython (torch, Triton) and serves the harness's requests (python/d2k_harness.py).
// It may host hostile solution code, so it computes no verdict; the supervisor does.
#include <Python.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "worker/native_module.hpp"
#include "worker/worker_config.hpp"

int main(int argc, char** argv) {
  std::string harness_dir = d2k::worker::kHarnessDir;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--harness") harness_dir = argv[i + 1];

  if (PyImport_AppendInittab("_d2k_native", &d2k::worker::init_native_module) != 0) {
    std::fprintf(stderr, "d2k-worker: cannot register _d2k_native\n");
    return 70;
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.parse_argv = 0;
  config.user_site_directory = 0;
  PyStatus st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) {
    std::fprintf(stderr, "d2k-worker: Python failed to start: %s\n", st.err_msg ? st.err_msg : "?");
    return 70;
  }
  // The interpreter found at build time (a venv) decides which torch and triton we see;
  // D2K_PYTHONPATH (colon-separated) may add more in front.
  std::string setup = "import sys, os, json\n"
                      "extra = [p for p in os.environ.get('D2K_PYTHONPATH', '').split(':') if p]\n"
                      "sys.path[:0] = extra + [" + std::string("r'") + harness_dir + "'] + json.loads(r'''" +
                      d2k::worker::kBuildSysPath + "''')\n";
  if (PyRun_SimpleString(setup.c_str()) != 0) return 70;
  int rc = PyRun_SimpleString("import d2k_harness\nd2k_harness.main()\n");
  if (Py_FinalizeEx() < 0) return 71;
  return rc == 0 ? 0 : 1;
}
