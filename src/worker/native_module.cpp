#include "worker/native_module.hpp"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "d2k/solution.h"

#ifdef D2K_WITH_CUDA
#include "eval/timing/gpu_timer.hpp"
#include "worker/cuda_facts.hpp"
#endif

namespace d2k::worker {
namespace {

using SolveFn = int (*)(const d2k_tensor*, int, d2k_tensor*, int, const d2k_param*, int, d2k_stream);
std::vector<SolveFn> g_solutions;

bool parse_tensors(PyObject* list, std::vector<d2k_tensor>& out) {
  if (!PyList_Check(list)) {
    PyErr_SetString(PyExc_TypeError, "expected a list of (ptr, dtype, shape, strides)");
    return false;
  }
  for (Py_ssize_t i = 0; i < PyList_Size(list); ++i) {
    PyObject* item = PyList_GetItem(list, i);
    unsigned long long ptr = 0;
    int dtype = 0;
    PyObject *shape = nullptr, *strides = nullptr;
    if (!PyArg_ParseTuple(item, "KiO!O!", &ptr, &dtype, &PyList_Type, &shape, &PyList_Type, &strides)) return false;
    d2k_tensor t{};
    t.data = reinterpret_cast<void*>(ptr);
    t.dtype = dtype;
    t.ndim = static_cast<int32_t>(PyList_Size(shape));
    if (t.ndim > D2K_MAX_DIMS || PyList_Size(strides) != t.ndim) {
      PyErr_SetString(PyExc_ValueError, "too many dimensions, or strides and shape differ in length");
      return false;
    }
    for (int k = 0; k < t.ndim; ++k) {
      t.shape[k] = PyLong_AsLongLong(PyList_GetItem(shape, k));
      t.strides[k] = PyLong_AsLongLong(PyList_GetItem(strides, k));
    }
    if (PyErr_Occurred()) return false;
    out.push_back(t);
  }
  return true;
}

PyObject* has_cuda(PyObject*, PyObject*) {
#ifdef D2K_WITH_CUDA
  return PyBool_FromLong(cuda_device_count() > 0);
#else
  Py_RETURN_FALSE;
#endif
}

PyObject* device_info(PyObject*, PyObject*) {
#ifdef D2K_WITH_CUDA
  return cuda_device_info();
#else
  return PyDict_New();
#endif
}

PyObject* load_cuda_solution(PyObject*, PyObject* args) {
  const char* path = nullptr;
  if (!PyArg_ParseTuple(args, "s", &path)) return nullptr;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    PyErr_Format(PyExc_RuntimeError, "dlopen failed: %s", dlerror());
    return nullptr;
  }
  auto fn = reinterpret_cast<SolveFn>(dlsym(h, "d2k_solve"));
  if (!fn) {
    PyErr_SetString(PyExc_RuntimeError, "the library exports no d2k_solve (declare it extern \"C\")");
    return nullptr;
  }
  g_solutions.push_back(fn);
  return PyLong_FromSize_t(g_solutions.size() - 1);
}

PyObject* cuda_solve(PyObject*, PyObject* args) {
  unsigned long long handle = 0, stream = 0;
  PyObject *ins = nullptr, *outs = nullptr, *params = nullptr;
  if (!PyArg_ParseTuple(args, "KOOOK", &handle, &ins, &outs, &params, &stream)) return nullptr;
  if (handle >= g_solutions.size()) {
    PyErr_SetString(PyExc_ValueError, "no such solution handle");
    return nullptr;
  }
  std::vector<d2k_tensor> in, out;
  if (!parse_tensors(ins, in) || !parse_tensors(outs, out)) return nullptr;
  if (!PyList_Check(params)) {
    PyErr_SetString(PyExc_TypeError, "params: expected a list");
    return nullptr;
  }
  std::vector<std::string> names;
  std::vector<d2k_param> ps;
  names.reserve(static_cast<std::size_t>(PyList_Size(params)));
  for (Py_ssize_t i = 0; i < PyList_Size(params); ++i) {
    const char* name = nullptr;
    int dtype = 0;
    double f = 0;
    long long iv = 0;
    if (!PyArg_ParseTuple(PyList_GetItem(params, i), "sidL", &name, &dtype, &f, &iv)) return nullptr;
    names.emplace_back(name);
    ps.push_back(d2k_param{nullptr, dtype, f, iv});
  }
  for (std::size_t i = 0; i < ps.size(); ++i) ps[i].name = names[i].c_str();
  int rc = g_solutions[handle](in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()),
                               ps.data(), static_cast<int>(ps.size()), reinterpret_cast<d2k_stream>(stream));
  return PyLong_FromLong(rc);
}

#ifdef D2K_WITH_CUDA
PyObject* measure(PyObject* args, bool graph) {
  PyObject *fn = nullptr, *cfg = nullptr, *prepare = Py_None;
  unsigned long long stream = 0;
  if (!PyArg_ParseTuple(args, "OKO!|O", &fn, &stream, &PyDict_Type, &cfg, &prepare)) return nullptr;
  if (!PyCallable_Check(fn) || (prepare != Py_None && !PyCallable_Check(prepare))) {
    PyErr_SetString(PyExc_TypeError, "launch and prepare must be callable");
    return nullptr;
  }
  return run_timing(fn, stream, cfg, graph, prepare == Py_None ? nullptr : prepare);
}
PyObject* measure_cold(PyObject*, PyObject* args) { return measure(args, false); }
PyObject* measure_wall_ms(PyObject*, PyObject* args) {
  PyObject* fn = nullptr;
  unsigned long long stream = 0;
  if (!PyArg_ParseTuple(args, "OK", &fn, &stream)) return nullptr;
  return run_wall(fn, stream);
}
PyObject* measure_graph(PyObject*, PyObject* args) { return measure(args, true); }
#else
PyObject* no_cuda(PyObject*, PyObject*) {
  PyErr_SetString(PyExc_RuntimeError, "d2k-worker was built without CUDA");
  return nullptr;
}
#endif

PyMethodDef kMethods[] = {
    {"has_cuda", has_cuda, METH_NOARGS, "True when a CUDA device is usable."},
    {"device_info", device_info, METH_NOARGS, "Device facts: L2 size, clocks, driver and runtime versions."},
    {"load_cuda_solution", load_cuda_solution, METH_VARARGS, "dlopen a solution library; returns a handle."},
    {"cuda_solve", cuda_solve, METH_VARARGS, "Call d2k_solve(handle, inputs, outputs, params, stream)."},
#ifdef D2K_WITH_CUDA
    {"measure_cold", measure_cold, METH_VARARGS, "Cold timing of launch() on stream with cfg."},
    {"measure_graph", measure_graph, METH_VARARGS, "CUDA-graph replay timing of launch()."},
    {"measure_wall_ms", measure_wall_ms, METH_VARARGS, "Host wall clock around launch() and a device sync."},
#else
    {"measure_cold", no_cuda, METH_VARARGS, "unavailable"},
    {"measure_graph", no_cuda, METH_VARARGS, "unavailable"},
    {"measure_wall_ms", no_cuda, METH_VARARGS, "unavailable"},
#endif
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_d2k_native", "d2k worker natives", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyObject* init_native_module() { return PyModule_Create(&kModule); }

}  // namespace d2k::worker
