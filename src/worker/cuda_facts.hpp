#pragma once
// CUDA-side pieces of the worker's native module (built only with CUDA).
#include <Python.h>

namespace d2k::worker {
int cuda_device_count();
PyObject* cuda_device_info();  // new reference: a dict
// Times the Python callable `fn` (it enqueues work on `stream`) with cfg's keys; returns a dict.
// prepare (may be null): called before every launch, outside the timed window (cold mode only).
PyObject* run_timing(PyObject* fn, unsigned long long stream, PyObject* cfg, bool graph, PyObject* prepare);
// Host wall clock around fn() and a device synchronize, after an L2 flush; milliseconds as a Python float.
PyObject* run_wall(PyObject* fn, unsigned long long stream);
}  // namespace d2k::worker
