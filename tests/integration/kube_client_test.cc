// Integration tests of nvl72::kube against the real local control plane (scripts/local-cluster).
//
// Needs NVL72_KUBECONFIG (fails, not skips, without it). The restart test also needs the cluster's
// state dir (NVL72_CLUSTER_STATE) and the script (NVL72_LOCAL_CLUSTER, default
// <source>/scripts/local-cluster). Every test works in its own namespace and cleans up.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "common/eventually_for_test.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/events.h"
#include "kube/http_client.h"
#include "kube/informer.h"
#include "kube/leader_election.h"

#ifndef NVL72_SOURCE_DIR
#define NVL72_SOURCE_DIR "."
#endif
#ifndef NVL72_LEASE_CANDIDATE
#define NVL72_LEASE_CANDIDATE "lease_candidate"
#endif

extern char** environ;

namespace nvl72::kube {
namespace {

using namespace std::chrono_literals;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string RandomSuffix() {
  static std::mt19937_64 rng(std::random_device{}());
  static const char* kChars = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  for (int i = 0; i < 6; ++i) s += kChars[rng() % 36];
  return s;
}

// Against the real API server: poll every 50 ms.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout) {
  return testutil::Eventually(pred, timeout, 50ms);
}

const ResourceRef kWidgets = ResourceRef::Custom("it.nvl72.dev", "v1", "widgets", "Widget", true);

class KubeIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubeconfig_ = Env("NVL72_KUBECONFIG");
    ASSERT_FALSE(kubeconfig_.empty())
        << "NVL72_KUBECONFIG is not set. Start the local control plane with "
           "`scripts/local-cluster up` and `source $STATE/env` (scripts/test does both).";
    auto cfg = LoadKubeconfig(kubeconfig_);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    config_ = *cfg;
    client_ = NewClient(config_);
    ASSERT_NE(client_, nullptr);
    ns_ = "kube-it-" + RandomSuffix();
    auto created = client_->Create(kNamespaces, "", {{"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created.status();
  }
  void TearDown() override {
    if (client_ && !ns_.empty()) {
      client_->Delete(kNamespaces, "", ns_).IgnoreError();
    }
  }
  static std::unique_ptr<HttpClient> NewClient(const Config& c) {
    auto client = HttpClient::Create(c);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(client).value() : nullptr;
  }
  // A client of the same server that authenticates with `token` alone.
  std::unique_ptr<HttpClient> ClientWithToken(const std::string& token) const {
    Config c = config_;
    c.client_cert_data.clear();
    c.client_key_data.clear();
    c.client_cert_file.clear();
    c.client_key_file.clear();
    c.token_file.clear();
    c.token = token;
    return NewClient(c);
  }
  // The test's ConfigMaps carry the label it=yes; informers and lists select on it, because
  // kube-controller-manager puts its own ConfigMap kube-root-ca.crt into every namespace.
  static constexpr const char* kItSelector = "it=yes";
  Json ConfigMap(const std::string& name, const std::string& value = "v") {
    return {{"metadata", {{"name", name}, {"labels", {{"it", "yes"}}}}}, {"data", {{"k", value}}}};
  }
  // Keys and resourceVersions of a fresh list == those in the informer cache.
  void ExpectCacheEqualsList(const Informer& inf, const ResourceRef& r) {
    auto list = ListAll(*client_, r, ns_, {.label_selector = kItSelector});
    ASSERT_TRUE(list.ok()) << list.status();
    std::map<std::string, std::string> want, got;
    for (const Json& o : list->items) want[KeyOf(o)] = ResourceVersion(o);
    for (const ObjectPtr& o : inf.List()) got[KeyOf(*o)] = ResourceVersion(*o);
    EXPECT_EQ(got, want);
  }
  bool CacheEqualsList(const Informer& inf, const ResourceRef& r) {
    auto list = ListAll(*client_, r, ns_, {.label_selector = kItSelector});
    if (!list.ok()) return false;
    std::map<std::string, std::string> want, got;
    for (const Json& o : list->items) want[KeyOf(o)] = ResourceVersion(o);
    for (const ObjectPtr& o : inf.List()) got[KeyOf(*o)] = ResourceVersion(*o);
    return got == want;
  }

  std::string kubeconfig_;
  Config config_;
  std::unique_ptr<HttpClient> client_;
  std::string ns_;
};

TEST_F(KubeIntegrationTest, ConfigMapCrudPatchesAndErrors) {
  auto created = client_->Create(kConfigMaps, ns_, ConfigMap("a"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(Namespace(*created), ns_);
  EXPECT_TRUE(IsAlreadyExists(client_->Create(kConfigMaps, ns_, ConfigMap("a")).status()));
  auto got = client_->Get(kConfigMaps, ns_, "a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["data"]["k"], "v");
  Status missing = client_->Get(kConfigMaps, ns_, "nope").status();
  EXPECT_TRUE(IsNotFound(missing)) << missing;
  EXPECT_EQ(HttpCode(missing), 404);

  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, {{"metadata", {{"name", "unlabelled"}}}}).ok());
  auto list = client_->List(kConfigMaps, ns_, ListOptions{.label_selector = "it=yes"});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_FALSE(list->resource_version.empty());
  auto by_field =
      client_->List(kConfigMaps, ns_, ListOptions{.field_selector = "metadata.name=unlabelled"});
  ASSERT_TRUE(by_field.ok());
  EXPECT_EQ(by_field->items.size(), 1u);

  Json upd = *got;
  upd["data"]["k"] = "v2";
  auto updated = client_->Update(kConfigMaps, ns_, upd);
  ASSERT_TRUE(updated.ok()) << updated.status();
  upd["data"]["k"] = "stale";
  Status conflict = client_->Update(kConfigMaps, ns_, upd).status();
  EXPECT_TRUE(IsConflict(conflict)) << conflict;
  EXPECT_EQ(HttpCode(conflict), 409);

  auto merged = client_->Patch(kConfigMaps, ns_, "a", PatchType::kMerge, {{"data", {{"m", "1"}}}});
  ASSERT_TRUE(merged.ok()) << merged.status();
  auto jsonp = client_->Patch(kConfigMaps, ns_, "a", PatchType::kJson,
                              Json::parse(R"([{"op":"replace","path":"/data/m","value":"2"}])"));
  ASSERT_TRUE(jsonp.ok()) << jsonp.status();
  EXPECT_EQ((*jsonp)["data"]["m"], "2");
  auto smp =
      client_->Patch(kConfigMaps, ns_, "a", PatchType::kStrategicMerge, {{"data", {{"s", "1"}}}});
  ASSERT_TRUE(smp.ok()) << smp.status();
  auto applied = client_->Patch(kConfigMaps, ns_, "applied", PatchType::kApply,
                                {{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"metadata", {{"name", "applied"}}},
                                 {"data", {{"x", "1"}}}},
                                PatchOptions{.field_manager = "kube-it", .force = true});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ((*applied)["data"]["x"], "1");
  Status bad_patch = client_
                         ->Patch(kConfigMaps, ns_, "a", PatchType::kJson,
                                 Json::parse(R"([{"op":"test","path":"/data/m","value":"no"}])"))
                         .status();
  EXPECT_FALSE(bad_patch.ok());
  EXPECT_FALSE(bad_patch.IsRetryable()) << bad_patch;

  DeleteOptions wrong;
  wrong.precondition_uid = "00000000-0000-0000-0000-000000000000";
  EXPECT_TRUE(IsConflict(client_->Delete(kConfigMaps, ns_, "a", wrong)));
  DeleteOptions right;
  right.precondition_uid = Uid(*created);
  right.propagation_policy = "Background";
  right.grace_period_seconds = 0;
  EXPECT_TRUE(client_->Delete(kConfigMaps, ns_, "a", right).ok());
  EXPECT_TRUE(IsNotFound(client_->Get(kConfigMaps, ns_, "a").status()));
}

TEST_F(KubeIntegrationTest, ConflictResolvedByReReadAndRetry) {
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("counter", "0")).ok());
  auto other = NewClient(config_);
  // Two writers increment the same counter concurrently; every increment must land.
  auto worker = [&](Client* c) {
    for (int i = 0; i < 10; ++i) {
      auto r = UpdateWithRetry(
          *c, kConfigMaps, ns_, "counter",
          [](Json& obj) {
            int v = std::stoi(obj["data"]["k"].get<std::string>());
            obj["data"]["k"] = std::to_string(v + 1);
            return true;
          },
          50);
      EXPECT_TRUE(r.ok()) << r.status();
    }
  };
  std::thread t1(worker, client_.get());
  std::thread t2(worker, other.get());
  t1.join();
  t2.join();
  auto final_obj = client_->Get(kConfigMaps, ns_, "counter");
  ASSERT_TRUE(final_obj.ok());
  EXPECT_EQ((*final_obj)["data"]["k"], "20");
}

TEST_F(KubeIntegrationTest, CustomResourceCrudWithStatusSubresource) {
  const std::string crd_name = "widgets.it.nvl72.dev";
  Json crd = Json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.it.nvl72.dev"},
    "spec": {"group": "it.nvl72.dev", "scope": "Namespaced",
      "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
      "versions": [{"name": "v1", "served": true, "storage": true,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
          "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
          "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}})");
  auto created_crd = client_->Create(kCustomResourceDefinitions, "", crd);
  ASSERT_TRUE(created_crd.ok() || IsAlreadyExists(created_crd.status())) << created_crd.status();
  ASSERT_TRUE(Eventually(
      [&] {
        auto got = client_->Get(kCustomResourceDefinitions, "", crd_name);
        if (!got.ok()) return false;
        for (const Json& c : AtPath(*got, "/status/conditions")) {
          if (c.value("type", "") == "Established" && c.value("status", "") == "True") return true;
        }
        return false;
      },
      30s));
  // Discovery of a new CRD can lag its Established condition by a moment.
  StatusOr<Json> w = Status(StatusCode::kUnavailable, "not tried");
  ASSERT_TRUE(Eventually(
      [&] {
        w = client_->Create(kWidgets, ns_,
                            {{"metadata", {{"name", "w1"}}},
                             {"spec", {{"size", 3}}},
                             {"status", {{"phase", "ignored"}}}});
        return w.ok();
      },
      30s))
      << w.status();
  EXPECT_EQ((*w)["kind"], "Widget");
  EXPECT_FALSE(w->contains("status"));  // status is ignored on create with the subresource
  EXPECT_EQ(Generation(*w), 1);
  Json s = *w;
  s["status"] = {{"phase", "Ready"}};
  auto st = client_->UpdateStatus(kWidgets, ns_, s);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ((*st)["status"]["phase"], "Ready");
  EXPECT_EQ(Generation(*st), 1);  // status writes do not move generation
  auto spec = client_->Patch(kWidgets, ns_, "w1", PatchType::kMerge, {{"spec", {{"size", 4}}}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(Generation(*spec), 2);
  auto sp = client_->Patch(kWidgets, ns_, "w1", PatchType::kMerge,
                           {{"status", {{"phase", "Done"}}}}, {}, "status");
  ASSERT_TRUE(sp.ok()) << sp.status();
  EXPECT_EQ((*sp)["status"]["phase"], "Done");
  auto list = client_->List(kWidgets, ns_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0]["apiVersion"], "it.nvl72.dev/v1");
  EXPECT_TRUE(client_->Delete(kWidgets, ns_, "w1").ok());
  EXPECT_TRUE(IsNotFound(client_->Get(kWidgets, ns_, "w1").status()));
}

TEST_F(KubeIntegrationTest, WatchSeesEveryChangeInOrder) {
  auto start = client_->List(kConfigMaps, ns_, ListOptions{.label_selector = kItSelector});
  ASSERT_TRUE(start.ok());
  std::mutex mu;
  std::vector<std::string> seen;
  std::stop_source stop;
  Status watch_status;
  auto watcher = NewClient(config_);
  std::thread t([&] {
    WatchOptions o;
    o.label_selector = kItSelector;  // not kube-controller-manager's kube-root-ca.crt
    o.resource_version = start->resource_version;
    watch_status = watcher->Watch(
        kConfigMaps, ns_, o,
        [&](WatchEvent&& ev) {
          if (ev.type == WatchEventType::kBookmark) return true;
          std::lock_guard<std::mutex> l(mu);
          seen.push_back(std::string(WatchEventTypeName(ev.type)) + " " + Name(ev.object) + " " +
                         ResourceVersion(ev.object));
          return true;
        },
        stop.get_token());
  });
  std::vector<std::string> expected;
  for (int i = 0; i < 15; ++i) {
    std::string name = "w" + std::to_string(i % 5);
    StatusOr<Json> r = Status(StatusCode::kInternal, "");
    std::string type;
    if (i < 5) {
      r = client_->Create(kConfigMaps, ns_, ConfigMap(name));
      type = "ADDED";
    } else if (i < 10) {
      r = client_->Patch(kConfigMaps, ns_, name, PatchType::kMerge,
                         {{"data", {{"k", std::to_string(i)}}}});
      type = "MODIFIED";
    } else {
      Status d = client_->Delete(kConfigMaps, ns_, name);
      ASSERT_TRUE(d.ok()) << d;
      expected.push_back("DELETED " + name);
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status();
    expected.emplace_back(type).append(" ").append(name).append(" ").append(ResourceVersion(*r));
  }
  ASSERT_TRUE(Eventually(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return seen.size() >= expected.size();
      },
      20s));
  stop.request_stop();
  t.join();
  EXPECT_EQ(watch_status.code(), StatusCode::kCancelled) << watch_status;
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(seen.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    // Deletions carry the deletion's resourceVersion, unknown to the writer: compare the prefix.
    EXPECT_EQ(seen[i].substr(0, expected[i].size()), expected[i]) << i;
  }
}

// Forwards to a real client but makes the first watch start from resourceVersion "1", which the
// API server answers with 410 "too old resource version".
class StaleFirstWatchClient : public Client {
 public:
  explicit StaleFirstWatchClient(Client* real) : real_(real) {}
  StatusOr<Json> Get(const ResourceRef& r, std::string_view ns, std::string_view n) override {
    return real_->Get(r, ns, n);
  }
  StatusOr<ListResult> List(const ResourceRef& r, std::string_view ns,
                            const ListOptions& o) override {
    return real_->List(r, ns, o);
  }
  StatusOr<Json> Create(const ResourceRef& r, std::string_view ns, const Json& obj,
                        const WriteOptions& o) override {
    return real_->Create(r, ns, obj, o);
  }
  StatusOr<Json> Update(const ResourceRef& r, std::string_view ns, const Json& obj,
                        const WriteOptions& o) override {
    return real_->Update(r, ns, obj, o);
  }
  StatusOr<Json> UpdateStatus(const ResourceRef& r, std::string_view ns, const Json& obj,
                              const WriteOptions& o) override {
    return real_->UpdateStatus(r, ns, obj, o);
  }
  StatusOr<Json> Patch(const ResourceRef& r, std::string_view ns, std::string_view n, PatchType t,
                       const Json& p, const PatchOptions& o, std::string_view sub) override {
    return real_->Patch(r, ns, n, t, p, o, sub);
  }
  Status Delete(const ResourceRef& r, std::string_view ns, std::string_view n,
                const DeleteOptions& o) override {
    return real_->Delete(r, ns, n, o);
  }
  Status Watch(const ResourceRef& r, std::string_view ns, const WatchOptions& o,
               const WatchHandler& h, std::stop_token stop) override {
    WatchOptions copy = o;
    if (!forced_.exchange(true)) copy.resource_version = "1";
    return real_->Watch(r, ns, copy, h, stop);
  }
  Status Bind(std::string_view ns, std::string_view p, std::string_view u,
              std::string_view n) override {
    return real_->Bind(ns, p, u, n);
  }
  Status Evict(std::string_view ns, std::string_view p, const DeleteOptions& o) override {
    return real_->Evict(ns, p, o);
  }

 private:
  Client* real_;
  std::atomic<bool> forced_{false};
};

// Compacts etcd's history up to its current revision through etcd's v3 JSON gateway, so that a
// watch from an old resourceVersion is answered with 410 whatever the age of the test cluster (the
// API server compacts only every 5 minutes). Needs NVL72_ETCD_URL (exported by the local-cluster
// env file).
void CompactEtcd() {
  const char* url = std::getenv("NVL72_ETCD_URL");
  ASSERT_NE(url, nullptr) << "NVL72_ETCD_URL is not set: source the local-cluster env file";
  httplib::Client etcd(url);
  auto range = etcd.Post("/v3/kv/range", R"({"key":"YQ=="})", "application/json");
  ASSERT_TRUE(range && range->status == 200) << "etcd range failed";
  const auto revision = Json::parse(range->body)["header"]["revision"].get<std::string>();
  auto compact =
      etcd.Post("/v3/kv/compaction", R"({"revision":")" + revision + R"(","physical":true})",
                "application/json");
  ASSERT_TRUE(compact && compact->status == 200)
      << "etcd compaction failed: " << (compact ? compact->body : "");
}

TEST_F(KubeIntegrationTest, WatchFromExpiredResourceVersionIsGoneAndInformerRelists) {
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("old" + std::to_string(i))).ok());
  }
  CompactEtcd();
  WatchOptions o;
  o.resource_version = "1";
  o.timeout_seconds = 10;
  Status gone = client_->Watch(kConfigMaps, ns_, o, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(IsGone(gone)) << gone;
  EXPECT_EQ(HttpCode(gone), 410);

  StaleFirstWatchClient stale(client_.get());
  Informer inf(&stale, RealClock(),
               InformerOptions{.resource = kConfigMaps, .ns = ns_, .label_selector = kItSelector});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(30s));
  ASSERT_TRUE(Eventually([&] { return inf.Stats().relists >= 1; }, 30s));
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("after")).ok());
  ASSERT_TRUE(Eventually([&] { return CacheEqualsList(inf, kConfigMaps); }, 30s));
  ExpectCacheEqualsList(inf, kConfigMaps);
  auto st = inf.Stats();
  EXPECT_GE(st.gone, 1);
  EXPECT_GE(st.relists, 1);
}

