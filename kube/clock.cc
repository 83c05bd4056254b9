#include "kube/clock.h"

#include <thread>

namespace nvl72::kube {
namespace {

class RealClockImpl : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now();
  }
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline, const std::function<bool()>& pred) override {
    return cv.wait_until(lock, deadline, pred);
  }
  void SleepFor(Duration d) override {
    if (d > Duration::zero()) std::this_thread::sleep_for(d);
  }
};

// Real-time slice after which a fake-clock waiter re-checks the fake time.
constexpr std::chrono::milliseconds kFakePoll{1};

}  // namespace

Clock* RealClock() {
  static RealClockImpl* clock = new RealClockImpl();
  return clock;
}

FakeClock::FakeClock()
    : now_(std::chrono::steady_clock::time_point() + std::chrono::hours(1000)),
      wall_start_(std::chrono::system_clock::time_point() + std::chrono::seconds(1767225600)),
      start_(now_) {}

Clock::TimePoint FakeClock::Now() const {
  std::lock_guard<std::mutex> l(mu_);
  return now_;
}

std::chrono::system_clock::time_point FakeClock::WallNow() const {
  std::lock_guard<std::mutex> l(mu_);
  return wall_start_ +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(now_ - start_);
}

bool FakeClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          TimePoint deadline, const std::function<bool()>& pred) {
  bool counted = false;
  bool result;
  while (true) {
    if (pred()) {
      result = true;
      break;
    }
    if (Now() >= deadline) {
      result = pred();
      break;
    }
    if (!counted) {
      std::lock_guard<std::mutex> l(mu_);
      ++waiters_;
      counted = true;
    }
    cv.wait_for(lock, kFakePoll);
  }
  if (counted) {
    std::lock_guard<std::mutex> l(mu_);
    --waiters_;
  }
  return result;
}

void FakeClock::SleepFor(Duration d) {
  std::unique_lock<std::mutex> l(mu_);
  TimePoint deadline = now_ + d;
  if (now_ >= deadline) return;
  ++waiters_;
  advanced_.wait(l, [&] { return now_ >= deadline; });
  --waiters_;
}

void FakeClock::Advance(Duration d) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (d > Duration::zero()) now_ += d;
  }
  advanced_.notify_all();
}

int FakeClock::NumWaiters() const {
  std::lock_guard<std::mutex> l(mu_);
  return waiters_;
}

}  // namespace nvl72::kube
