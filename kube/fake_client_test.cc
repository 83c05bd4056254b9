#include "kube/fake_client.h"

#include <gtest/gtest.h>

#include <thread>

namespace nvl72::kube {
namespace {

Json ConfigMap(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  Json cm = {{"metadata", {{"name", name}}}, {"data", {{"k", "v"}}}};
  if (!labels.empty()) cm["metadata"]["labels"] = labels;
  return cm;
}

const ResourceRef kJobs =
    ResourceRef::Custom("nvl72.dev", "v1alpha1", "nvl72jobs", "NVL72Job", true);

TEST(FakeClientTest, CrudAndResourceVersions) {
  FakeClient c;
  auto created = c.Create(kConfigMaps, "ns", ConfigMap("a"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(Namespace(*created), "ns");
  EXPECT_EQ((*created)["kind"], "ConfigMap");
  EXPECT_FALSE(Uid(*created).empty());
  EXPECT_EQ(Generation(*created), 1);
  std::string rv1 = ResourceVersion(*created);

  EXPECT_TRUE(IsAlreadyExists(c.Create(kConfigMaps, "ns", ConfigMap("a")).status()));
  EXPECT_TRUE(IsNotFound(c.Get(kConfigMaps, "ns", "b").status()));
  EXPECT_TRUE(IsNotFound(c.Get(kConfigMaps, "other", "a").status()));

  Json upd = *created;
  upd["data"]["k"] = "v2";
  auto updated = c.Update(kConfigMaps, "ns", upd);
  ASSERT_TRUE(updated.ok());
  EXPECT_NE(ResourceVersion(*updated), rv1);
  EXPECT_EQ(Generation(*updated), 2);

  // Stale resourceVersion -> 409.
  upd["data"]["k"] = "v3";
  auto stale = c.Update(kConfigMaps, "ns", upd);
  EXPECT_TRUE(IsConflict(stale.status())) << stale.status();
  EXPECT_EQ(HttpCode(stale.status()), 409);

  // Unconditional update (no resourceVersion) succeeds.
  upd["metadata"].erase("resourceVersion");
  EXPECT_TRUE(c.Update(kConfigMaps, "ns", upd).ok());

  EXPECT_TRUE(c.Delete(kConfigMaps, "ns", "a").ok());
  EXPECT_TRUE(IsNotFound(c.Delete(kConfigMaps, "ns", "a")));
  // Scope checks.
  EXPECT_EQ(c.Get(kConfigMaps, "", "a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Get(kNodes, "ns", "a").status().code(), StatusCode::kInvalidArgument);
}

TEST(FakeClientTest, StatusSubresourceAndGeneration) {
  FakeClient c;
  c.EnableStatusSubresource(kJobs);
  Json job = {
      {"metadata", {{"name", "j"}}}, {"spec", {{"replicas", 2}}}, {"status", {{"phase", "X"}}}};
  auto created = c.Create(kJobs, "ns", job);
  ASSERT_TRUE(created.ok());
  EXPECT_FALSE(created->contains("status"));  // dropped on create
  Json s = *created;
  s["status"] = {{"phase", "Running"}};
  s["spec"]["replicas"] = 99;  // ignored by UpdateStatus
  auto st = c.UpdateStatus(kJobs, "ns", s);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ((*st)["status"]["phase"], "Running");
  EXPECT_EQ((*st)["spec"]["replicas"], 2);
  EXPECT_EQ(Generation(*st), 1);
  Json u = *st;
  u["status"]["phase"] = "Ignored";
  u["spec"]["replicas"] = 3;
  auto up = c.Update(kJobs, "ns", u);
  ASSERT_TRUE(up.ok());
  EXPECT_EQ((*up)["status"]["phase"], "Running");
  EXPECT_EQ(Generation(*up), 2);
  // ConfigMaps have no status subresource.
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("x")).ok());
  EXPECT_TRUE(IsNotFound(c.UpdateStatus(kConfigMaps, "ns", ConfigMap("x")).status()));
}

TEST(FakeClientTest, Patches) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("a")).ok());
  auto m =
      c.Patch(kConfigMaps, "ns", "a", PatchType::kMerge, {{"data", {{"n", "1"}, {"k", nullptr}}}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)["data"], Json({{"n", "1"}}));
  auto j = c.Patch(kConfigMaps, "ns", "a", PatchType::kJson,
                   Json::parse(R"([{"op":"add","path":"/data/z","value":"2"}])"));
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["data"]["z"], "2");
  auto bad = c.Patch(kConfigMaps, "ns", "a", PatchType::kJson,
                     Json::parse(R"([{"op":"remove","path":"/nope"}])"));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto stale = c.Patch(kConfigMaps, "ns", "a", PatchType::kMerge,
                       {{"metadata", {{"resourceVersion", "1"}}}, {"data", {{"q", "x"}}}});
  EXPECT_TRUE(IsConflict(stale.status()));
  // Apply needs a field manager and creates when missing.
  EXPECT_EQ(c.Patch(kConfigMaps, "ns", "b", PatchType::kApply, ConfigMap("b")).status().code(),
            StatusCode::kInvalidArgument);
  auto applied = c.Patch(kConfigMaps, "ns", "b", PatchType::kApply, ConfigMap("b"), {"me", true});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(c.Get(kConfigMaps, "ns", "b").ok());
}