TEST_F(KubeIntegrationTest, InformerSurvivesApiserverRestartWithoutLosingEvents) {
  std::string state = Env("NVL72_CLUSTER_STATE");
  ASSERT_FALSE(state.empty()) << "NVL72_CLUSTER_STATE is not set (source $STATE/env)";
  std::string script = Env("NVL72_LOCAL_CLUSTER");
  if (script.empty()) script = std::string(NVL72_SOURCE_DIR) + "/scripts/local-cluster";
  ASSERT_TRUE(std::filesystem::exists(script)) << script;

  Informer inf(client_.get(), RealClock(),
               InformerOptions{.resource = kConfigMaps,
                               .ns = ns_,
                               .label_selector = kItSelector,
                               .initial_backoff = 200ms,
                               .max_backoff = 2s});
  std::atomic<int> adds{0}, deletes{0};
  inf.AddEventHandler(EventHandlers{[&](const ObjectPtr&) { ++adds; }, nullptr,
                                    [&](const ObjectPtr&) { ++deletes; }});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(30s));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("before" + std::to_string(i))).ok());
  }
  ASSERT_TRUE(Eventually([&] { return CacheEqualsList(inf, kConfigMaps); }, 30s));

  std::string cmd = "'" + script + "' restart-apiserver --state '" + state + "' >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "restart-apiserver failed: " << cmd;

  // The kubeconfig may name a new port after the restart: rebuild the writer from it.
  auto cfg = LoadKubeconfig(kubeconfig_);
  ASSERT_TRUE(cfg.ok());
  ASSERT_EQ(cfg->server, config_.server) << "restart-apiserver moved the API server";
  for (int i = 0; i < 10; ++i) {
    StatusOr<Json> r = Status(StatusCode::kUnavailable, "");
    ASSERT_TRUE(Eventually(
        [&] {
          r = client_->Create(kConfigMaps, ns_, ConfigMap("after" + std::to_string(i)));
          return r.ok() || IsAlreadyExists(r.status());
        },
        60s))
        << r.status();
  }
  ASSERT_TRUE(client_->Delete(kConfigMaps, ns_, "before0").ok());
  ASSERT_TRUE(Eventually([&] { return CacheEqualsList(inf, kConfigMaps); }, 60s));
  ExpectCacheEqualsList(inf, kConfigMaps);
  EXPECT_EQ(adds.load(), 20);
  EXPECT_EQ(deletes.load(), 1);
  auto st = inf.Stats();
  EXPECT_GE(st.watch_restarts, 1);
  std::printf(
      "informer after restart: lists=%lld relists=%lld watch_restarts=%lld errors=%lld gone=%lld\n",
      static_cast<long long>(st.lists), static_cast<long long>(st.relists),
      static_cast<long long>(st.watch_restarts), static_cast<long long>(st.watch_errors),
      static_cast<long long>(st.gone));
}

