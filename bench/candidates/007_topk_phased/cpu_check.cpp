// Runs solution.cu's d2k_solve on small batches and judges the ids as reference.py's check() does: support (every
// id in its row's K & P, computed in float64 with the check's tolerances) and, for batches of identical rows, the
// distribution (every token's count within 6 standard deviations plus 3 of its expectation; looser than the
// task's Bernstein bound, enough to catch a dropped token or a wrong renormalization).
// Two builds: g++ -DD2K_CPU_EMU (bench/cuda_emu; cpu-check.sh, the CTest) and nvcc -x cu (the GPU; gpu-check.sh).
// Prints one line per case; exits 1 on a failure.
#ifdef D2K_CPU_EMU
#include "../../cuda_emu/cuda_emu.hpp"
#endif
#include "solution.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

struct Batch {
  int B = 0, V = 0;
  std::vector<float> logits, T, p, u;
  std::vector<int> k;
};

constexpr int kDraws = 32;

d2k_tensor tensor(void* data, int dtype, std::vector<int64_t> shape) {
  d2k_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int>(shape.size());
  int64_t st = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.strides[i] = st;
    st *= shape[i];
  }
  return t;
}

int solve(const Batch& bt, std::vector<long long>& ids) {
  ids.assign(bt.B, -7);
  std::vector<float> logits = bt.logits, T = bt.T, p = bt.p, u = bt.u;
  std::vector<int> k = bt.k;
  void* ptr[6] = {logits.data(), T.data(), k.data(), p.data(), u.data(), ids.data()};
  const size_t bytes[6] = {logits.size() * 4, T.size() * 4, k.size() * 4, p.size() * 4, u.size() * 4,
                           ids.size() * 8};
#ifndef D2K_CPU_EMU
  void* host[6];
  std::memcpy(host, ptr, sizeof(ptr));
  for (int i = 0; i < 6; ++i) {
    if (cudaMalloc(&ptr[i], bytes[i]) != cudaSuccess) return 90;
    cudaMemcpy(ptr[i], host[i], bytes[i], cudaMemcpyHostToDevice);
  }
#else
  (void)bytes;
#endif
  const d2k_tensor in[5] = {tensor(ptr[0], D2K_FLOAT32, {bt.B, bt.V}), tensor(ptr[1], D2K_FLOAT32, {bt.B}),
                            tensor(ptr[2], D2K_INT32, {bt.B}), tensor(ptr[3], D2K_FLOAT32, {bt.B}),
                            tensor(ptr[4], D2K_FLOAT32, {bt.B, kDraws})};
  d2k_tensor out[1] = {tensor(ptr[5], D2K_INT64, {bt.B})};
  int rc = d2k_solve(in, 5, out, 1, nullptr, 0, nullptr);
#ifndef D2K_CPU_EMU
  if (rc == 0 && cudaDeviceSynchronize() != cudaSuccess) rc = 91;
  cudaMemcpy(host[5], ptr[5], bytes[5], cudaMemcpyDeviceToHost);
  for (int i = 0; i < 6; ++i) cudaFree(ptr[i]);
#endif
  return rc;
}

// K & P of one row in float64, without tolerance; probs out.
std::vector<char> kept_mask(const float* l, int V, double T, long long k, double p, std::vector<double>& probs) {
  std::vector<double> z(V);
  double m = -INFINITY;
  for (int i = 0; i < V; ++i) m = std::max(m, z[i] = l[i] / T);
  double Z = 0;
  probs.resize(V);
  for (int i = 0; i < V; ++i) Z += probs[i] = std::exp(z[i] - m);
  for (double& q : probs) q /= Z;
  std::vector<int> o(V);
  std::iota(o.begin(), o.end(), 0);
  std::sort(o.begin(), o.end(), [&](int a, int b) { return l[a] > l[b]; });
  const long long kk = std::min<long long>(std::max<long long>(k, 1), V);
  const float kth = l[o[kk - 1]];
  std::vector<char> keep(V, 0);
  double above = 0;  // mass strictly above the current tie group
  for (int i = 0; i < V;) {
    int j = i;
    double g = 0;
    while (j < V && l[o[j]] == l[o[i]]) g += probs[o[j++]];
    for (int t = i; t < j; ++t) keep[o[t]] = (l[o[t]] >= kth) && above < p;
    above += g;
    i = j;
  }
  return keep;
}

