#include "kube/informer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "common/eventually_for_test.h"
#include "kube/fake_client.h"

namespace nvl72::kube {
namespace {

using namespace std::chrono_literals;
using testutil::Eventually;

Json Pod(const std::string& name, const std::string& node = "") {
  Json p = {{"metadata", {{"name", name}}}, {"spec", {{"containers", Json::array()}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

// Records handler calls as "add:name", "update:name", "delete:name".
struct Recorder {
  std::mutex mu;
  std::vector<std::string> calls;
  EventHandlers Handlers() {
    return EventHandlers{
        [this](const ObjectPtr& o) { Push("add:" + Name(*o)); },
        [this](const ObjectPtr& old_obj, const ObjectPtr& o) {
          Push((old_obj == o ? "resync:" : "update:") + Name(*o));
        },
        [this](const ObjectPtr& o) { Push("delete:" + Name(*o)); },
    };
  }
  void Push(std::string s) {
    std::lock_guard<std::mutex> l(mu);
    calls.push_back(std::move(s));
  }
  std::vector<std::string> Calls() {
    std::lock_guard<std::mutex> l(mu);
    return calls;
  }
  bool Has(const std::string& s) {
    auto c = Calls();
    return std::find(c.begin(), c.end(), s) != c.end();
  }
};

// The informer's cache must equal a fresh list from the server.
void ExpectCacheMatchesServer(FakeClient& c, const Informer& inf, const ResourceRef& r) {
  auto list = c.List(r, "");
  ASSERT_TRUE(list.ok());
  std::vector<std::string> server_keys;
  for (const Json& o : list->items) {
    server_keys.push_back(KeyOf(o));
    auto cached = inf.Get(KeyOf(o));
    ASSERT_NE(cached, nullptr) << KeyOf(o);
    EXPECT_EQ(ResourceVersion(*cached), ResourceVersion(o)) << KeyOf(o);
  }
  std::sort(server_keys.begin(), server_keys.end());
  EXPECT_EQ(inf.ListKeys(), server_keys);
}

TEST(InformerTest, ListThenWatchWithIndexAndHandlers) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kPods, "ns", Pod("a", "n1")).ok());
  ASSERT_TRUE(c.Create(kPods, "ns", Pod("b", "n2")).ok());
  FakeClock clock;
  Informer inf(&c, &clock, InformerOptions{.resource = kPods, .page_size = 1});
  inf.AddIndexer("node", PodNodeNameIndex);
  Recorder rec;
  inf.AddEventHandler(rec.Handlers());
  EXPECT_FALSE(inf.HasSynced());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  EXPECT_EQ(inf.Size(), 2u);
  EXPECT_EQ(inf.ByIndex("node", "n1").size(), 1u);
  ASSERT_TRUE(Eventually([&] { return c.NumWatches() == 1; }));

  ASSERT_TRUE(c.Create(kPods, "ns", Pod("c", "n1")).ok());
  ASSERT_TRUE(c.Patch(kPods, "ns", "a", PatchType::kMerge, {{"spec", {{"nodeName", "n3"}}}}).ok());
  ASSERT_TRUE(c.Delete(kPods, "ns", "b").ok());
  ASSERT_TRUE(Eventually([&] { return rec.Calls().size() == 5; }));
  EXPECT_EQ(rec.Calls(),
            (std::vector<std::string>{"add:a", "add:b", "add:c", "update:a", "delete:b"}));
  EXPECT_EQ(inf.ByIndex("node", "n1").size(), 1u);  // c only
  EXPECT_EQ(Name(*inf.ByIndex("node", "n1")[0]), "c");
  EXPECT_EQ(inf.ByIndex("node", "n3").size(), 1u);
  EXPECT_TRUE(inf.ByIndex("node", "n2").empty());
  EXPECT_TRUE(inf.ByIndex("nope", "x").empty());
  EXPECT_EQ(inf.Get("ns", "b"), nullptr);
  ExpectCacheMatchesServer(c, inf, kPods);
  auto st = inf.Stats();
  EXPECT_EQ(st.lists, 1);
  EXPECT_EQ(st.relists, 0);
  EXPECT_EQ(st.events, 3);
  EXPECT_EQ(st.last_resource_version, std::to_string(c.CurrentResourceVersion()));
  inf.Stop();
}

TEST(InformerTest, TransformAppliesToListedAndWatchedObjects) {
  FakeClient c;
  Json big = Pod("a", "n1");
  big["metadata"]["managedFields"] = Json::array({{{"manager", "kubectl"}}});
  big["spec"]["volumes"] = Json::array({{{"name", "v"}}});
  ASSERT_TRUE(c.Create(kPods, "ns", big).ok());
  FakeClock clock;
  InformerOptions o{.resource = kPods, .page_size = 1};
  o.transform = [](Json& obj) {
    DropManagedFields(obj);
    obj["spec"].erase("volumes");
  };
  Informer inf(&c, &clock, o);
  Recorder rec;
  inf.AddEventHandler(rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return c.NumWatches() == 1; }));
  Json b = big;
  b["metadata"]["name"] = "b";
  ASSERT_TRUE(c.Create(kPods, "ns", b).ok());
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 2; }));
  for (const char* name : {"a", "b"}) {
    ObjectPtr got = inf.Get("ns", name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_FALSE((*got)["metadata"].contains("managedFields")) << name;
    EXPECT_FALSE((*got)["spec"].contains("volumes")) << name;
    EXPECT_EQ((*got)["spec"]["nodeName"], "n1") << name;
    EXPECT_FALSE(ResourceVersion(*got).empty()) << name;
  }
  EXPECT_TRUE(rec.Has("add:b"));
  ExpectCacheMatchesServer(c, inf, kPods);
  inf.Stop();
}