TEST_F(KubeIntegrationTest, LeaseContentionFailover) {
  auto c1 = NewClient(config_);
  auto c2 = NewClient(config_);
  const std::string lease = "kube-it-lease";
  auto make = [&](const std::string& id, std::atomic<bool>* leading) {
    LeaderElectionConfig c;
    c.lease_namespace = ns_;
    c.lease_name = lease;
    c.identity = id;
    c.lease_duration = 6s;
    c.renew_deadline = 4s;
    c.retry_period = 1s;
    c.release_on_cancel = false;  // simulate a crash: the successor must wait for expiry
    c.on_started_leading = [leading] { *leading = true; };
    c.on_stopped_leading = [leading] { *leading = false; };
    return c;
  };
  std::atomic<bool> a_leads{false}, b_leads{false};
  LeaderElector a(c1.get(), RealClock(), make("a", &a_leads));
  LeaderElector b(c2.get(), RealClock(), make("b", &b_leads));
  std::stop_source stop_a, stop_b;
  std::thread ta([&] { a.Run(stop_a.get_token()).IgnoreError(); });
  ASSERT_TRUE(Eventually([&] { return a_leads.load(); }, 10s));
  std::thread tb([&] { b.Run(stop_b.get_token()).IgnoreError(); });
  std::this_thread::sleep_for(8s);  // > lease duration: renewals keep b out
  EXPECT_TRUE(a_leads.load());
  EXPECT_FALSE(b_leads.load());
  EXPECT_EQ(b.LeaderIdentity(), "a");

  auto stopped_at = std::chrono::steady_clock::now();
  stop_a.request_stop();
  ta.join();
  EXPECT_FALSE(a_leads.load());
  ASSERT_TRUE(Eventually([&] { return b_leads.load(); }, 15s));
  auto takeover = std::chrono::steady_clock::now() - stopped_at;
  std::printf("lease takeover after leader stop: %.1f s (lease 6 s, retry 1 s)\n",
              std::chrono::duration<double>(takeover).count());
  EXPECT_LT(takeover, 6s + 1200ms + 500ms);
  auto obj = client_->Get(kLeases, ns_, lease);
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ((*obj)["spec"]["holderIdentity"], "b");
  EXPECT_GE((*obj)["spec"]["leaseTransitions"].get<int>(), 1);
  stop_b.request_stop();
  tb.join();
}

