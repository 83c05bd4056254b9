#include "kube/workqueue.h"

#include <algorithm>
#include <cmath>

#include "kube/backoff.h"

namespace nvl72::kube {

ItemExponentialRateLimiter::ItemExponentialRateLimiter(Clock::Duration base, Clock::Duration max)
    : base_(base), max_(max) {}

Clock::Duration ItemExponentialRateLimiter::When(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  int failures = failures_[key]++;
  return std::chrono::duration_cast<Clock::Duration>(ExponentialDelay(base_, max_, failures));
}

void ItemExponentialRateLimiter::Forget(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  failures_.erase(key);
}

int ItemExponentialRateLimiter::NumRequeues(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

TokenBucketRateLimiter::TokenBucketRateLimiter(Clock* clock, double qps, int burst)
    : clock_(clock), qps_(qps), burst_(burst), tokens_(burst), last_(clock->Now()) {}

Clock::Duration TokenBucketRateLimiter::When(const std::string&) {
  std::lock_guard<std::mutex> l(mu_);
  Clock::TimePoint now = clock_->Now();
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  // Reserve a token; a negative balance is the queue of reservations ahead of us.
  tokens_ -= 1.0;
  if (tokens_ >= 0) return Clock::Duration::zero();
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double>(-tokens_ / qps_));
}

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

Clock::Duration MaxOfRateLimiter::When(const std::string& key) {
  Clock::Duration d = Clock::Duration::zero();
  for (auto& l : limiters_) d = std::max(d, l->When(key));
  return d;
}

void MaxOfRateLimiter::Forget(const std::string& key) {
  for (auto& l : limiters_) l->Forget(key);
}

int MaxOfRateLimiter::NumRequeues(const std::string& key) {
  int n = 0;
  for (auto& l : limiters_) n = std::max(n, l->NumRequeues(key));
  return n;
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock* clock) {
  std::vector<std::unique_ptr<RateLimiter>> v;
  v.push_back(std::make_unique<ItemExponentialRateLimiter>(std::chrono::milliseconds(5),
                                                           std::chrono::seconds(1000)));
  v.push_back(std::make_unique<TokenBucketRateLimiter>(clock, 10.0, 100));
  return std::make_unique<MaxOfRateLimiter>(std::move(v));
}

WorkQueue::WorkQueue(Clock* clock, std::unique_ptr<RateLimiter> limiter)
    : clock_(clock), limiter_(limiter ? std::move(limiter) : DefaultControllerRateLimiter(clock)) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_) return;
  if (dirty_.count(key)) return;
  dirty_.insert(key);
  if (processing_.count(key)) return;  // re-queued by Done()
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, Clock::Duration delay) {
  std::lock_guard<std::mutex> l(mu_);
  if (shutting_down_) return;
  if (delay <= Clock::Duration::zero()) {
    AddLocked(key);
    return;
  }
  Clock::TimePoint ready = clock_->Now() + delay;
  auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    if (it->second <= ready) return;  // already due earlier
    waiting_order_.erase({it->second, key});
    it->second = ready;
  } else {
    waiting_.emplace(key, ready);
  }
  waiting_order_.insert({ready, key});
  // Wake a Get() so it recomputes how long to sleep.
  cv_.notify_all();
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_->When(key)); }

void WorkQueue::Forget(const std::string& key) { limiter_->Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) { return limiter_->NumRequeues(key); }

void WorkQueue::PromoteDueLocked() {
  Clock::TimePoint now = clock_->Now();
  while (!waiting_order_.empty() && waiting_order_.begin()->first <= now) {
    std::string key = waiting_order_.begin()->second;
    waiting_order_.erase(waiting_order_.begin());
    waiting_.erase(key);
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::Get() { return GetImpl(std::nullopt); }

std::optional<std::string> WorkQueue::GetUntil(Clock::TimePoint deadline) {
  return GetImpl(deadline);
}

std::optional<std::string> WorkQueue::GetImpl(std::optional<Clock::TimePoint> deadline) {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    if (shutting_down_) return std::nullopt;
    PromoteDueLocked();
    if (!queue_.empty()) break;
    Clock::TimePoint wake = Clock::TimePoint::max();
    if (!waiting_order_.empty()) wake = waiting_order_.begin()->first;
    if (deadline) {
      if (clock_->Now() >= *deadline) return std::nullopt;
      wake = std::min(wake, *deadline);
    }
    // Bounded waits: time_point::max() overflows some condition-variable implementations.
    wake = std::min(wake, clock_->Now() + std::chrono::hours(1));
    size_t waiting_before = waiting_order_.size();
    Clock::TimePoint first_before =
        waiting_order_.empty() ? Clock::TimePoint::max() : waiting_order_.begin()->first;
    clock_->WaitUntil(cv_, l, wake, [&] {
      return shutting_down_ || !queue_.empty() || waiting_order_.size() != waiting_before ||
             (!waiting_order_.empty() && waiting_order_.begin()->first != first_before);
    });
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  processing_.erase(key);
  if (dirty_.count(key) && !shutting_down_) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> l(mu_);
  return queue_.size();
}

size_t WorkQueue::NumWaiting() const {
  std::lock_guard<std::mutex> l(mu_);
  return waiting_.size();
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> l(mu_);
  return shutting_down_;
}

}  // namespace nvl72::kube