TEST(FakeClientTest, ListSelectorsAndPaging) {
  FakeClient c;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(c.Create(kConfigMaps, i < 5 ? "a" : "b",
                         ConfigMap("cm" + std::to_string(i), {{"even", i % 2 ? "no" : "yes"}}))
                    .ok());
  }
  EXPECT_EQ(c.List(kConfigMaps, "").value().items.size(), 10u);
  EXPECT_EQ(c.List(kConfigMaps, "a").value().items.size(), 5u);
  EXPECT_EQ(c.List(kConfigMaps, "", {"even=yes"}).value().items.size(), 5u);
  EXPECT_EQ(c.List(kConfigMaps, "", {"", "metadata.name=cm3"}).value().items.size(), 1u);
  EXPECT_EQ(c.List(kConfigMaps, "", {"", "metadata.namespace!=a"}).value().items.size(), 5u);
  EXPECT_FALSE(c.List(kConfigMaps, "", {"", "nonsense"}).ok());
  ListOptions page;
  page.limit = 3;
  auto p1 = c.List(kConfigMaps, "", page);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->items.size(), 3u);
  EXPECT_FALSE(p1->continue_token.empty());
  auto all = ListAll(c, kConfigMaps, "", page);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->items.size(), 10u);
  EXPECT_EQ(all->resource_version, std::to_string(c.CurrentResourceVersion()));
  // An expired continue token -> 410; ListAll restarts.
  page.continue_token = p1->continue_token;
  ASSERT_TRUE(c.Create(kConfigMaps, "a", ConfigMap("late")).ok());
  c.Compact();
  EXPECT_TRUE(IsGone(c.List(kConfigMaps, "", page).status()));
}

TEST(FakeClientTest, FinalizersHoldDeletion) {
  FakeClient c;
  Json cm = ConfigMap("f");
  cm["metadata"]["finalizers"] = {"x/y"};
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", cm).ok());
  ASSERT_TRUE(c.Delete(kConfigMaps, "ns", "f").ok());
  auto held = c.Get(kConfigMaps, "ns", "f");
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(IsBeingDeleted(*held));
  Json cleared = *held;
  cleared["metadata"]["finalizers"] = Json::array();
  ASSERT_TRUE(c.Update(kConfigMaps, "ns", cleared).ok());
  EXPECT_TRUE(IsNotFound(c.Get(kConfigMaps, "ns", "f").status()));
}

TEST(FakeClientTest, DeletePreconditions) {
  FakeClient c;
  auto cm = c.Create(kConfigMaps, "ns", ConfigMap("p"));
  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "nope";
  EXPECT_TRUE(IsConflict(c.Delete(kConfigMaps, "ns", "p", wrong_uid)));
  DeleteOptions wrong_rv;
  wrong_rv.precondition_resource_version = "0";
  EXPECT_TRUE(IsConflict(c.Delete(kConfigMaps, "ns", "p", wrong_rv)));
  DeleteOptions right;
  right.precondition_uid = Uid(*cm);
  right.precondition_resource_version = ResourceVersion(*cm);
  EXPECT_TRUE(c.Delete(kConfigMaps, "ns", "p", right).ok());
}

