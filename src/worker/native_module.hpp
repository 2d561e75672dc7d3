#pragma once
#include <Python.h>

namespace d2k::worker {
// The `_d2k_native` module: CUDA solution loading and calling, device facts, cold timing.
PyObject* init_native_module();
}  // namespace d2k::worker
