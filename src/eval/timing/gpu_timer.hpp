#pragma once
// Cold GPU timing of one launch: L2 flushed, launch queued behind a blocking kernel, CUDA events around
// it, SM clock probed around each sample so throttled samples are dropped, stop on noise.
// Plain C++ (no CUDA types) so CPU-only code can include it; defined in gpu_timer.cu, which is built
// only when d2k_timing has CUDA (D2K_WITH_CUDA=1). A stream travels as void* holding a cudaStream_t
// (nullptr = the legacy default stream) and must belong to the timer's device.
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "eval/timing/criterion.hpp"
#include "eval/timing/stats.hpp"
#include "eval/timing/throttle.hpp"

namespace d2k::timing {

struct TimingConfig {
  CriterionConfig criterion;
  ThrottleConfig throttle;
  bool flush_l2 = true;            // false only for warm measurements (tests, cross-checks)
  double clock_probe_us = 10;      // global-time span of each clock probe; 0 turns probing off
  std::size_t warmup_samples = 3;  // full samples dropped first, after one unblocked call (module loading)
  double block_timeout_s = 2.0;    // the blocking kernel gives up after this and the sample throws
  // false: no blocking kernel, for trusted code that synchronizes with the GPU inside the launch (an eager
  // PyTorch reference reading sizes with .item()); its host gaps then count, as they do for its users.
  bool block_stream = true;
};

struct TimingResult {
  std::vector<double> samples_ms;  // kept samples, in the order taken
  std::vector<double> clocks_mhz;  // SM clock estimate of each kept sample; NaN when probing is off
  Stats stats;                     // over samples_ms
  std::size_t throttled = 0;       // samples discarded by the throttle filter
  StopReason stop = StopReason::none;
  double wall_s = 0;  // the whole measurement, warm-up included
  double sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();   // median of clocks_mhz
  double reference_mhz = std::numeric_limits<double>::quiet_NaN();  // what the throttle filter compared to
  // The whole-device bracket of every sample (kept or not): host time from the moment the stream is released
  // (or the launch begins, without the blocking kernel) to the return of cudaDeviceSynchronize. Work hidden
  // from the events (another stream, a thread, a forged elapsed time) still lands inside it.
  std::vector<double> bracket_ms;
  double bracket_median_ms = std::numeric_limits<double>::quiet_NaN();
  // median(bracket - event time) over samples of an empty launch taken first: the bracket's own cost.
  double bracket_overhead_ms = std::numeric_limits<double>::quiet_NaN();
};

// Enqueues the work under test on the stream it is given (a cudaStream_t). It must not synchronize
// with the device or wait for the GPU: the stream is held by a blocking kernel until it returns, so
// such a launch stalls until block_timeout_s and the sample throws. It should enqueue at most a few
// hundred operations (more can fill the launch queue the same way); use measure_graph for more.
using LaunchFn = std::function<void(void* stream)>;

// Every CUDA call is checked; a failure throws std::runtime_error naming the call and the CUDA error
// (a sticky error such as an illegal address surfaces at the sample's synchronization). One thread at
// a time; the calling thread's current device is restored on return.
class ColdTimer {
 public:
  explicit ColdTimer(int device = -1);  // -1: the calling thread's current device
  ~ColdTimer();
  ColdTimer(const ColdTimer&) = delete;
  ColdTimer& operator=(const ColdTimer&) = delete;

  int device() const;
  std::size_t l2_bytes() const;     // cudaDevAttrL2CacheSize
  std::size_t flush_bytes() const;  // size of the flush buffer: 2 x L2

  // Resets persisting L2 lines to normal, then overwrites the flush buffer on `stream` (asynchronous).
  void flush(void* stream);
  // One synchronous clock probe on `stream`: SM clock in MHz over `span_us` of global time.
  double probe_clock_mhz(void* stream, double span_us = 10);

  // Times `launch` cold, one launch per sample, until the stopping criterion says so. `prepare`, when given,
  // runs before every launch (and before its L2 flush), outside the timed window: it may enqueue work on the
  // stream (placing the next input set, poisoning outputs).
  TimingResult measure_cold(const LaunchFn& launch, void* stream, const TimingConfig& cfg = {},
                            const LaunchFn& prepare = {});
  // Captures `launch` once into a CUDA graph (thread-local capture mode, on a stream of the timer's
  // own) and times one replay per sample on `stream`, each preceded by the L2 flush outside the graph.
  // Removes the GPU-side gaps between launches; host-side work inside `launch` is not replayed.
  // Throws if `launch` enqueued nothing on the capture stream.
  TimingResult measure_graph(const LaunchFn& launch, void* stream, const TimingConfig& cfg = {});
  // Host wall clock around launch + cudaDeviceSynchronize, after a synchronized flush; milliseconds.
  // For cross-checking event times: work hidden on other streams still lands inside this window.
  double measure_wall_ms(const LaunchFn& launch, void* stream, bool flush_l2 = true);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Conveniences that build a ColdTimer on the current device for one call (allocating its flush buffer).
TimingResult measure_cold(const LaunchFn& launch, void* stream, const TimingConfig& cfg = {},
                          const LaunchFn& prepare = {});
TimingResult measure_graph(const LaunchFn& launch, void* stream, const TimingConfig& cfg = {});
double measure_wall_ms(const LaunchFn& launch, void* stream, bool flush_l2 = true);

}  // namespace d2k::timing