TEST(FakeClientTest, BindAndEvict) {
  FakeClient c;
  Json pod = {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", Json::array()}}}};
  auto created = c.Create(kPods, "ns", pod);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ((*created)["status"]["phase"], "Pending");
  EXPECT_TRUE(IsConflict(c.Bind("ns", "p", "wrong-uid", "n1")));
  ASSERT_TRUE(c.Bind("ns", "p", Uid(*created), "n1").ok());
  EXPECT_EQ(AtPath(c.Get(kPods, "ns", "p").value(), "/spec/nodeName"), "n1");
  EXPECT_TRUE(IsConflict(c.Bind("ns", "p", "", "n2")));
  Json gated = {{"metadata", {{"name", "g"}}}, {"spec", {{"schedulingGates", {{{"name", "x"}}}}}}};
  ASSERT_TRUE(c.Create(kPods, "ns", gated).ok());
  EXPECT_TRUE(IsConflict(c.Bind("ns", "g", "", "n1")));
  EXPECT_TRUE(c.Evict("ns", "p").ok());
  EXPECT_TRUE(IsNotFound(c.Get(kPods, "ns", "p").status()));
}

TEST(FakeClientTest, InjectedErrorsAndActions) {
  FakeClient c;
  c.InjectError(Verb::kCreate, kConfigMaps, UnavailableError("boom"), 2);
  EXPECT_EQ(c.Create(kConfigMaps, "ns", ConfigMap("a")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c.Create(kConfigMaps, "ns", ConfigMap("a")).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("a")).ok());
  c.InjectError(Verb::kGet, ResourceRef{}, Status(StatusCode::kPermissionDenied, "no"));
  EXPECT_TRUE(IsForbidden(c.Get(kPods, "ns", "x").status()));
  auto actions = c.Actions();
  ASSERT_EQ(actions.size(), 4u);
  EXPECT_EQ(actions[0].verb, Verb::kCreate);
  EXPECT_EQ(actions[3].verb, Verb::kGet);
  EXPECT_EQ(actions[3].resource, "pods");
}

TEST(FakeClientTest, UpdateWithRetryResolvesConflicts) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("r")).ok());
  int calls = 0;
  auto r = UpdateWithRetry(c, kConfigMaps, "ns", "r", [&](Json& obj) {
    ++calls;
    if (calls == 1) {
      // Someone else writes between our read and our write.
      EXPECT_TRUE(
          c.Patch(kConfigMaps, "ns", "r", PatchType::kMerge, {{"data", {{"other", "1"}}}}).ok());
    }
    obj["data"]["mine"] = "1";
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ((*r)["data"]["other"], "1");
  EXPECT_EQ((*r)["data"]["mine"], "1");
}

// Collects watch events on a thread.
struct Collector {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> events;  // type, name
  Status result;
  std::stop_source stop;
  std::thread thread;

  void Start(FakeClient& c, const ResourceRef& r, const std::string& ns, const WatchOptions& o) {
    thread = std::thread([&, r, ns, o] {
      result = c.Watch(
          r, ns, o,
          [&](WatchEvent&& ev) {
            std::lock_guard<std::mutex> l(mu);
            events.emplace_back(std::string(WatchEventTypeName(ev.type)), Name(ev.object));
            return true;
          },
          stop.get_token());
    });
  }
  size_t Size() {
    std::lock_guard<std::mutex> l(mu);
    return events.size();
  }
  void WaitFor(size_t n) {
    for (int i = 0; i < 5000 && Size() < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

TEST(FakeClientTest, WatchFanOutReplayAndStop) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("before")).ok());
  std::string rv = std::to_string(c.CurrentResourceVersion());
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("replayed")).ok());

  Collector all, fresh, labelled;
  WatchOptions from_rv;
  from_rv.resource_version = rv;
  all.Start(c, kConfigMaps, "", from_rv);
  fresh.Start(c, kConfigMaps, "ns", WatchOptions{});  // synthetic ADDED for existing objects
  WatchOptions sel = from_rv;
  sel.label_selector = "x=y";
  labelled.Start(c, kConfigMaps, "", sel);
  while (c.NumWatches() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("live", {{"x", "y"}})).ok());
  ASSERT_TRUE(c.Patch(kConfigMaps, "ns", "live", PatchType::kMerge,
                      {{"metadata", {{"labels", {{"x", "z"}}}}}})
                  .ok());
  ASSERT_TRUE(c.Delete(kConfigMaps, "ns", "live").ok());
  all.WaitFor(4);
  fresh.WaitFor(5);
  labelled.WaitFor(2);
  c.SendBookmark();
  all.WaitFor(5);
  fresh.WaitFor(6);
  labelled.WaitFor(3);
  all.stop.request_stop();
  fresh.stop.request_stop();
  labelled.stop.request_stop();
  all.thread.join();
  fresh.thread.join();
  labelled.thread.join();
  using E = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(all.events, (E{{"ADDED", "replayed"},
                           {"ADDED", "live"},
                           {"MODIFIED", "live"},
                           {"DELETED", "live"},
                           {"BOOKMARK", ""}}));
  EXPECT_EQ(fresh.events, (E{{"ADDED", "before"},
                             {"ADDED", "replayed"},
                             {"ADDED", "live"},
                             {"MODIFIED", "live"},
                             {"DELETED", "live"},
                             {"BOOKMARK", ""}}));
  // Selector transitions: the label change out of the selector is a DELETED for this watcher.
  EXPECT_EQ(labelled.events, (E{{"ADDED", "live"}, {"DELETED", "live"}, {"BOOKMARK", ""}}));
  EXPECT_EQ(all.result.code(), StatusCode::kCancelled);
  EXPECT_EQ(c.NumWatches(), 0);
}

TEST(FakeClientTest, WatchGoneAfterCompactionAndExpire) {
  FakeClient c;
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("a")).ok());  // rv 1
  ASSERT_TRUE(c.Create(kConfigMaps, "ns", ConfigMap("b")).ok());  // rv 2
  c.Compact();
  WatchOptions o;
  o.resource_version = "1";
  Status s = c.Watch(kConfigMaps, "", o, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(IsGone(s)) << s;

  Collector w;
  o.resource_version = std::to_string(c.CurrentResourceVersion());
  w.Start(c, kConfigMaps, "", o);
  while (c.NumWatches() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  c.ExpireWatches();
  w.thread.join();
  EXPECT_TRUE(IsGone(w.result)) << w.result;

  Collector closed;
  closed.Start(c, kConfigMaps, "", o);
  while (c.NumWatches() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  c.CloseWatches(UnavailableError("connection reset"));
  closed.thread.join();
  EXPECT_EQ(closed.result.code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace nvl72::kube
