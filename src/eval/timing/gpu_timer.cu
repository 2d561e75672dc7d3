#include "eval/timing/gpu_timer.hpp"

#include <algorithm>
#include <span>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>

namespace d2k::timing {

namespace {

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, int line) {
  // No fmt in this file: fmt 9's constexpr code does not get through nvcc 13 in C++20 mode.
  throw std::runtime_error(std::string(call) + " failed (gpu_timer.cu:" + std::to_string(line) +
                           "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

#define D2K_CUDA(call)                                      \
  do {                                                      \
    const cudaError_t d2k_err_ = (call);                    \
    if (d2k_err_ != cudaSuccess) throw_cuda(d2k_err_, #call, __LINE__); \
  } while (0)

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct ClockProbe {
  long long cycles;
  unsigned long long ns;
};

// Host-mapped block the GPU reads (release) and writes (timed_out, probes) while the host waits.
struct Mapped {
  int release;
  int timed_out;
  ClockProbe probes[2];
};

// Holds the stream until the host has enqueued the launch and its stop event, so the start event is
// stamped when the GPU reaches it, not while the host is still enqueuing. Gives up after timeout_ns so
// a launch that waits for the GPU cannot hang the process; the host then rejects the sample.
__global__ void block_stream_kernel(const volatile int* release, volatile int* timed_out,
                                    unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  while (*release == 0) {
    if (global_ns() - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
  }
}

// Counts SM cycles between two ticks of %globaltimer at least span_ns apart. Measuring from tick to
// tick keeps the timer's coarse update period out of the estimate. Gives up (ns = 0) after ~2^32
// cycles so a timer that never ticks cannot hang it.
__global__ void clock_probe_kernel(ClockProbe* out, unsigned long long span_ns) {
  constexpr long long kMaxCycles = 1ll << 32;
  const long long c_begin = clock64();
  const unsigned long long t_first = global_ns();
  unsigned long long t0 = t_first, t = t_first;
  long long c0 = c_begin, c = c_begin;
  while (t == t_first) {
    t = global_ns();
    c = clock64();
    if (c - c_begin > kMaxCycles) break;
  }
  t0 = t;
  c0 = c;
  unsigned long long t1 = t0, prev = t0;
  long long c1 = c0;
  while (c - c_begin <= kMaxCycles) {
    t = global_ns();
    c = clock64();
    if (t != prev) {
      prev = t;
      if (t - t0 >= span_ns) {
        t1 = t;
        c1 = c;
        break;
      }
    }
  }
  out->cycles = c1 - c0;
  out->ns = t1 - t0;
}

double probe_mhz(const ClockProbe& p) {
  if (p.ns == 0 || p.cycles <= 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(p.cycles) * 1e3 / static_cast<double>(p.ns);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Makes `device` current for a scope and restores the caller's device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    D2K_CUDA(cudaGetDevice(&previous_));
    if (previous_ != device) D2K_CUDA(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

// Lets the blocking kernel go on every exit path, exceptions included.
class ReleaseOnExit {
 public:
  explicit ReleaseOnExit(Mapped* m) : m_(m) {}
  ~ReleaseOnExit() { release(); }
  ReleaseOnExit(const ReleaseOnExit&) = delete;
  ReleaseOnExit& operator=(const ReleaseOnExit&) = delete;
  void release() { *static_cast<volatile int*>(&m_->release) = 1; }

 private:
  Mapped* m_;
};

double median_of_finite(const std::vector<double>& xs) {
  std::vector<double> f;
  for (double x : xs)
    if (std::isfinite(x)) f.push_back(x);
  std::sort(f.begin(), f.end());
  return sorted_quantile(std::span<const double>(f.data(), f.size()), 0.5);
}

}  // namespace

struct ColdTimer::Impl {
  int device = 0;
  std::size_t l2 = 0, flush_bytes = 0;
  bool persisting_l2 = false;
  unsigned flush_count = 0;
  void* flush_buf = nullptr;
  Mapped* mapped = nullptr;  // host view
  Mapped* mapped_dev = nullptr;  // device view of the same memory
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaStream_t capture_stream = nullptr;

  void init(int dev) {
    if (dev < 0) D2K_CUDA(cudaGetDevice(&dev));
    device = dev;
    DeviceScope scope(device);
    int l2_attr = 0, persist_attr = 0;
    D2K_CUDA(cudaDeviceGetAttribute(&l2_attr, cudaDevAttrL2CacheSize, device));
    D2K_CUDA(cudaDeviceGetAttribute(&persist_attr, cudaDevAttrMaxPersistingL2CacheSize, device));
    if (l2_attr <= 0) throw std::runtime_error("device " + std::to_string(device) + " reports no L2 cache size");
    l2 = static_cast<std::size_t>(l2_attr);
    persisting_l2 = persist_attr > 0;
    // Twice the L2: the flush must evict every line even if the cache's hashing or its split into
    // partitions keeps part of a buffer of exactly L2 size resident.
    flush_bytes = 2 * l2;
    D2K_CUDA(cudaMalloc(&flush_buf, flush_bytes));
    void* host = nullptr;
    D2K_CUDA(cudaHostAlloc(&host, sizeof(Mapped), cudaHostAllocMapped));
    mapped = static_cast<Mapped*>(host);
    *mapped = Mapped{};
    void* dev_view = nullptr;
    D2K_CUDA(cudaHostGetDevicePointer(&dev_view, host, 0));
    mapped_dev = static_cast<Mapped*>(dev_view);
    D2K_CUDA(cudaEventCreate(&start));
    D2K_CUDA(cudaEventCreate(&stop));
    keep_pool_memory();
  }

  // The stream-ordered allocator's default pool hands freed memory back to the OS at every synchronization
  // (release threshold 0), so a launch that takes scratch with cudaMallocAsync and returns it with
  // cudaFreeAsync paid an unmap inside the sample's cudaDeviceSynchronize: host time in the whole-device
  // bracket that no kernel spent (H200, 2026-12-03: a 3-kernel add+RMSNorm with 40-270 MB of scratch,
  // bracket 1.7-2.2x its event time, flagged). Keeping the pool's memory, as PyTorch's caching allocator keeps
  // its own, times the kernels and not the OS's page mapping.
  void keep_pool_memory() {
    int pools = 0;
    D2K_CUDA(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
    if (!pools) return;
    cudaMemPool_t pool = nullptr;
    D2K_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    D2K_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  }

  ~Impl() {
    // Errors are ignored here: after a sticky error every call fails, and a destructor must not throw.
    int previous = 0;
    const bool restore = cudaGetDevice(&previous) == cudaSuccess;
    cudaSetDevice(device);
    if (capture_stream) cudaStreamDestroy(capture_stream);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (mapped) cudaFreeHost(mapped);
    if (flush_buf) cudaFree(flush_buf);
    if (restore) cudaSetDevice(previous);
    cudaGetLastError();  // do not leave our cleanup's error for the caller's next check
  }

  void flush(cudaStream_t s) {
    if (persisting_l2) D2K_CUDA(cudaCtxResetPersistingL2Cache());
    D2K_CUDA(cudaMemsetAsync(flush_buf, static_cast<int>(++flush_count & 0xff), flush_bytes, s));
  }

  void launch_probe(cudaStream_t s, int slot, double span_us) {
    clock_probe_kernel<<<1, 1, 0, s>>>(&mapped_dev->probes[slot],
                                       static_cast<unsigned long long>(span_us * 1e3));
    D2K_CUDA(cudaGetLastError());
  }

  // One sample: [flush] [probe] block | start event, enqueue, stop event [probe] | release, sync.
  void sample(const std::function<void(cudaStream_t)>& enqueue, cudaStream_t s, const TimingConfig& cfg,
              double* ms, double* mhz, double* bracket_ms,
              const std::function<void(cudaStream_t)>& prepare = {}) {
    if (prepare) prepare(s);
    const bool probe = cfg.clock_probe_us > 0;
    mapped->release = 0;
    mapped->timed_out = 0;
    mapped->probes[0] = mapped->probes[1] = ClockProbe{0, 0};
    std::chrono::steady_clock::time_point released;
    if (cfg.flush_l2) flush(s);
    if (probe) launch_probe(s, 0, cfg.clock_probe_us);
    // The device is idle when the sample begins: the preparation and the flush must not run into the bracket.
    D2K_CUDA(cudaStreamSynchronize(s));
    {
      ReleaseOnExit guard(mapped);
      if (cfg.block_stream) {
        block_stream_kernel<<<1, 1, 0, s>>>(&mapped_dev->release, &mapped_dev->timed_out,
                                            static_cast<unsigned long long>(cfg.block_timeout_s * 1e9));
        D2K_CUDA(cudaGetLastError());
      }
      if (!cfg.block_stream) released = std::chrono::steady_clock::now();
      D2K_CUDA(cudaEventRecord(start, s));
      enqueue(s);
      D2K_CUDA(cudaEventRecord(stop, s));
      if (probe) launch_probe(s, 1, cfg.clock_probe_us);
      if (cfg.block_stream) released = std::chrono::steady_clock::now();
    }  // the guard releases the stream here
    // The whole device, not just the stream: the sample ends when every piece of work has.
    D2K_CUDA(cudaDeviceSynchronize());
    *bracket_ms = seconds_since(released) * 1e3;
    // Plain reads: the synchronization above is an opaque call, and the GPU's writes are visible after it.
    if (mapped->timed_out)
      throw std::runtime_error("the blocking kernel timed out after " + std::to_string(cfg.block_timeout_s) +
                               " s: the launch took that long to enqueue, filled the launch queue, or waited for "
                               "the GPU; the sample's start would have been stamped too early");
    float elapsed = 0;
    D2K_CUDA(cudaEventElapsedTime(&elapsed, start, stop));
    *ms = elapsed;
    *mhz = probe ? std::fmin(probe_mhz(mapped->probes[0]), probe_mhz(mapped->probes[1]))
                 : std::numeric_limits<double>::quiet_NaN();
  }

  TimingResult measure(const std::function<void(cudaStream_t)>& enqueue, cudaStream_t s,
                       const TimingConfig& cfg, const std::function<void(cudaStream_t)>& prepare = {}) {
    validate(cfg.criterion);
    validate(cfg.throttle);
    if (!(cfg.block_timeout_s > 0)) throw std::invalid_argument("timing: block_timeout_s must be > 0");
    if (!(cfg.clock_probe_us >= 0)) throw std::invalid_argument("timing: clock_probe_us must be >= 0");
    // Surface an error left by earlier work now, rather than blaming it on the first sample.
    D2K_CUDA(cudaGetLastError());
    D2K_CUDA(cudaDeviceSynchronize());

    const auto t0 = std::chrono::steady_clock::now();
    // One unblocked call first: lazy module loading waits for the device, so a kernel's first launch
    // queued behind the blocking kernel would stall until the timeout.
    if (prepare) prepare(s);
    enqueue(s);
    D2K_CUDA(cudaStreamSynchronize(s));
    double ms = 0, mhz = 0, bracket = 0;
    TimingResult r;
    // The bracket's own cost, from empty samples: the supervisor compares brackets with event times.
    {
      std::vector<double> gaps;
      for (int i = 0; i < 5; ++i) {
        sample([](cudaStream_t) {}, s, cfg, &ms, &mhz, &bracket);
        gaps.push_back(bracket - ms);
      }
      r.bracket_overhead_ms = median_of_finite(gaps);
    }
    for (std::size_t i = 0; i < cfg.warmup_samples; ++i) sample(enqueue, s, cfg, &ms, &mhz, &bracket, prepare);

    StopCriterion criterion(cfg.criterion);
    ThrottleFilter filter(cfg.throttle);
    while (true) {
      sample(enqueue, s, cfg, &ms, &mhz, &bracket, prepare);
      r.bracket_ms.push_back(bracket);
      switch (filter.add(ms, mhz)) {
        case ThrottleFilter::Verdict::kept: criterion.add(ms); break;
        case ThrottleFilter::Verdict::discarded: break;
        case ThrottleFilter::Verdict::refiltered:
          criterion.reset();
          for (double x : filter.kept_ms()) criterion.add(x);
          break;
      }
      criterion.set_wall_time(seconds_since(t0));
      if (criterion.done()) break;
    }
    r.stop = criterion.reason();
    r.wall_s = seconds_since(t0);
    r.samples_ms = filter.kept_ms();
    r.clocks_mhz = filter.kept_mhz();
    // nvcc 13 cannot convert a vector to a span implicitly.
    r.stats = compute_stats(std::span<const double>(r.samples_ms.data(), r.samples_ms.size()));
    r.throttled = filter.discarded();
    r.sm_clock_mhz = median_of_finite(r.clocks_mhz);
    r.reference_mhz = filter.reference_mhz();
    r.bracket_median_ms = median_of_finite(r.bracket_ms);
    return r;
  }

  static std::function<void(cudaStream_t)> wrap(const LaunchFn& launch) {
    return [&launch](cudaStream_t s) {
      launch(s);
      D2K_CUDA(cudaGetLastError());  // a bad launch configuration of the code under test
    };
  }
};

ColdTimer::ColdTimer(int device) : impl_(std::make_unique<Impl>()) { impl_->init(device); }
ColdTimer::~ColdTimer() = default;

int ColdTimer::device() const { return impl_->device; }
std::size_t ColdTimer::l2_bytes() const { return impl_->l2; }
std::size_t ColdTimer::flush_bytes() const { return impl_->flush_bytes; }

void ColdTimer::flush(void* stream) {
  DeviceScope scope(impl_->device);
  impl_->flush(as_stream(stream));
}

double ColdTimer::probe_clock_mhz(void* stream, double span_us) {
  DeviceScope scope(impl_->device);
  impl_->mapped->probes[0] = ClockProbe{0, 0};
  impl_->launch_probe(as_stream(stream), 0, span_us);
  D2K_CUDA(cudaStreamSynchronize(as_stream(stream)));
  return probe_mhz(impl_->mapped->probes[0]);
}

TimingResult ColdTimer::measure_cold(const LaunchFn& launch, void* stream, const TimingConfig& cfg,
                                     const LaunchFn& prepare) {
  DeviceScope scope(impl_->device);
  std::function<void(cudaStream_t)> prep;
  if (prepare) prep = Impl::wrap(prepare);
  return impl_->measure(Impl::wrap(launch), as_stream(stream), cfg, prep);
}

TimingResult ColdTimer::measure_graph(const LaunchFn& launch, void* stream, const TimingConfig& cfg) {
  DeviceScope scope(impl_->device);
  if (!impl_->capture_stream) D2K_CUDA(cudaStreamCreateWithFlags(&impl_->capture_stream, cudaStreamNonBlocking));
  cudaStream_t cap = impl_->capture_stream;

  D2K_CUDA(cudaGetLastError());
  D2K_CUDA(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    launch(cap);
  } catch (...) {
    cudaStreamEndCapture(cap, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  const cudaError_t launch_err = cudaGetLastError();
  const cudaError_t end_err = cudaStreamEndCapture(cap, &graph);
  std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, decltype(&cudaGraphDestroy)> graph_owner(graph, &cudaGraphDestroy);
  D2K_CUDA(launch_err);
  D2K_CUDA(end_err);
  std::size_t nodes = 0;
  D2K_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
  if (nodes == 0) throw std::runtime_error("measure_graph: the launch enqueued no work on the stream it was given");

  cudaGraphExec_t exec = nullptr;
  D2K_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, decltype(&cudaGraphExecDestroy)> exec_owner(exec, &cudaGraphExecDestroy);
  D2K_CUDA(cudaGraphUpload(exec, as_stream(stream)));
  return impl_->measure([exec](cudaStream_t s) { D2K_CUDA(cudaGraphLaunch(exec, s)); }, as_stream(stream), cfg);
}

double ColdTimer::measure_wall_ms(const LaunchFn& launch, void* stream, bool flush_l2) {
  DeviceScope scope(impl_->device);
  D2K_CUDA(cudaGetLastError());
  D2K_CUDA(cudaDeviceSynchronize());
  if (flush_l2) {
    impl_->flush(as_stream(stream));
    D2K_CUDA(cudaDeviceSynchronize());
  }
  const auto t0 = std::chrono::steady_clock::now();
  launch(stream);
  D2K_CUDA(cudaGetLastError());
  D2K_CUDA(cudaDeviceSynchronize());
  return seconds_since(t0) * 1e3;
}

TimingResult measure_cold(const LaunchFn& launch, void* stream, const TimingConfig& cfg,
                          const LaunchFn& prepare) {
  return ColdTimer().measure_cold(launch, stream, cfg, prepare);
}

TimingResult measure_graph(const LaunchFn& launch, void* stream, const TimingConfig& cfg) {
  return ColdTimer().measure_graph(launch, stream, cfg);
}

double measure_wall_ms(const LaunchFn& launch, void* stream, bool flush_l2) {
  return ColdTimer().measure_wall_ms(launch, stream, flush_l2);
}

}  // namespace d2k::timing
