#include "kube/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/eventually_for_test.h"
#include "kube/fake_client.h"

namespace nvl72::kube {
namespace {

using namespace std::chrono_literals;
using testutil::Eventually;

LeaderElectionConfig Cfg(const std::string& id) {
  LeaderElectionConfig c;
  c.lease_namespace = "kube-system";
  c.lease_name = "nvl72-operator";
  c.identity = id;
  return c;
}

TEST(LeaderElectionTest, ValidatesConfig) {
  EXPECT_TRUE(ValidateLeaderElectionConfig(Cfg("a")).ok());
  auto c = Cfg("");
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());
  c = Cfg("a");
  c.renew_deadline = 15s;
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());
  c = Cfg("a");
  c.retry_period = 9s;
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());
}

TEST(LeaderElectionTest, AcquireWritesLeaseWithMicroTimes) {
  FakeClient client;
  FakeClock clock;
  LeaderElector a(&client, &clock, Cfg("a"));
  ASSERT_TRUE(a.TryAcquireOrRenew());
  auto lease = client.Get(kLeases, "kube-system", "nvl72-operator");
  ASSERT_TRUE(lease.ok());
  const Json& spec = (*lease)["spec"];
  EXPECT_EQ(spec["holderIdentity"], "a");
  EXPECT_EQ(spec["leaseDurationSeconds"], 15);
  EXPECT_EQ(spec["leaseTransitions"], 0);
  std::string renew = spec["renewTime"];
  EXPECT_EQ(renew.size(), std::string("2006-01-02T15:04:05.000000Z").size());
  EXPECT_EQ(renew.back(), 'Z');
  EXPECT_TRUE(ParseTime(renew).ok());
  clock.Advance(2s);
  ASSERT_TRUE(a.TryAcquireOrRenew());
  auto renewed = client.Get(kLeases, "kube-system", "nvl72-operator");
  EXPECT_NE((*renewed)["spec"]["renewTime"], renew);
  EXPECT_EQ((*renewed)["spec"]["acquireTime"], spec["acquireTime"]);
  EXPECT_EQ((*renewed)["spec"]["leaseTransitions"], 0);
}

TEST(LeaderElectionTest, OtherCandidateWaitsForExpiryByItsOwnClock) {
  FakeClient client;
  FakeClock clock;
  LeaderElector a(&client, &clock, Cfg("a"));
  LeaderElector b(&client, &clock, Cfg("b"));
  ASSERT_TRUE(a.TryAcquireOrRenew());
  EXPECT_FALSE(b.TryAcquireOrRenew());  // b observes the record now
  EXPECT_EQ(b.LeaderIdentity(), "a");
  clock.Advance(14s);
  EXPECT_FALSE(b.TryAcquireOrRenew());
  clock.Advance(1s + 1ms);  // 15 s since b first saw this record unchanged
  EXPECT_TRUE(b.TryAcquireOrRenew());
  auto lease = client.Get(kLeases, "kube-system", "nvl72-operator");
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
  // a now sees b holding it.
  EXPECT_FALSE(a.TryAcquireOrRenew());
  EXPECT_EQ(a.LeaderIdentity(), "b");
}

TEST(LeaderElectionTest, RenewalsKeepOthersOut) {
  FakeClient client;
  FakeClock clock;
  LeaderElector a(&client, &clock, Cfg("a"));
  LeaderElector b(&client, &clock, Cfg("b"));
  ASSERT_TRUE(a.TryAcquireOrRenew());
  for (int i = 0; i < 20; ++i) {
    clock.Advance(2s);
    ASSERT_TRUE(a.TryAcquireOrRenew());
    EXPECT_FALSE(b.TryAcquireOrRenew()) << i;
  }
}

TEST(LeaderElectionTest, ConflictingWritesOneWinner) {
  FakeClient client;
  FakeClock clock;
  LeaderElector a(&client, &clock, Cfg("a"));
  LeaderElector b(&client, &clock, Cfg("b"));
  // Both see a free (released) lease, then race: the resourceVersion lets only one in.
  ASSERT_TRUE(a.TryAcquireOrRenew());
  ASSERT_TRUE(a.Release().ok());
  std::atomic<int> winners{0};
  std::thread ta([&] { winners += a.TryAcquireOrRenew(); });
  std::thread tb([&] { winners += b.TryAcquireOrRenew(); });
  ta.join();
  tb.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST(LeaderElectionTest, RunLeadsReleasesOnStopAndSuccessorTakesOverAtOnce) {
  FakeClient client;
  FakeClock clock;
  std::atomic<int> a_started{0}, a_stopped{0}, b_started{0};
  auto ca = Cfg("a");
  ca.on_started_leading = [&] { ++a_started; };
  ca.on_stopped_leading = [&] { ++a_stopped; };
  auto cb = Cfg("b");
  cb.on_started_leading = [&] { ++b_started; };
  LeaderElector a(&client, &clock, ca);
  LeaderElector b(&client, &clock, cb);
  std::stop_source stop_a, stop_b;
  Status ra, rb;
  std::thread ta([&] { ra = a.Run(stop_a.get_token()); });
  ASSERT_TRUE(Eventually([&] { return a_started.load() == 1; }));
  EXPECT_TRUE(a.IsLeader());
  std::thread tb([&] { rb = b.Run(stop_b.get_token()); });
  // b campaigns for a while (several retry periods) without winning.
  for (int i = 0; i < 10; ++i) {
    clock.Advance(500ms);
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(b_started.load(), 0);
  EXPECT_TRUE(a.IsLeader());
  stop_a.request_stop();
  ta.join();
  EXPECT_EQ(ra.code(), StatusCode::kCancelled);
  EXPECT_EQ(a_stopped.load(), 1);
  EXPECT_FALSE(a.IsLeader());
  auto lease = client.Get(kLeases, "kube-system", "nvl72-operator");
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
  // Released: b takes over on its next retry (<= 2.4 s), far below the 15 s lease duration.
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(100ms);
    return b_started.load() == 1;
  }));
  EXPECT_TRUE(b.IsLeader());
  stop_b.request_stop();
  tb.join();
}

TEST(LeaderElectionTest, LeaderStepsDownWhenRenewalsFailPastDeadline) {
  FakeClient client;
  FakeClock clock;
  std::atomic<int> stopped{0};
  auto c = Cfg("a");
  c.on_stopped_leading = [&] { ++stopped; };
  LeaderElector a(&client, &clock, c);
  Status r;
  std::thread t([&] { r = a.Run({}); });
  ASSERT_TRUE(Eventually([&] { return a.IsLeader(); }));
  client.InjectError(Verb::kGet, kLeases, UnavailableError("partition"), 1000);
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(500ms);
    return stopped.load() == 1;
  }));
  t.join();
  EXPECT_TRUE(r.ok()) << r;  // lost, not cancelled
  EXPECT_FALSE(a.IsLeader());
}

}  // namespace
}  // namespace nvl72::kube
