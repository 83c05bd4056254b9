// WorkQueue: client-go's rate-limited work queue for controllers.
//
// Semantics (same as k8s.io/client-go/util/workqueue):
//  - Dedup: a key added several times before a worker Get()s it is handed out once.
//  - A key is never handed to two workers at once. Adding a key while it is being processed marks
//  it
//    dirty; it is queued again when the worker calls Done().
//  - AddAfter(key, d) adds the key after d of the injected Clock; AddRateLimited(key) waits
//    RateLimiter::When(key). Forget(key) clears the key's failure history (call after success).
//  - ShutDown(): Get() returns nullopt once shut down (items still queued are dropped); later
//  Add()s
//    are ignored. Workers must still call Done() for keys they hold.
//
// Typical worker loop:
//   while (auto key = queue.Get()) {
//     Status s = Reconcile(*key);
//     if (s.ok()) queue.Forget(*key); else queue.AddRateLimited(*key);
//     queue.Done(*key);
//   }
//
// Thread-safety: all methods are safe to call concurrently from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kube/clock.h"

namespace nvl72::kube {

// Decides how long a key waits before being retried. Implementations are thread-safe.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // Delay before the next retry of `key`; records one more failure.
  virtual Clock::Duration When(const std::string& key) = 0;
  // Clears the failure history of `key`.
  virtual void Forget(const std::string& key) = 0;
  virtual int NumRequeues(const std::string& key) = 0;
};

// Per-key exponential: base * 2^failures, capped at max (client-go: 5 ms .. 1000 s).
class ItemExponentialRateLimiter : public RateLimiter {
 public:
  ItemExponentialRateLimiter(Clock::Duration base, Clock::Duration max);
  Clock::Duration When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) override;

 private:
  std::mutex mu_;
  std::unordered_map<std::string, int> failures_;
  Clock::Duration base_, max_;
};

// Global token bucket: `qps` tokens per second, up to `burst`; When() reserves a token and returns
// how long until it is available (client-go BucketRateLimiter, 10 qps / burst 100).
class TokenBucketRateLimiter : public RateLimiter {
 public:
  TokenBucketRateLimiter(Clock* clock, double qps, int burst);
  Clock::Duration When(const std::string& key) override;
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  std::mutex mu_;
  Clock* clock_;
  double qps_;
  double burst_;
  double tokens_;
  Clock::TimePoint last_;
};

// The maximum of several limiters' delays (client-go MaxOfRateLimiter).
class MaxOfRateLimiter : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);
  Clock::Duration When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// client-go's DefaultControllerRateLimiter: max(per-key 5 ms .. 1000 s, bucket 10 qps burst 100).
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock* clock);

class WorkQueue {
 public:
  // `clock` must outlive the queue. `limiter` null -> DefaultControllerRateLimiter(clock).
  explicit WorkQueue(Clock* clock, std::unique_ptr<RateLimiter> limiter = nullptr);
  ~WorkQueue();

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks until a key is ready (returns it, now "processing") or the queue shuts down (nullopt).
  std::optional<std::string> Get();
  // Like Get() but gives up at `deadline` of the queue's clock (nullopt).
  std::optional<std::string> GetUntil(Clock::TimePoint deadline);
  // REQUIRES: `key` was returned by Get() and Done() not yet called for it.
  void Done(const std::string& key);

  // Keys ready to be handed out (not counting delayed or processing ones).
  size_t Len() const;
  // Keys waiting for an AddAfter / AddRateLimited delay.
  size_t NumWaiting() const;
  void ShutDown();
  bool ShuttingDown() const;

 private:
  void AddLocked(const std::string& key);
  void PromoteDueLocked();
  std::optional<std::string> GetImpl(std::optional<Clock::TimePoint> deadline);

  Clock* clock_;
  std::unique_ptr<RateLimiter> limiter_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;
  std::unordered_set<std::string> processing_;
  // Delayed keys: ready time per key (earliest wins) and the ordered index of them.
  std::unordered_map<std::string, Clock::TimePoint> waiting_;
  std::set<std::pair<Clock::TimePoint, std::string>> waiting_order_;
  bool shutting_down_ = false;
};

}  // namespace nvl72::kube