// The same failover with the candidates as separate processes, the leader killed with SIGKILL (no
// release, no goodbye): the other process must lead once the lease has run out.
TEST_F(KubeIntegrationTest, LeaseFailoverBetweenTwoProcesses) {
  char dir[] = "/tmp/nvl72-lease-it-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string lease = "kube-it-lease-procs";
  auto spawn = [&](const std::string& id) {
    const std::string file = std::string(dir) + "/" + id;
    std::vector<std::string> args = {NVL72_LEASE_CANDIDATE, kubeconfig_, ns_, lease, id, file};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0) << argv[0];
    return pid;
  };
  auto leading = [&](const std::string& id) {
    return std::filesystem::exists(std::string(dir) + "/" + id);
  };
  const pid_t a = spawn("a");
  ASSERT_GT(a, 0);
  ASSERT_TRUE(Eventually([&] { return leading("a"); }, 15s)) << "process a never led";
  const pid_t b = spawn("b");
  ASSERT_GT(b, 0);
  std::this_thread::sleep_for(8s);  // longer than the 6 s lease: a's renewals keep b out
  EXPECT_FALSE(leading("b")) << "b led while a was alive and renewing";
  int status = 0;
  EXPECT_EQ(waitpid(b, &status, WNOHANG), 0) << "process b exited early";

  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(a, SIGKILL), 0);
  waitpid(a, &status, 0);
  const bool took_over = Eventually([&] { return leading("b"); }, 20s);
  const auto takeover = std::chrono::steady_clock::now() - killed_at;
  kill(b, SIGKILL);
  waitpid(b, &status, 0);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(took_over) << "process b did not take over after a was killed";
  std::printf("RESULT lease_takeover_after_sigkill_s=%.2f (lease 6 s, retry 1 s)\n",
              std::chrono::duration<double>(takeover).count());
  // a renewed at most one retry period before the kill, so the lease runs out within 6 s of it; b
  // looks every retry period (1 s, jittered up to 1.2 s) and needs one API round trip.
  EXPECT_LT(takeover, 6s + 1200ms + 800ms);
  auto obj = client_->Get(kLeases, ns_, lease);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ((*obj)["spec"]["holderIdentity"], "b");
}

