#pragma once
// Work split into chunks over a few threads (the calling one among them), for passes over large host buffers.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace d2k {

// Runs body(chunk index, begin, end) for every chunk of `chunk` elements of [0, n), on up to max_threads threads;
// returns when all have run.
template <class Body>
void for_chunks(std::size_t n, std::size_t chunk, std::size_t max_threads, Body body) {
  chunk = std::max<std::size_t>(1, chunk);
  const std::size_t chunks = (n + chunk - 1) / chunk;
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t c; (c = next.fetch_add(1)) < chunks;) body(c, c * chunk, std::min(n, (c + 1) * chunk));
  };
  const std::size_t threads = std::min(chunks, std::max<std::size_t>(1, max_threads));
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace d2k