// The check's support test for one id (tolerances of reference.py).
bool in_support(const float* l, int V, double T, long long k, double p, long long id, std::string& why) {
  if (id < 0 || id >= V) {
    why = "id " + std::to_string(id) + " out of range";
    return false;
  }
  double m = -INFINITY;
  for (int i = 0; i < V; ++i) m = std::max(m, l[i] / T);
  double Z = 0, mass = 0;
  long long cnt = 0;
  const double lj = l[id], gap = 1e-6 * (1.0 + std::fabs(lj));
  for (int i = 0; i < V; ++i) {
    const double e = std::exp(l[i] / T - m);
    Z += e;
    if (l[i] > lj + gap) {
      ++cnt;
      mass += e;
    }
  }
  mass /= Z;
  if (cnt >= k) why = std::to_string(cnt) + " tokens above, top_k " + std::to_string(k);
  if (mass >= p + 1e-4) why += " mass above " + std::to_string(mass) + ", top_p " + std::to_string(p);
  return why.empty();
}

std::mt19937 rng(12345);
float uni() { return std::uniform_real_distribution<float>(0.f, 1.f)(rng); }
float gauss() { return std::normal_distribution<float>(0.f, 1.f)(rng); }
template <class T>
T pick(std::initializer_list<T> v) {
  return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng));
}

enum Mix { SERVING, TIES, FLAT, GREEDY, NO_TOP_K, CONST_ROWS, SMALL_NSEG, P_INSIDE };

Batch make(int B, int V, Mix mix) {
  Batch bt;
  bt.B = B;
  bt.V = V;
  bt.logits.resize(static_cast<size_t>(B) * V);
  bt.T.resize(B);
  bt.k.resize(B);
  bt.p.resize(B);
  bt.u.resize(static_cast<size_t>(B) * kDraws);
  for (int b = 0; b < B; ++b) {
    float* l = &bt.logits[static_cast<size_t>(b) * V];
    for (int i = 0; i < V; ++i) l[i] = 2.f * gauss();
    for (int j = 0; j < std::min(V, 5); ++j) l[rng() % V] += 12.f * uni() * uni();
    bt.T[b] = pick({0.5f, 0.7f, 0.8f, 1.0f, 1.0f, 1.2f});
    const long long big = static_cast<long long>(V) + 7;
    bt.k[b] = static_cast<int>(pick<long long>({1, 5, 20, 40, 50, 100, 1000, V, big}));
    bt.p[b] = pick({0.5f, 0.8f, 0.9f, 0.95f, 1.0f});
    if (mix == TIES) {
      for (int i = 0; i < V; ++i) l[i] = std::round(l[i] * 2.f) / 2.f;
      bt.k[b] = pick({1, 2, 3, 5, 10});
    } else if (mix == FLAT) {
      for (int i = 0; i < V; ++i) l[i] = 0.02f * gauss();
      bt.k[b] = pick({1, 2, 3, 4});
      bt.p[b] = pick({0.3f, 0.6f, 1.0f});
    } else if (mix == GREEDY) {
      bt.k[b] = 1;
      if (b % 2 == 0) l[rng() % V] = *std::max_element(l, l + V);
    } else if (mix == NO_TOP_K) {
      bt.k[b] = pick({V, V + 1, 0x7fffffff});
      bt.p[b] = pick({0.3f, 0.6f, 0.9f, 0.99f});
    } else if (mix == CONST_ROWS) {  // every candidate tied: the list overflows, the rows are tested
      for (int i = 0; i < V; ++i) l[i] = 1.5f;
      bt.k[b] = pick({1, 3, 100});
    } else if (mix == P_INSIDE) {  // peaked rows, large top_k, small top_p: the crossing lies among the candidates
      for (int i = 0; i < V; ++i) l[i] = 3.f * gauss();
      bt.T[b] = pick({0.8f, 1.0f});
      bt.k[b] = pick({100, 200, 300});  // <= 313 segments: every row takes the list
      bt.p[b] = pick({0.2f, 0.4f, 0.6f});
    } else if (mix == SMALL_NSEG) {  // top_k beyond the segment count: tested with counts, often rejected
      for (int i = 0; i < V; ++i) l[i] = 0.3f * gauss();
      bt.k[b] = pick({5, 9, 20});
      bt.p[b] = pick({0.5f, 1.0f});
    }
    for (int r = 0; r < kDraws; ++r) bt.u[static_cast<size_t>(b) * kDraws + r] = uni();
  }
  return bt;
}

int check_support(const char* name, const Batch& bt) {
  std::vector<long long> ids;
  const int rc = solve(bt, ids);
  if (rc != 0) {
    std::printf("%-28s FAIL: d2k_solve returned %d\n", name, rc);
    return 1;
  }
  int bad = 0;
  for (int b = 0; b < bt.B; ++b) {
    std::string why;
    if (!in_support(&bt.logits[static_cast<size_t>(b) * bt.V], bt.V, bt.T[b], bt.k[b], bt.p[b], ids[b], why)) {
      if (bad++ < 3)
        std::printf("%-28s row %d (k %d, p %.2f, T %.1f): id %lld: %s\n", name, b, bt.k[b], bt.p[b], bt.T[b],
                    ids[b], why.c_str());
    }
  }
  std::printf("%-28s %s (B %d, V %d, %d rows outside K & P)\n", name, bad ? "FAIL" : "ok", bt.B, bt.V, bad);
  return bad ? 1 : 0;
}