// limit/continue against the real server: pages of the asked size, a continue token on all but the
// last, every object exactly once; ListAll follows the tokens.
TEST_F(KubeIntegrationTest, ListPagesWithLimitAndContinue) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("page-" + std::to_string(i))).ok());
  }
  ListOptions opts;
  opts.label_selector = "it=yes";
  opts.limit = 10;
  std::vector<size_t> page_sizes;
  std::set<std::string> names;
  for (int guard = 0; guard < 10; ++guard) {
    auto page = client_->List(kConfigMaps, ns_, opts);
    ASSERT_TRUE(page.ok()) << page.status();
    page_sizes.push_back(page->items.size());
    for (const Json& o : page->items) names.insert(Name(o));
    if (page->continue_token.empty()) break;
    opts.continue_token = page->continue_token;
  }
  EXPECT_EQ(page_sizes, (std::vector<size_t>{10, 10, 5}));
  EXPECT_EQ(names.size(), 25u);
  ListOptions all;
  all.label_selector = "it=yes";
  all.limit = 7;
  auto listed = ListAll(*client_, kConfigMaps, ns_, all);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->items.size(), 25u);
  EXPECT_TRUE(listed->continue_token.empty());
}

std::string Base64Url(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  return out;  // no padding, as JWTs are written
}

