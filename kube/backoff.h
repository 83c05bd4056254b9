// Exponential backoff arithmetic shared by the work queue, the informer and the leader elector.
// Thread-safety: Backoff is a value (not synchronised); the free function is pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace nvl72::kube {

// base * 2^failures, capped at max (no overflow for any failures >= 0).
std::chrono::nanoseconds ExponentialDelay(std::chrono::nanoseconds base,
                                          std::chrono::nanoseconds max, int64_t failures);

// Stateful backoff for reconnect loops: Next() returns initial, 2*initial, ... up to max, each with
// up to `jitter` (fraction, e.g. 0.2) added; Reset() after a success.
class Backoff {
 public:
  Backoff(std::chrono::nanoseconds initial, std::chrono::nanoseconds max, double jitter = 0.0,
          uint64_t seed = 0x6e766c3732ULL)
      : initial_(initial), max_(max), jitter_(jitter), rng_(seed) {}
  std::chrono::nanoseconds Next();
  void Reset() { failures_ = 0; }
  int64_t failures() const { return failures_; }

 private:
  std::chrono::nanoseconds initial_;
  std::chrono::nanoseconds max_;
  double jitter_;
  std::mt19937_64 rng_;
  int64_t failures_ = 0;
};

}  // namespace nvl72::kube
