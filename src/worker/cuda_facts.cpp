#include "worker/cuda_facts.hpp"

#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "eval/timing/gpu_timer.hpp"

namespace d2k::worker {
namespace {

struct PythonRaised : std::runtime_error {
  PythonRaised() : std::runtime_error("the launch raised a Python exception") {}
};

double cfg_double(PyObject* cfg, const char* key, double fallback) {
  PyObject* v = PyDict_GetItemString(cfg, key);  // borrowed
  if (!v) return fallback;
  double d = PyFloat_AsDouble(v);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return fallback;
  }
  return d;
}

PyObject* float_list(const std::vector<double>& v) {
  PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) PyList_SetItem(l, static_cast<Py_ssize_t>(i), PyFloat_FromDouble(v[i]));
  return l;
}

void set(PyObject* d, const char* k, PyObject* v) {
  PyDict_SetItemString(d, k, v);
  Py_DECREF(v);
}

// One timer per worker: its flush buffer (2 x L2) is allocated once.
timing::ColdTimer& timer() {
  static std::unique_ptr<timing::ColdTimer> t = std::make_unique<timing::ColdTimer>();
  return *t;
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

PyObject* cuda_device_info() {
  PyObject* d = PyDict_New();
  int dev = 0, driver = 0, runtime = 0, l2 = 0, clock_khz = 0, mem_clock_khz = 0, bus = 0;
  cudaGetDevice(&dev);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev);
  cudaGetLastError();
  set(d, "cuda_driver_version", PyLong_FromLong(driver));
  set(d, "cudart_version_worker", PyLong_FromLong(runtime));
  set(d, "l2_bytes", PyLong_FromLong(l2));
  set(d, "sm_clock_max_mhz", PyFloat_FromDouble(clock_khz / 1000.0));
  set(d, "memory_clock_mhz", PyFloat_FromDouble(mem_clock_khz / 1000.0));
  set(d, "memory_bus_bits", PyLong_FromLong(bus));
  return d;
}

PyObject* run_timing(PyObject* fn, unsigned long long stream, PyObject* cfg, bool graph, PyObject* prepare) {
  timing::TimingConfig tc;
  tc.criterion.max_rel_stderr = cfg_double(cfg, "max_rel_stderr", tc.criterion.max_rel_stderr);
  tc.criterion.max_wall_time_s = cfg_double(cfg, "max_wall_time_s", tc.criterion.max_wall_time_s);
  tc.criterion.min_gpu_time_s = cfg_double(cfg, "min_gpu_time_s", tc.criterion.min_gpu_time_s);
  tc.criterion.min_samples = static_cast<std::size_t>(cfg_double(cfg, "min_samples", 10));
  tc.block_stream = cfg_double(cfg, "block_stream", 1.0) != 0.0;
  tc.warmup_samples = static_cast<std::size_t>(cfg_double(cfg, "warmup_samples", 3));
  timing::LaunchFn launch = [fn](void*) {
    PyObject* r = PyObject_CallObject(fn, nullptr);
    if (!r) throw PythonRaised();
    Py_DECREF(r);
  };
  timing::LaunchFn prep;
  if (prepare)
    prep = [prepare](void*) {
      PyObject* r = PyObject_CallObject(prepare, nullptr);
      if (!r) throw PythonRaised();
      Py_DECREF(r);
    };
  timing::TimingResult res;
  try {
    res = graph ? timer().measure_graph(launch, reinterpret_cast<void*>(stream), tc)
                : timer().measure_cold(launch, reinterpret_cast<void*>(stream), tc, prep);
  } catch (const PythonRaised&) {
    return nullptr;  // the Python exception is set
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  PyObject* d = PyDict_New();
  set(d, "samples_ms", float_list(res.samples_ms));
  set(d, "clocks_mhz", float_list(res.clocks_mhz));
  set(d, "median_ms", PyFloat_FromDouble(res.stats.median));
  set(d, "mean_ms", PyFloat_FromDouble(res.stats.mean));
  set(d, "q1_ms", PyFloat_FromDouble(res.stats.q1));
  set(d, "q3_ms", PyFloat_FromDouble(res.stats.q3));
  set(d, "min_ms", PyFloat_FromDouble(res.stats.min));
  set(d, "max_ms", PyFloat_FromDouble(res.stats.max));
  set(d, "rel_stderr", PyFloat_FromDouble(res.stats.rel_stderr));
  set(d, "throttled", PyLong_FromSize_t(res.throttled));
  set(d, "stop_reason", PyUnicode_FromString(std::string(timing::stop_reason_name(res.stop)).c_str()));
  set(d, "wall_s", PyFloat_FromDouble(res.wall_s));
  set(d, "sm_clock_mhz", PyFloat_FromDouble(res.sm_clock_mhz));
  set(d, "mode", PyUnicode_FromString(graph ? "graph" : "cold"));
  set(d, "bracket_median_ms", PyFloat_FromDouble(res.bracket_median_ms));
  set(d, "bracket_overhead_ms", PyFloat_FromDouble(res.bracket_overhead_ms));
  return d;
}

PyObject* run_wall(PyObject* fn, unsigned long long stream) {
  timing::LaunchFn launch = [fn](void*) {
    PyObject* r = PyObject_CallObject(fn, nullptr);
    if (!r) throw PythonRaised();
    Py_DECREF(r);
  };
  try {
    return PyFloat_FromDouble(timer().measure_wall_ms(launch, reinterpret_cast<void*>(stream), true));
  } catch (const PythonRaised&) {
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

}  // namespace d2k::worker