TEST(InformerTest, ResumesAfterServerTimeoutWithoutRelist) {
  FakeClient c;
  FakeClock clock;
  Informer inf(&c, &clock, InformerOptions{.resource = kConfigMaps});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return c.NumWatches() == 1; }));
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", {{"metadata", {{"name", "x"}}}}).ok());
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 1; }));
  c.CloseWatches();  // server-side timeout
  // Written while no watch is open: must arrive through the resumed watch (history replay).
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", {{"metadata", {{"name", "y"}}}}).ok());
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 2; }));
  auto st = inf.Stats();
  EXPECT_EQ(st.lists, 1);
  EXPECT_EQ(st.relists, 0);
  EXPECT_EQ(st.watch_restarts, 1);
  ExpectCacheMatchesServer(c, inf, kConfigMaps);
}

TEST(InformerTest, RelistOnGoneDeliversDifferences) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", {{"metadata", {{"name", "keep"}}}}).ok());
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", {{"metadata", {{"name", "gone"}}}}).ok());
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", {{"metadata", {{"name", "changed"}}}}).ok());
  FakeClock clock;
  Informer inf(&c, &clock, InformerOptions{.resource = kConfigMaps});
  Recorder rec;
  inf.AddEventHandler(rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return c.NumWatches() == 1; }));
  // Break the watch, change the world behind the informer's back, compact: resume gets 410.
  c.CloseWatches(UnavailableError("connection reset"));
  ASSERT_TRUE(Eventually([&] { return c.NumWatches() == 0; }));
  ASSERT_TRUE(c.Delete(kConfigMaps, "ns", "gone").ok());
  ASSERT_TRUE(
      c.Patch(kConfigMaps, "ns", "changed", PatchType::kMerge, {{"data", {{"a", "b"}}}}).ok());
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", {{"metadata", {{"name", "new"}}}}).ok());
  c.Compact();
  // Let the reconnect backoff elapse.
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(1s);
    return inf.Stats().relists == 1 && c.NumWatches() == 1;
  }));
  ExpectCacheMatchesServer(c, inf, kConfigMaps);
  EXPECT_TRUE(rec.Has("delete:gone"));
  EXPECT_TRUE(rec.Has("update:changed"));
  EXPECT_TRUE(rec.Has("add:new"));
  EXPECT_FALSE(rec.Has("update:keep"));
  auto st = inf.Stats();
  EXPECT_EQ(st.gone, 1);
  EXPECT_GE(st.watch_errors, 1);

  // An ERROR 410 event on a live watch relists too.
  c.ExpireWatches();
  ASSERT_TRUE(Eventually([&] { return inf.Stats().relists == 2 && c.NumWatches() == 1; }));
  ExpectCacheMatchesServer(c, inf, kConfigMaps);
}

TEST(InformerTest, ListErrorsBackOffAndRetry) {
  FakeClient c;
  FakeClock clock;
  c.InjectError(Verb::kList, kConfigMaps, UnavailableError("apiserver down"), 3);
  Informer inf(
      &c, &clock,
      InformerOptions{.resource = kConfigMaps, .initial_backoff = 100ms, .max_backoff = 1s});
  inf.Start();
  ASSERT_TRUE(Eventually([&] { return clock.NumWaiters() > 0; }));
  EXPECT_FALSE(inf.HasSynced());
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(100ms);
    return inf.HasSynced();
  }));
  EXPECT_EQ(inf.Stats().watch_errors, 3);
}