// A service-account JWT signed with the cluster's signing key (what the token controller or the
// TokenRequest API would issue). "" on failure.
std::string MintServiceAccountToken(const std::string& key_file, const Json& claims) {
  FILE* f = std::fopen(key_file.c_str(), "r");
  if (f == nullptr) return "";
  EVP_PKEY* key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (key == nullptr) return "";
  // scripts/local-cluster makes an EC P-256 key (ES256); an RSA key would be RS256.
  const bool ec = EVP_PKEY_id(key) == EVP_PKEY_EC;
  const std::string signing_input =
      Base64Url(ec ? R"({"alg":"ES256","typ":"JWT"})" : R"({"alg":"RS256","typ":"JWT"})") + "." +
      Base64Url(claims.dump());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  size_t len = 0;
  std::string sig;
  if (EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestSign(ctx, nullptr, &len,
                     reinterpret_cast<const unsigned char*>(signing_input.data()),
                     signing_input.size()) == 1) {
    sig.resize(len);
    if (EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                       reinterpret_cast<const unsigned char*>(signing_input.data()),
                       signing_input.size()) == 1) {
      sig.resize(len);
    } else {
      sig.clear();
    }
  }
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  if (ec &&
      !sig.empty()) {  // OpenSSL writes ECDSA signatures in DER; JWS wants r || s, 32 bytes each
    const unsigned char* der = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &der, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    const bool ok = es != nullptr &&
                    BN_bn2binpad(ECDSA_SIG_get0_r(es), reinterpret_cast<unsigned char*>(raw.data()),
                                 32) == 32 &&
                    BN_bn2binpad(ECDSA_SIG_get0_s(es),
                                 reinterpret_cast<unsigned char*>(raw.data()) + 32, 32) == 32;
    ECDSA_SIG_free(es);
    sig = ok ? raw : "";
  }
  return sig.empty() ? "" : signing_input + "." + Base64Url(sig);
}

// The claims of a token the TokenRequest API would issue for ServiceAccount ns/name (uid), bound
// to the account: deleting the account revokes it.
Json ServiceAccountClaims(const std::string& ns, const std::string& name, const std::string& uid,
                          int64_t iat, int64_t exp) {
  const std::string issuer =
      "https://kubernetes.default.svc.cluster.local";  // scripts/local-cluster
  return Json{
      {"iss", issuer},
      {"aud", Json::array({issuer})},
      {"sub", "system:serviceaccount:" + ns + ":" + name},
      {"iat", iat},
      {"nbf", iat},
      {"exp", exp},
      {"kubernetes.io", {{"namespace", ns}, {"serviceaccount", {{"name", name}, {"uid", uid}}}}}};
}

// An expired token: the same service-account token is accepted while valid (the account has no
// rights, so 403) and refused with 401 once its exp has passed; the client says so without the
// token in the message and does not retry.
TEST_F(KubeIntegrationTest, ExpiredServiceAccountTokenIsUnauthorized) {
  const std::string state = Env("NVL72_CLUSTER_STATE");
  ASSERT_FALSE(state.empty()) << "NVL72_CLUSTER_STATE is not set (source $STATE/env)";
  const ResourceRef service_accounts =
      ResourceRef::Custom("", "v1", "serviceaccounts", "ServiceAccount", true);
  auto sa = client_->Create(service_accounts, ns_, {{"metadata", {{"name", "expiring"}}}});
  ASSERT_TRUE(sa.ok()) << sa.status();
  auto claims = [&](int64_t iat, int64_t exp) {
    return ServiceAccountClaims(ns_, "expiring", Uid(*sa), iat, exp);
  };
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto client_with = [&](const std::string& token) { return ClientWithToken(token); };
  const std::string key = state + "/pki/sa.key";
  const std::string valid = MintServiceAccountToken(key, claims(now - 60, now + 600));
  ASSERT_FALSE(valid.empty()) << "cannot sign with " << key;
  Status s = client_with(valid)->Get(kNamespaces, "", "default").status();
  EXPECT_TRUE(IsForbidden(s)) << "a valid token of an account without rights: " << s;

  // Expired an hour ago (the API server allows a minute of clock skew).
  const std::string expired = MintServiceAccountToken(key, claims(now - 7200, now - 3600));
  ASSERT_FALSE(expired.empty());
  s = client_with(expired)->Get(kNamespaces, "", "default").status();
  EXPECT_TRUE(IsUnauthorized(s)) << s;
  EXPECT_FALSE(s.IsRetryable());
  EXPECT_FALSE(IsTransient(s));
  EXPECT_EQ(s.message().find(expired.substr(expired.size() - 20)), std::string::npos) << s;
}

