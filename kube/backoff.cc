#include "kube/backoff.h"

namespace nvl72::kube {

std::chrono::nanoseconds ExponentialDelay(std::chrono::nanoseconds base,
                                          std::chrono::nanoseconds max, int64_t failures) {
  if (failures < 0) failures = 0;
  if (base <= std::chrono::nanoseconds::zero()) return std::chrono::nanoseconds::zero();
  // Double until past max; at most ~63 iterations, so no overflow and no pow() rounding.
  std::chrono::nanoseconds d = base;
  for (int64_t i = 0; i < failures; ++i) {
    if (d >= max / 2) return max;
    d *= 2;
  }
  return d < max ? d : max;
}

std::chrono::nanoseconds Backoff::Next() {
  std::chrono::nanoseconds d = ExponentialDelay(initial_, max_, failures_);
  ++failures_;
  if (jitter_ > 0) {
    std::uniform_real_distribution<double> u(0.0, jitter_);
    d += std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(d.count()) * u(rng_)));
  }
  return d;
}

}  // namespace nvl72::kube
