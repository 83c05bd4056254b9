// Test support: wait for state that another thread publishes (informers, caches, elections). The
// timeout bounds the test's run; it is not a timing assertion. Tests only.
#pragma once

#include <chrono>
#include <thread>

namespace nvl72::testutil {

// True as soon as `pred()` holds, polling every `poll`; after `timeout`, one last `pred()`.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(5),
                std::chrono::milliseconds poll = std::chrono::milliseconds(1)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(poll);
  }
  return pred();
}

}  // namespace nvl72::testutil
