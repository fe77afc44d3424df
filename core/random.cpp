#include "core/random.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

namespace attntune {

void Normal::Fill(float* out, size_t n) {
  size_t at = 0;
  if (n > 0 && has_spare_) {
    out[at++] = static_cast<float>(spare_);
    has_spare_ = false;
  }
  // Whole pairs a block at a time: the block's draws in the engine's order, then its
  // transforms (log, sqrt, sin, cos: nearly all of the time) on up to kThreads threads,
  // each pair's numbers from its own two draws alone, so the values do not depend on the
  // split. 2^20 pairs of draws are 16 MB; a block's threads are started for it (15 started
  // and joined took 0.7 ms on a 2-core build machine, 2026-11-27), so each has 2^16 pairs
  // or more (4 ms at the 67 ns a pair one thread took there).
  constexpr size_t kBlockPairs = size_t{1} << 20;
  constexpr size_t kPairsPerThread = size_t{1} << 15;  // below it a thread costs more than it saves
  constexpr unsigned kThreads = 16;
  const unsigned cores = std::max(1u, std::min(kThreads, std::thread::hardware_concurrency()));
  std::vector<uint64_t> draws;
  while (n - at >= 2) {
    const size_t pairs = std::min(kBlockPairs, (n - at) / 2);
    draws.resize(2 * pairs);
    for (uint64_t& d : draws) d = engine_();
    float* block = out + at;
    auto transform = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        double first, second;
        BoxMuller(draws[2 * i], draws[2 * i + 1], &first, &second);
        block[2 * i] = static_cast<float>(first);
        block[2 * i + 1] = static_cast<float>(second);
      }
    };
    const size_t threads = std::min<size_t>(cores, (pairs + kPairsPerThread - 1) / kPairsPerThread);
    auto part = [&](size_t t) { return pairs * t / threads; };  // part t: [part(t), part(t + 1))
    std::vector<std::thread> pool;
    size_t started = 1;
    for (; started < threads; ++started) {
      try {
        pool.emplace_back(transform, part(started), part(started + 1));
      } catch (const std::system_error&) {  // no thread to be had: this one does the rest
        break;
      }
    }
    transform(0, part(1));
    for (size_t t = started; t < threads; ++t) transform(part(t), part(t + 1));
    for (std::thread& t : pool) t.join();
    at += 2 * pairs;
  }
  if (at < n) out[at] = static_cast<float>(Next());  // its pair's second is the spare
}

}  // namespace attntune
