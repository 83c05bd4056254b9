#include "sim/metrics.h"

#include <algorithm>
#include <cmath>

namespace nvl72::sim {

void WaitingClock::Advance(double t, bool waiting_from_t) {
  if (times_.empty()) {
    times_.push_back(t);
    cumulative_.push_back(0);
    waiting_.push_back(waiting_from_t);
    return;
  }
  const double last_t = times_.back();
  if (t <= last_t) {
    waiting_.back() =
        waiting_from_t;  // zero-length interval: only the flag of what follows matters
    return;
  }
  const double w = cumulative_.back() + (waiting_.back() ? t - last_t : 0.0);
  times_.push_back(t);
  cumulative_.push_back(w);
  waiting_.push_back(waiting_from_t);
}

double WaitingClock::At(double t) const {
  if (times_.empty() || t <= times_.front()) {
    return 0;
  }
  // Last breakpoint <= t.
  auto it = std::upper_bound(times_.begin(), times_.end(), t);
  size_t i = static_cast<size_t>(it - times_.begin()) - 1;
  if (i + 1 == times_.size()) {
    return cumulative_[i];  // at or past the last breakpoint
  }
  return cumulative_[i] + (waiting_[i] ? t - times_[i] : 0.0);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  rank = std::clamp<size_t>(rank, 1, values.size());
  return values[rank - 1];
}

}  // namespace nvl72::sim
