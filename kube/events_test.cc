#include "kube/events.h"

#include <gtest/gtest.h>

#include "kube/fake_client.h"

namespace nvl72::kube {
namespace {

using namespace std::chrono_literals;

Json PodObj() {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u1"}}}};
}

TEST(EventRecorderTest, WritesEventsV1Fields) {
  FakeClient client;
  FakeClock clock;
  EventRecorder rec(&client, &clock, {"nvl72.dev/operator", "op-0"});
  rec.Record(PodObj(), EventType::kWarning, "NodeFailed", "Recover", std::string(3000, 'x'));
  ASSERT_TRUE(rec.Flush(5s));
  auto list = client.List(kEvents, "ns");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);
  const Json& ev = list->items[0];
  EXPECT_EQ(ev["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(ev["reportingController"], "nvl72.dev/operator");
  EXPECT_EQ(ev["reportingInstance"], "op-0");
  EXPECT_EQ(ev["action"], "Recover");
  EXPECT_EQ(ev["reason"], "NodeFailed");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["note"].get<std::string>().size(), 1024u);
  EXPECT_EQ(ev["regarding"]["uid"], "u1");
  EXPECT_EQ(ev["regarding"]["kind"], "Pod");
  EXPECT_TRUE(ParseTime(ev["eventTime"].get<std::string>()).ok());
  EXPECT_EQ(Name(ev).rfind("p.", 0), 0u);
  EXPECT_EQ(rec.Stats().written, 1);
}

TEST(EventRecorderTest, RepeatsBecomeASeries) {
  FakeClient client;
  FakeClock clock;
  EventRecorder rec(&client, &clock, {"c", "i"});
  for (int i = 0; i < 3; ++i) rec.Record(PodObj(), EventType::kNormal, "R", "A", "same");
  ASSERT_TRUE(rec.Flush(5s));
  auto list = client.List(kEvents, "ns");
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0]["series"]["count"], 3);
  // Cluster-scoped objects get their events in "default".
  rec.Record({{"kind", "Node"}, {"metadata", {{"name", "n1"}}}}, EventType::kNormal, "R", "A", "n");
  ASSERT_TRUE(rec.Flush(5s));
  EXPECT_EQ(client.List(kEvents, "default")->items.size(), 1u);
}

TEST(EventRecorderTest, FailuresAreCountedNotFatal) {
  FakeClient client;
  FakeClock clock;
  client.InjectError(Verb::kCreate, kEvents, UnavailableError("down"), 1);
  EventRecorder rec(&client, &clock, {"c", "i"});
  rec.Record(PodObj(), EventType::kNormal, "R", "A", "x");
  ASSERT_TRUE(rec.Flush(5s));
  EXPECT_EQ(rec.Stats().failed, 1);
  EXPECT_EQ(rec.Stats().written, 0);
}

TEST(EventRecorderTest, FullQueueDropsWithoutBlocking) {
  FakeClient client;
  FakeClock clock;
  // Block the writer: every create fails slowly is hard to fake; a tiny queue suffices.
  EventRecorder rec(&client, &clock, {"c", "i", 2});
  for (int i = 0; i < 1000; ++i) {
    rec.Record(PodObj(), EventType::kNormal, "R" + std::to_string(i), "A", "x");
  }
  ASSERT_TRUE(rec.Flush(10s));
  auto st = rec.Stats();
  EXPECT_EQ(st.recorded + st.dropped, 1000);
  EXPECT_GT(st.dropped, 0);
  EXPECT_EQ(st.written, st.recorded);
}

}  // namespace
}  // namespace nvl72::kube