// A token revoked while an informer runs on it (its ServiceAccount deleted): the next list/watch
// gets 401, on_error reports it with what it means, the informer keeps retrying with its last
// cache.
TEST_F(KubeIntegrationTest, TokenRevokedWhileAnInformerRunsIsReportedAndTheCacheKept) {
  const std::string state = Env("NVL72_CLUSTER_STATE");
  ASSERT_FALSE(state.empty()) << "NVL72_CLUSTER_STATE is not set (source $STATE/env)";
  const ResourceRef service_accounts =
      ResourceRef::Custom("", "v1", "serviceaccounts", "ServiceAccount", true);
  const ResourceRef roles =
      ResourceRef::Custom("rbac.authorization.k8s.io", "v1", "roles", "Role", true);
  const ResourceRef bindings =
      ResourceRef::Custom("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true);
  auto sa = client_->Create(service_accounts, ns_, {{"metadata", {{"name", "watcher"}}}});
  ASSERT_TRUE(sa.ok()) << sa.status();
  auto role = client_->Create(
      roles, ns_,
      {{"metadata", {{"name", "watch-configmaps"}}},
       {"rules", Json::array({{{"apiGroups", Json::array({""})},
                               {"resources", Json::array({"configmaps"})},
                               {"verbs", Json::array({"get", "list", "watch"})}}})}});
  ASSERT_TRUE(role.ok()) << role.status();
  auto binding = client_->Create(
      bindings, ns_,
      {{"metadata", {{"name", "watcher"}}},
       {"roleRef",
        {{"apiGroup", "rbac.authorization.k8s.io"},
         {"kind", "Role"},
         {"name", "watch-configmaps"}}},
       {"subjects",
        Json::array({{{"kind", "ServiceAccount"}, {"name", "watcher"}, {"namespace", ns_}}})}});
  ASSERT_TRUE(binding.ok()) << binding.status();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("cm" + std::to_string(i))).ok());

  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string token = MintServiceAccountToken(
      state + "/pki/sa.key", ServiceAccountClaims(ns_, "watcher", Uid(*sa), now - 60, now + 3600));
  ASSERT_FALSE(token.empty());
  auto watcher = ClientWithToken(token);
  ASSERT_NE(watcher, nullptr);

  std::mutex mu;
  std::vector<std::string> errors;  // DescribeInformerError of each failure
  InformerOptions o;
  o.resource = kConfigMaps;
  o.ns = ns_;
  o.label_selector = kItSelector;
  o.watch_timeout_seconds = 1;  // watches end every second, so the revocation is seen at once
  o.initial_backoff = std::chrono::milliseconds(100);
  o.max_backoff = std::chrono::milliseconds(500);
  o.on_error = [&](const Status& s, int64_t n) {
    std::lock_guard<std::mutex> l(mu);
    errors.push_back(s.ok() ? "ok" : DescribeInformerError(kConfigMaps, s, n));
  };
  Informer inf(watcher.get(), RealClock(), o);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  EXPECT_EQ(inf.Size(), 3u);
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_TRUE(errors.empty()) << errors.front();
  }

  ASSERT_TRUE(client_->Delete(service_accounts, ns_, "watcher").ok());
  const auto revoked = std::chrono::steady_clock::now();
  const auto deadline = revoked + std::chrono::seconds(30);
  std::string first;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (!errors.empty()) {
        first = errors.front();
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(first.empty()) << "no failure reported within 30 s of the revocation";
  // The API server caches a token's successful authentication for up to 10 s.
  std::printf("first failure %.1f s after the revocation: %s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - revoked).count(),
              first.c_str());
  EXPECT_NE(first.find("UNAUTHENTICATED"), std::string::npos) << first;
  EXPECT_NE(first.find("token expired or revoked"), std::string::npos) << first;
  EXPECT_EQ(first.find(token.substr(token.size() - 20)), std::string::npos)
      << "the token is in the message";
  // The cache keeps its last state while the informer retries.
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("after")).ok());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(inf.Size(), 3u);
  EXPECT_GE(inf.Stats().watch_errors, 2);
  inf.Stop();
}

