// operator_bench: 1,000 NVL72Jobs applied at once on 100 simulated racks, against kube::FakeClient
// (an in-memory API server), through the production pipeline: informers -> work queue -> workers ->
// Reconciler. Prints end-to-end time until every job is admitted and its pods exist, reconcile
// latency percentiles (per job reconcile, per admission pass, per placement decision) and RSS.
// The FakeClient answers in memory, so latencies are an upper bound of the operator's own work
// (they include JSON copies of the fake API server, not network). RSS includes the fake API
// server's objects as well as the operator's caches.
//
//   operator_bench [--racks 100] [--jobs 1000] [--workers 4] [--seed 1]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kube/fake_client.h"
#include "kube/informer.h"
#include "kube/workqueue.h"
#include "model/names.h"
#include "operator/log.h"
#include "operator/object_store.h"
#include "operator/reconciler.h"

namespace nvl72::op {
namespace {

using Json = nlohmann::json;

long StatusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  }
  return -1;
}

// Forwards every call to the FakeClient and adds the time spent in it to a per-thread counter, so
// a reconcile's own work (total minus API time) can be told apart from the API server's.
thread_local double tl_api_seconds = 0;

class TimingClient : public kube::Client {
  // Defined first: a deduced return type must be seen before the overrides use it.
  template <typename F>
  auto Timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = f();
    tl_api_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 public:
  explicit TimingClient(kube::Client* inner) : inner_(inner) {}
  StatusOr<Json> Get(const kube::ResourceRef& r, std::string_view ns,
                     std::string_view name) override {
    return Timed([&] { return inner_->Get(r, ns, name); });
  }
  StatusOr<kube::ListResult> List(const kube::ResourceRef& r, std::string_view ns,
                                  const kube::ListOptions& o) override {
    return Timed([&] { return inner_->List(r, ns, o); });
  }
  StatusOr<Json> Create(const kube::ResourceRef& r, std::string_view ns, const Json& obj,
                        const kube::WriteOptions& o) override {
    return Timed([&] { return inner_->Create(r, ns, obj, o); });
  }
  StatusOr<Json> Update(const kube::ResourceRef& r, std::string_view ns, const Json& obj,
                        const kube::WriteOptions& o) override {
    return Timed([&] { return inner_->Update(r, ns, obj, o); });
  }
  StatusOr<Json> UpdateStatus(const kube::ResourceRef& r, std::string_view ns, const Json& obj,
                              const kube::WriteOptions& o) override {
    return Timed([&] { return inner_->UpdateStatus(r, ns, obj, o); });
  }
  StatusOr<Json> Patch(const kube::ResourceRef& r, std::string_view ns, std::string_view name,
                       kube::PatchType type, const Json& patch, const kube::PatchOptions& o,
                       std::string_view sub) override {
    return Timed([&] { return inner_->Patch(r, ns, name, type, patch, o, sub); });
  }
  Status Delete(const kube::ResourceRef& r, std::string_view ns, std::string_view name,
                const kube::DeleteOptions& o) override {
    return Timed([&] { return inner_->Delete(r, ns, name, o); });
  }
  Status Watch(const kube::ResourceRef& r, std::string_view ns, const kube::WatchOptions& o,
               const kube::WatchHandler& h, std::stop_token stop) override {
    return inner_->Watch(r, ns, o, h, stop);  // long-running: not API latency
  }
  Status Bind(std::string_view ns, std::string_view pod, std::string_view uid,
              std::string_view node) override {
    return Timed([&] { return inner_->Bind(ns, pod, uid, node); });
  }
  Status Evict(std::string_view ns, std::string_view pod, const kube::DeleteOptions& o) override {
    return Timed([&] { return inner_->Evict(ns, pod, o); });
  }

 private:
  kube::Client* inner_;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // p is in [0, 1], so the rank is non-negative and lround rounds it half up.
  size_t i = static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1)));
  return v[std::min(i, v.size() - 1)] * 1000.0;
}

