#include "kube/workqueue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "kube/backoff.h"

namespace nvl72::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(BackoffTest, ExponentialDelayArithmetic) {
  auto base = milliseconds(5);
  auto max = seconds(1000);
  EXPECT_EQ(ExponentialDelay(base, max, 0), milliseconds(5));
  EXPECT_EQ(ExponentialDelay(base, max, 1), milliseconds(10));
  EXPECT_EQ(ExponentialDelay(base, max, 10), milliseconds(5120));
  // 5 ms * 2^17 = 655.36 s; 2^18 -> 1310 s > max.
  EXPECT_EQ(ExponentialDelay(base, max, 17), milliseconds(655360));
  EXPECT_EQ(ExponentialDelay(base, max, 18), seconds(1000));
  EXPECT_EQ(ExponentialDelay(base, max, 1000000), seconds(1000));  // no overflow
  EXPECT_EQ(ExponentialDelay(base, max, -3), milliseconds(5));
}

TEST(BackoffTest, StatefulWithJitter) {
  Backoff b(milliseconds(100), seconds(1), 0.0);
  EXPECT_EQ(b.Next(), milliseconds(100));
  EXPECT_EQ(b.Next(), milliseconds(200));
  EXPECT_EQ(b.Next(), milliseconds(400));
  EXPECT_EQ(b.Next(), milliseconds(800));
  EXPECT_EQ(b.Next(), seconds(1));
  b.Reset();
  EXPECT_EQ(b.Next(), milliseconds(100));
  Backoff j(milliseconds(100), seconds(1), 0.5, 42);
  for (int i = 0; i < 20; ++i) {
    auto d = j.Next();
    auto plain = ExponentialDelay(milliseconds(100), seconds(1), i);
    EXPECT_GE(d, plain);
    EXPECT_LE(d, plain * 3 / 2);
  }
}

TEST(RateLimiterTest, ItemExponentialPerKey) {
  ItemExponentialRateLimiter r(milliseconds(5), seconds(1000));
  EXPECT_EQ(r.When("a"), milliseconds(5));
  EXPECT_EQ(r.When("a"), milliseconds(10));
  EXPECT_EQ(r.When("b"), milliseconds(5));
  EXPECT_EQ(r.NumRequeues("a"), 2);
  r.Forget("a");
  EXPECT_EQ(r.NumRequeues("a"), 0);
  EXPECT_EQ(r.When("a"), milliseconds(5));
}

TEST(RateLimiterTest, TokenBucketBurstThenQps) {
  FakeClock clock;
  TokenBucketRateLimiter r(&clock, 10.0, 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.When("k"), Clock::Duration::zero()) << i;
  // Burst used up: reservations queue at 100 ms intervals.
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(r.When("k")), milliseconds(100));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(r.When("k")), milliseconds(200));
  clock.Advance(seconds(1));  // 10 tokens back; 2 were owed
  for (int i = 0; i < 8; ++i) EXPECT_EQ(r.When("k"), Clock::Duration::zero()) << i;
  EXPECT_GT(r.When("k"), Clock::Duration::zero());
}

TEST(RateLimiterTest, DefaultIsMaxOfBoth) {
  FakeClock clock;
  auto r = DefaultControllerRateLimiter(&clock);
  EXPECT_EQ(r->When("a"), milliseconds(5));
  EXPECT_EQ(r->When("a"), milliseconds(10));
  EXPECT_EQ(r->NumRequeues("a"), 2);
  r->Forget("a");
  EXPECT_EQ(r->NumRequeues("a"), 0);
  // Exhaust the bucket with other keys: now the bucket dominates for a fresh key.
  for (int i = 0; i < 200; ++i) (void)r->When("k" + std::to_string(i));
  EXPECT_GT(r->When("fresh"), seconds(5));
}

TEST(WorkQueueTest, DedupAndFifo) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(*q.Get(), "a");
  EXPECT_EQ(*q.Get(), "b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, DirtyWhileProcessingRequeuedOnDone) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  auto k = q.Get();
  ASSERT_EQ(*k, "a");
  q.Add("a");  // while processing: not handed out again yet
  q.Add("a");
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_FALSE(q.GetUntil(clock.Now()).has_value());
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(*q.Get(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, NeverTwoWorkersOnOneKey) {
  WorkQueue q(RealClock());
  std::atomic<int> in_flight_a{0};
  std::atomic<bool> overlap{false};
  std::atomic<int> processed{0};
  std::vector<std::thread> workers;
  workers.reserve(4);
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.Get()) {
        if (*key == "a") {
          if (in_flight_a.fetch_add(1) != 0) overlap = true;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          in_flight_a.fetch_sub(1);
        }
        ++processed;
        q.Done(*key);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    q.Add("a");
    q.Add("k" + std::to_string(i % 7));
    if (i % 100 == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  while (q.Len() > 0) std::this_thread::sleep_for(milliseconds(1));
  std::this_thread::sleep_for(milliseconds(20));
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_FALSE(overlap);
  EXPECT_GT(processed.load(), 0);
}

TEST(WorkQueueTest, AddAfterUsesClock) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("late", seconds(10));
  q.AddAfter("early", seconds(5));
  q.AddAfter("late", seconds(30));  // later than pending: ignored
  EXPECT_EQ(q.NumWaiting(), 2u);
  EXPECT_FALSE(q.GetUntil(clock.Now()).has_value());
  clock.Advance(seconds(5));
  EXPECT_EQ(*q.GetUntil(clock.Now()), "early");
  std::optional<std::string> got;
  std::thread t([&] { got = q.Get(); });
  while (clock.NumWaiters() == 0) std::this_thread::sleep_for(milliseconds(1));
  clock.Advance(seconds(5));
  t.join();
  EXPECT_EQ(*got, "late");
  EXPECT_EQ(q.NumWaiting(), 0u);
}

TEST(WorkQueueTest, AddAfterWhileQueuedDedups) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.AddAfter("a", seconds(1));
  clock.Advance(seconds(1));
  EXPECT_EQ(*q.Get(), "a");
  EXPECT_FALSE(q.GetUntil(clock.Now()).has_value());
}

TEST(WorkQueueTest, RateLimitedBackoffAndForget) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddRateLimited("a");  // 5 ms
  EXPECT_EQ(q.NumRequeues("a"), 1);
  EXPECT_FALSE(q.GetUntil(clock.Now()).has_value());
  clock.Advance(milliseconds(5));
  EXPECT_EQ(*q.GetUntil(clock.Now()), "a");
  q.AddRateLimited("a");  // 10 ms
  q.Done("a");
  clock.Advance(milliseconds(9));
  EXPECT_FALSE(q.GetUntil(clock.Now()).has_value());
  clock.Advance(milliseconds(1));
  EXPECT_EQ(*q.GetUntil(clock.Now()), "a");
  q.Forget("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
  q.Done("a");
}

TEST(WorkQueueTest, ShutDownWakesWorkersAndIgnoresAdds) {
  FakeClock clock;
  WorkQueue q(&clock);
  std::vector<std::thread> workers;
  std::atomic<int> ended{0};
  workers.reserve(3);
  for (int i = 0; i < 3; ++i) {
    workers.emplace_back([&] {
      while (q.Get()) {
      }
      ++ended;
    });
  }
  std::this_thread::sleep_for(milliseconds(10));
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_EQ(ended.load(), 3);
  EXPECT_TRUE(q.ShuttingDown());
  q.Add("x");
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_FALSE(q.Get().has_value());
}

}  // namespace
}  // namespace nvl72::kube