TEST_F(KubeIntegrationTest, BindEvictAndEvents) {
  const std::string node = "kube-it-node-" + RandomSuffix();
  ASSERT_TRUE(client_->Create(kNodes, "", {{"metadata", {{"name", node}}}}).ok());
  Json pod = {{"metadata", {{"name", "p"}}},
              {"spec",
               {{"schedulerName", "kube-it-nobody"},
                {"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  auto created = client_->Create(kPods, ns_, pod);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(client_->Bind(ns_, "p", Uid(*created), node).ok());
  EXPECT_EQ(AtPath(client_->Get(kPods, ns_, "p").value(), "/spec/nodeName"), node);
  Status again = client_->Bind(ns_, "p", "", node);
  EXPECT_TRUE(IsConflict(again)) << again;

  EventRecorder rec(client_.get(), RealClock(), {"nvl72.dev/kube-it", "it-0"});
  rec.Record(*created, EventType::kNormal, "Bound", "Bind", "bound by the integration test");
  ASSERT_TRUE(rec.Flush(10s));
  EXPECT_EQ(rec.Stats().written, 1) << "failed=" << rec.Stats().failed;
  auto events = client_->List(kEvents, ns_);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->items.size(), 1u);
  EXPECT_EQ(events->items[0]["reason"], "Bound");

  DeleteOptions now;
  now.grace_period_seconds = 0;
  Status ev = client_->Evict(ns_, "p", now);
  EXPECT_TRUE(ev.ok()) << ev;
  client_->Delete(kNodes, "", node).IgnoreError();
}

TEST_F(KubeIntegrationTest, ClientCertificateKubeconfig) {
  std::string cert_kubeconfig = Env("NVL72_KUBECONFIG_CERT");
  if (cert_kubeconfig.empty()) {
    cert_kubeconfig = std::filesystem::path(kubeconfig_).parent_path() / "kubeconfig-cert";
  }
  ASSERT_TRUE(std::filesystem::exists(cert_kubeconfig)) << cert_kubeconfig;
  auto cfg = LoadKubeconfig(cert_kubeconfig);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_FALSE(cfg->client_cert_data.empty());
  auto c = NewClient(*cfg);
  auto got = c->Get(kNamespaces, "", ns_);
  EXPECT_TRUE(got.ok()) << got.status();
}

// An exec plugin that answers with a client certificate and key (as some neoclouds' plugins do)
// instead of a token: the client presents that certificate.
TEST_F(KubeIntegrationTest, ExecPluginClientCertificate) {
  std::string cert_kubeconfig =
      std::filesystem::path(kubeconfig_).parent_path() / "kubeconfig-cert";
  auto cert_cfg = LoadKubeconfig(cert_kubeconfig);
  ASSERT_TRUE(cert_cfg.ok()) << cert_cfg.status();
  char dir[] = "/tmp/nvl72-kube-it-exec-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string(dir) + "/credential.json";
  std::ofstream(out) << Json{{"apiVersion", "client.authentication.k8s.io/v1beta1"},
                             {"kind", "ExecCredential"},
                             {"status",
                              {{"clientCertificateData", cert_cfg->client_cert_data},
                               {"clientKeyData", cert_cfg->client_key_data}}}}
                            .dump();
  Config c = config_;
  c.token.clear();
  c.token_file.clear();
  c.client_cert_data.clear();
  c.client_key_data.clear();
  c.exec = ExecConfig{};
  c.exec->api_version = "client.authentication.k8s.io/v1beta1";
  c.exec->command = "cat";
  c.exec->args = {out};
  c.exec->interactive_mode = "Never";
  c.exec->user = "cert-plugin";
  auto got = NewClient(c)->Get(kNamespaces, "", ns_);
  EXPECT_TRUE(got.ok()) << got.status();
  std::filesystem::remove_all(dir);
}

// A kubeconfig without a certificate authority trusts the system store (OpenSSL's default paths,
// which SSL_CERT_FILE points elsewhere); tls-server-name is the name checked against the server's
// certificate while the connection still goes to the server's address.
TEST_F(KubeIntegrationTest, SystemTrustStoreAndTlsServerName) {
  char dir[] = "/tmp/nvl72-kube-it-trust-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string ca_path = std::string(dir) + "/ca.pem";
  if (!config_.ca_data.empty()) {
    std::ofstream(ca_path) << config_.ca_data;
  } else {
    std::filesystem::copy_file(config_.ca_file, ca_path);
  }
  Config system = config_;
  system.ca_data.clear();
  system.ca_file.clear();
  unsetenv("SSL_CERT_FILE");
  Status s = NewClient(system)->Get(kNamespaces, "", "default").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << "the local CA is in no system store: " << s;
  setenv("SSL_CERT_FILE", ca_path.c_str(), 1);
  s = NewClient(system)->Get(kNamespaces, "", "default").status();
  unsetenv("SSL_CERT_FILE");
  EXPECT_TRUE(s.ok()) << "the system store now holds the local CA: " << s;

  Config named = config_;
  named.tls_server_name = "kubernetes.default";  // a name of the API server's certificate
  s = NewClient(named)->Get(kNamespaces, "", "default").status();
  EXPECT_TRUE(s.ok()) << s;
  named.tls_server_name = "wrong.example";
  s = NewClient(named)->Get(kNamespaces, "", "default").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("certificate"), std::string::npos) << s;
  std::filesystem::remove_all(dir);
}

TEST_F(KubeIntegrationTest, BadInputGivesClearErrors) {
  // Unreachable server.
  Config unreachable = config_;
  unreachable.server = "https://127.0.0.1:1";
  unreachable.connect_timeout = 2s;
  Status s = NewClient(unreachable)->Get(kNamespaces, "", "default").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_TRUE(IsTransient(s));

  // Wrong CA: a freshly generated self-signed certificate.
  char dir[] = "/tmp/nvl72-kube-it-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string cmd =
      std::string("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=wrong-ca ") +
      "-keyout " + dir + "/k.pem -out " + dir + "/ca.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Config wrong_ca = config_;
  wrong_ca.ca_data.clear();
  wrong_ca.ca_file = std::string(dir) + "/ca.pem";
  s = NewClient(wrong_ca)->Get(kNamespaces, "", "default").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("certificate"), std::string::npos) << s;
  std::filesystem::remove_all(dir);

  // Wrong token.
  Config wrong_token = config_;
  wrong_token.client_cert_data.clear();
  wrong_token.client_key_data.clear();
  wrong_token.token = "not-the-token";
  s = NewClient(wrong_token)->Get(kNamespaces, "", "default").status();
  EXPECT_TRUE(IsUnauthorized(s)) << s;
  EXPECT_FALSE(s.IsRetryable());
  EXPECT_EQ(s.message().find("not-the-token"), std::string::npos);
  EXPECT_EQ(s.message().find(config_.token.empty() ? "\x01" : config_.token), std::string::npos);

  // No credentials at all: anonymous is forbidden or unauthorized, never a crash.
  Config anonymous = config_;
  anonymous.token.clear();
  anonymous.token_file.clear();
  anonymous.client_cert_data.clear();
  anonymous.client_key_data.clear();
  s = NewClient(anonymous)->Get(kNamespaces, "", "default").status();
  EXPECT_TRUE(IsUnauthorized(s) || IsForbidden(s)) << s;

  // Insecure skip-verify still works (for tests only).
  Config insecure = config_;
  insecure.ca_data.clear();
  insecure.ca_file.clear();
  insecure.insecure_skip_tls_verify = true;
  EXPECT_TRUE(NewClient(insecure)->Get(kNamespaces, "", "default").ok());
}

}  // namespace
}  // namespace nvl72::kube