int Run(int argc, char** argv) {
  int racks = 100, njobs = 1000, workers = 4, seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--racks") racks = v;
    if (a == "--jobs") njobs = v;
    if (a == "--workers") workers = v;
    if (a == "--seed") seed = v;
  }
  SetLogLevel(LogLevel::kWarning);
  kube::FakeClient fake;
  fake.EnableStatusSubresource(Nvl72JobsResource());
  for (int r = 0; r < racks; ++r) {
    for (int n = 0; n < 18; ++n) {
      char name[32];
      std::snprintf(name, sizeof(name), "rack%d-node%02d", r, n);
      fake.Seed(
          kube::kNodes,
          {{"apiVersion", "v1"},
           {"kind", "Node"},
           {"metadata",
            {{"name", name}, {"labels", {{"nvidia.com/gpu.clique", "uuid." + std::to_string(r)}}}}},
           {"spec", Json::object()},
           {"status",
            {{"allocatable",
              {{"nvidia.com/gpu", "4"}, {"pods", "110"}, {"cpu", "144"}, {"memory", "1Ti"}}},
             {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
    }
  }
  const long rss_start = StatusKb("VmRSS:");

  kube::Clock* clock = kube::RealClock();
  kube::WorkQueue queue(clock);
  auto informer_options = [](const kube::ResourceRef& r) {
    kube::InformerOptions o;
    o.resource = r;
    return o;
  };
  kube::Informer jobs(&fake, clock, informer_options(Nvl72JobsResource()));
  kube::Informer pods(&fake, clock, informer_options(kube::kPods));
  kube::Informer nodes(&fake, clock, informer_options(kube::kNodes));
  pods.AddIndexer(InformerStore::kJobIndex, &InformerStore::IndexPodByJob);
  const std::string admission = Reconciler::kAdmissionKey;
  std::atomic<int> pods_seen{0};
  jobs.AddEventHandler({.on_add = [&](const kube::ObjectPtr& o) { queue.Add(kube::KeyOf(*o)); },
                        .on_update = [&](const kube::ObjectPtr&,
                                         const kube::ObjectPtr& o) { queue.Add(kube::KeyOf(*o)); },
                        .on_delete = nullptr});
  pods.AddEventHandler(
      {.on_add =
           [&](const kube::ObjectPtr& o) {
             ++pods_seen;
             auto l = kube::Labels(*o);
             queue.Add(kube::MakeKey(kube::Namespace(*o), l[std::string(model::kJobLabel)]));
           },
       .on_update = nullptr,
       .on_delete = nullptr});
  InformerStore store(&jobs, &pods, &nodes);
  Metrics metrics;
  TimingClient timed(&fake);
  Reconciler rec(
      &timed, &store, nullptr, &metrics, [&](const std::string& k) { queue.Add(k); },
      ReconcilerOptions{});
  jobs.Start();
  pods.Start();
  nodes.Start();
  jobs.WaitForSync(std::chrono::seconds(30));
  pods.WaitForSync(std::chrono::seconds(30));
  nodes.WaitForSync(std::chrono::seconds(30));

  std::mutex mu;
  std::vector<double> job_secs, job_own_secs, job_api_secs, pass_secs, pass_own_secs, decision_secs;
  std::vector<std::jthread> threads;
  threads.reserve(static_cast<size_t>(std::max(workers, 0)));
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      while (auto key = queue.Get()) {
        auto t0 = std::chrono::steady_clock::now();
        const double api0 = tl_api_seconds;
        Status s = rec.Reconcile(*key);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double api = tl_api_seconds - api0;
        {
          std::lock_guard<std::mutex> l(mu);
          if (*key == admission) {
            pass_secs.push_back(secs);
            pass_own_secs.push_back(std::max(0.0, secs - api));
            auto d = rec.LastPass().decision_seconds;
            decision_secs.insert(decision_secs.end(), d.begin(), d.end());
          } else {
            job_secs.push_back(secs);
            job_api_secs.push_back(api);
            job_own_secs.push_back(std::max(0.0, secs - api));
          }
        }
        if (s.ok()) {
          queue.Forget(*key);
        } else {
          queue.AddRateLimited(*key);
        }
        queue.Done(*key);
      }
    });
  }

  // The mix: mostly small gangs, a few whole racks; shuffled arrival.
  std::vector<int> sizes;
  const int big[] = {16, 8, 4, 2};
  const int big_counts[] = {njobs * 8 / 1000, njobs * 22 / 1000, njobs * 40 / 1000,
                            njobs * 150 / 1000};
  for (int i = 0; i < 4; ++i) sizes.insert(sizes.end(), big_counts[i], big[i]);
  while (static_cast<int>(sizes.size()) < njobs) sizes.push_back(1);
  std::mt19937 rng(seed);
  std::shuffle(sizes.begin(), sizes.end(), rng);
  int total_ranks = 0;
  for (int s : sizes) total_ranks += s;

  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < njobs; ++i) {
    Json j = {{"apiVersion", "nvl72.dev/v1alpha1"},
              {"kind", "NVL72Job"},
              {"metadata", {{"name", "job-" + std::to_string(i)}, {"namespace", "bench"}}},
              {"spec",
               {{"replicas", sizes[i]},
                {"gpusPerReplica", 4},
                {"topology", {{"mode", "Required"}, {"segmentSize", 0}}},
                {"template", {{"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}}}}}};
    if (!fake.Create(Nvl72JobsResource(), "bench", j).ok()) return 1;
  }
  const auto t_created = std::chrono::steady_clock::now();
  // Done when every rank pod exists (or after 300 s).
  while (pods_seen.load() < total_ranks &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(300)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto t_done = std::chrono::steady_clock::now();
  int admitted = 0;
  for (const auto& j : jobs.List()) {
    auto p = model::PlacementOf(*j);
    if (p.ok() && p->has_value()) ++admitted;
  }
  queue.ShutDown();
  threads.clear();
  const long rss_peak = StatusKb("VmHWM:");

  std::lock_guard<std::mutex> l(mu);
  std::printf("operator_bench: %d racks (%d nodes), %d jobs (%d ranks), %d workers\n", racks,
              racks * 18, njobs, total_ranks, workers);
  std::printf("  all jobs created (FakeClient) in %.2f s\n",
              std::chrono::duration<double>(t_created - t0).count());
  std::printf("  admitted %d/%d jobs, %d/%d pods created, end-to-end %.2f s\n", admitted, njobs,
              pods_seen.load(), total_ranks, std::chrono::duration<double>(t_done - t0).count());
  std::printf("  job reconcile (%zu): p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", job_secs.size(),
              Pct(job_secs, 0.5), Pct(job_secs, 0.99), Pct(job_secs, 1.0));
  std::printf("  job reconcile, time inside API calls: p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
              Pct(job_api_secs, 0.5), Pct(job_api_secs, 0.99), Pct(job_api_secs, 1.0));
  std::printf(
      "  job reconcile, own work (total minus API calls): p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
      Pct(job_own_secs, 0.5), Pct(job_own_secs, 0.99), Pct(job_own_secs, 1.0));
  std::printf("  admission pass (%zu): p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", pass_secs.size(),
              Pct(pass_secs, 0.5), Pct(pass_secs, 0.99), Pct(pass_secs, 1.0));
  std::printf(
      "  admission pass, own work (total minus API calls): p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
      Pct(pass_own_secs, 0.5), Pct(pass_own_secs, 0.99), Pct(pass_own_secs, 1.0));
  std::printf("  placement decision (%zu): p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
              decision_secs.size(), Pct(decision_secs, 0.5), Pct(decision_secs, 0.99),
              Pct(decision_secs, 1.0));
  std::printf(
      "  RSS: %.1f MB after seeding nodes, peak %.1f MB (includes the in-memory API server)\n",
      rss_start / 1024.0, rss_peak / 1024.0);
  return admitted == njobs && pods_seen.load() >= total_ranks ? 0 : 1;
}

}  // namespace
}  // namespace nvl72::op

int main(int argc, char** argv) {
  try {
    return nvl72::op::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fatal: %s\n", e.what());
    return 1;
  }
}
