// Clock: the one place kube/ reads time or sleeps, so that tests can drive time by hand.
//
// Every time-dependent component in kube/ (WorkQueue, Informer, LeaderElector, EventRecorder) takes
// a Clock* in its constructor. Production code passes RealClock(); tests pass a FakeClock and call
// Advance().
//
// Thread-safety: all methods of RealClock and FakeClock may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace nvl72::kube {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  // Monotonic time: use for deadlines, backoff, lease expiry.
  virtual TimePoint Now() const = 0;
  // Wall-clock time: use only for timestamps written to the API server (MicroTime, eventTime).
  virtual std::chrono::system_clock::time_point WallNow() const = 0;

  // Waits on `cv` until `pred()` is true or Now() >= deadline. Returns the final value of pred().
  // REQUIRES: `lock` is held and locks the mutex that guards the state `pred` reads; whoever
  // changes that state notifies `cv`. The lock is held again on return.
  virtual bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         TimePoint deadline, const std::function<bool()>& pred) = 0;

  // Blocks the calling thread for `d` of this clock's time.
  virtual void SleepFor(Duration d) = 0;
};

// The process-wide real clock (std::chrono::steady_clock / system_clock). Never null, never freed.
Clock* RealClock();

// A manually driven clock. Time starts at an arbitrary fixed point and moves only on Advance().
// Waiters poll the fake time every millisecond of real time, so a waiter notices an Advance()
// within ~1 ms; tests that need to know a thread is blocked can poll NumWaiters().
class FakeClock : public Clock {
 public:
  FakeClock();

  TimePoint Now() const override;
  std::chrono::system_clock::time_point WallNow() const override;
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline, const std::function<bool()>& pred) override;
  void SleepFor(Duration d) override;

  // Moves time forward by `d` (d >= 0) and wakes sleepers whose deadline has passed.
  void Advance(Duration d);
  // Number of threads currently inside WaitUntil() or SleepFor() with a deadline in the future.
  int NumWaiters() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable advanced_;
  TimePoint now_;
  std::chrono::system_clock::time_point wall_start_;
  TimePoint start_;
  int waiters_ = 0;
};

}  // namespace nvl72::kube