// A token revoked while the informer runs: every list fails with 401 until it is accepted again;
// on_error sees each failure with its count, then one OK with the count when the list works.
TEST(InformerTest, OnErrorReportsFailuresInARowAndTheRecovery) {
  FakeClient c;
  FakeClock clock;
  c.InjectError(Verb::kList, kConfigMaps, Status(StatusCode::kUnauthenticated, "Unauthorized"), 3);
  std::mutex mu;
  std::vector<std::pair<StatusCode, int64_t>> seen;
  InformerOptions o{.resource = kConfigMaps, .initial_backoff = 100ms, .max_backoff = 1s};
  o.on_error = [&](const Status& s, int64_t n) {
    std::lock_guard<std::mutex> l(mu);
    seen.emplace_back(s.code(), n);
  };
  Informer inf(&c, &clock, o);
  inf.Start();
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(100ms);
    return inf.HasSynced();
  }));
  inf.Stop();
  std::lock_guard<std::mutex> l(mu);
  const std::vector<std::pair<StatusCode, int64_t>> want = {{StatusCode::kUnauthenticated, 1},
                                                            {StatusCode::kUnauthenticated, 2},
                                                            {StatusCode::kUnauthenticated, 3},
                                                            {StatusCode::kOk, 3}};
  EXPECT_EQ(seen, want);
}

TEST(InformerTest, DescribeInformerErrorNamesWhatCredentialErrorsMean) {
  const std::string unauth =
      DescribeInformerError(kPods, Status(StatusCode::kUnauthenticated, "Unauthorized"), 2);
  EXPECT_NE(unauth.find("list/watch of pods failed (2 in a row"), std::string::npos) << unauth;
  EXPECT_NE(unauth.find("token expired or revoked"), std::string::npos) << unauth;
  const std::string forbidden =
      DescribeInformerError(kPods, Status(StatusCode::kPermissionDenied, "forbidden"), 1);
  EXPECT_NE(forbidden.find("RBAC"), std::string::npos) << forbidden;
  const std::string down = DescribeInformerError(kPods, UnavailableError("connection refused"), 1);
  EXPECT_EQ(down.find("token"), std::string::npos) << down;
  EXPECT_EQ(DescribeInformerError(kPods, Status::Ok(), 1),
            "list/watch of pods works again after 1 failure");
  EXPECT_TRUE(ShouldLogInformerFailure(1));
  EXPECT_TRUE(ShouldLogInformerFailure(2));
  EXPECT_FALSE(ShouldLogInformerFailure(3));
  EXPECT_TRUE(ShouldLogInformerFailure(20));
}

TEST(InformerTest, BookmarksMoveResourceVersion) {
  FakeClient c;
  FakeClock clock;
  Informer inf(&c, &clock, InformerOptions{.resource = kConfigMaps});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return c.NumWatches() == 1; }));
  // Writes to another resource move the global resourceVersion; a bookmark tells the informer.
  ASSERT_TRUE(c.Create(kPods, "ns", Pod("p")).ok());
  c.SendBookmark();
  ASSERT_TRUE(Eventually([&] {
    return inf.Stats().last_resource_version == std::to_string(c.CurrentResourceVersion());
  }));
  EXPECT_EQ(inf.Stats().events, 0);
}

TEST(InformerTest, PeriodicResync) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", {{"metadata", {{"name", "x"}}}}).ok());
  FakeClock clock;
  Informer inf(&c, &clock, InformerOptions{.resource = kConfigMaps, .resync_period = 30s});
  Recorder rec;
  inf.AddEventHandler(rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  EXPECT_FALSE(rec.Has("resync:x"));
  ASSERT_TRUE(Eventually([&] {
    clock.Advance(10s);
    return rec.Has("resync:x");
  }));
}

TEST(InformerTest, SelectorsAreApplied) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kPods, "a", Pod("p1", "n1")).ok());
  ASSERT_TRUE(c.Create(kPods, "b", Pod("p2", "n1")).ok());
  ASSERT_TRUE(c.Create(kPods, "a", Pod("p3", "n2")).ok());
  FakeClock clock;
  Informer inf(&c, &clock,
               InformerOptions{.resource = kPods, .ns = "a", .field_selector = "spec.nodeName=n1"});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  EXPECT_EQ(inf.ListKeys(), std::vector<std::string>{"a/p1"});
  inf.Stop();
  inf.Stop();  // idempotent
}

}  // namespace
}  // namespace nvl72::kube