// n identical rows: the ids' histogram against the exact renormalized distribution.
int check_distribution(const char* name, int n, int V, float T, int k, float p, bool ties) {
  std::vector<float> row(V);
  for (int i = 0; i < V; ++i) row[i] = ties ? std::round(gauss() * 2.f) / 2.f : 1.5f * gauss();
  Batch bt;
  bt.B = n;
  bt.V = V;
  for (int b = 0; b < n; ++b) {
    bt.logits.insert(bt.logits.end(), row.begin(), row.end());
    bt.T.push_back(T);
    bt.k.push_back(k);
    bt.p.push_back(p);
    for (int r = 0; r < kDraws; ++r) bt.u.push_back(uni());
  }
  std::vector<long long> ids;
  const int rc = solve(bt, ids);
  if (rc != 0) {
    std::printf("%-28s FAIL: d2k_solve returned %d\n", name, rc);
    return 1;
  }
  std::vector<double> probs;
  const std::vector<char> keep = kept_mask(row.data(), V, T, k, p, probs);
  double km = 0;
  for (int i = 0; i < V; ++i) km += keep[i] ? probs[i] : 0.0;
  std::vector<int> cnt(V, 0);
  int outside = 0;
  for (long long id : ids) {
    if (id < 0 || id >= V || !keep[id]) ++outside;
    else ++cnt[id];
  }
  double worst = 0;
  int wi = -1;
  for (int i = 0; i < V; ++i) {
    const double q = keep[i] ? probs[i] / km : 0.0, e = n * q, sd = std::sqrt(n * q * (1 - q));
    const double dev = std::fabs(cnt[i] - e) / (6 * sd + 3);
    if (dev > worst) worst = dev, wi = i;
  }
  const bool ok = outside == 0 && worst <= 1.0;
  int nk = 0;
  for (char c : keep) nk += c;
  std::printf("%-28s %s (%d rows, V %d, %d kept, %d outside, worst token %d at %.2f of the bound)\n", name,
              ok ? "ok" : "FAIL", n, V, nk, outside, wi, worst);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  int fails = 0;
  // --quick (the emulation's CTest): fewer and smaller rows; every route and both load paths still run.
  const int q = quick ? 1 : 8;
  fails += check_support("serving V=128256", make(quick ? 2 : 64, 128256, SERVING));
  fails += check_support("serving V=32000", make(4 * q, 32000, SERVING));
  fails += check_support("serving V=151936", make(quick ? 1 : 32, 151936, SERVING));
  fails += check_support("serving V=1001 (scalar)", make(12 * q, 1001, SERVING));
  fails += check_support("tiny V=5", make(12 * q, 5, SERVING));
  fails += check_support("ties V=20000", make(4 * q, 20000, TIES));
  fails += check_support("flat V=20000", make(4 * q, 20000, FLAT));
  fails += check_support("greedy V=20000", make(4 * q, 20000, GREEDY));
  fails += check_support("no top-k V=20000", make(4 * q, 20000, NO_TOP_K));
  fails += check_support("constant rows V=9000", make(3 * q, 9000, CONST_ROWS));
  fails += check_support("k > segments V=200", make(12 * q, 200, SMALL_NSEG));
  fails += check_support("p inside the list V=20000", make(6 * q, 20000, P_INSIDE));
  const int n = quick ? 100 : 20000;
  fails += check_distribution("dist list (k 3, ties)", n, 300, 1.6f, 3, 0.9f, true);
  fails += check_distribution("dist list (k 50, p 0.6)", n, 3000, 0.7f, 50, 0.6f, false);
  fails += check_distribution("dist list (k 40, p 0.5)", n, 3000, 0.5f, 40, 0.5f, false);
  fails += check_distribution("dist list (k 40, p 0.4, ties)", n, 3000, 0.5f, 40, 0.4f, true);
  fails += check_distribution("dist tested (p 0.6)", n, 300, 1.0f, 1 << 30, 0.6f, false);
  fails += check_distribution("dist tested (k 100 > segs)", n, 200, 1.0f, 100, 0.95f, false);
  fails += check_distribution("dist plain", n, 300, 1.0f, 1 << 30, 1.0f, false);
  std::printf("%s\n", fails ? "FAILED" : "all passed");
  return fails ? 1 : 0;
}
