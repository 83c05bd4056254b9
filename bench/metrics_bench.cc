// nvl72-operator /metrics at scale (issue 7 target: a scrape at 1,000 domains < 50 ms and < 2 MB).
//
// The registry is filled the way a busy leader fills it: every per-domain series of `domains`
// GB200 racks (18 nodes x 4 GPUs, clique names "<36-char cluster UUID>.<n>" as GPU Feature
// Discovery writes them) from one admission pass, every job state, every API verb with three codes,
// every recovery outcome and reconcile kind with observations in their histograms.
//
//   MetricsSerialize/D    collect + text-serialise in process (what the exposer does per scrape);
//                         counter `bytes` = size of the exposition
//   MetricsCollect/D      the collection alone
//   MetricsScrapeHttp/D/Z a real scrape: GET /metrics from prometheus-cpp's Exposer on 127.0.0.1,
//                         a new connection each, without (Z=0) and with gzip (Z=1; Prometheus asks
//                         for gzip); counters `bytes` (on the wire), p50_ms, p99_ms (wall)
//   ClusterStatsUpdate/D  what every admission pass adds: ComputeStats + SetClusterStats
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <prometheus/exposer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kube/http_client.h"
#include "operator/metrics.h"
#include "placement/fragmentation.h"

namespace nvl72::op {
namespace {

// `domains` racks, about a third busy with a 16-node gang, a third partly used, the rest empty;
// one node in 50 not ready. Deterministic.
placement::Snapshot MakeCluster(int domains) {
  placement::Snapshot s;
  for (int d = 0; d < domains; ++d) {
    char name[64];
    std::snprintf(name, sizeof(name), "3f2a9c1e-7b4d-4e8a-9c0f-%012d.%d", d / 8, d % 8);
    placement::DomainId id = s.AddDomain(name, 18, 4);
    const auto& nodes = s.domains[id].nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      placement::Node& n = s.nodes[nodes[i]];
      if (d % 3 == 0 && i < 16) n.gpu_used = 4, n.gang_reserved = true;
      if (d % 3 == 1 && i % 2 == 0) n.gpu_used = static_cast<int>(1 + i % 4);
      if ((d * 18 + static_cast<int>(i)) % 50 == 0) n.ready = false;
    }
  }
  return s;
}

void Fill(Metrics& m, int domains) {
  placement::Snapshot s = MakeCluster(domains);
  const std::vector<placement::JobShape> mix = {{.nodes = 16, .gpus_per_node = 4}};
  m.SetClusterStats(s, placement::ComputeStats(s, 2, mix));
  std::map<std::string, int, std::less<>> states;
  for (auto st : Metrics::kJobStates) states[std::string(st)] = 10;
  m.SetJobStates(states);
  m.SetWaiting(5, 1234);
  m.SetAdmittedJobs(domains / 3);
  for (int i = 0; i < 100; ++i) {
    m.CountAdmitted(i * 7.0);
    m.ObserveDecision(0.0001 * i);
    for (auto kind : Metrics::kReconcileKinds) m.CountReconcile(kind, "ok", 0.001 * i);
    for (auto verb : kube::kRequestVerbs) {
      for (int code : {200, 201, 409}) m.ObserveApiRequest(verb, code, 0.0005 * i);
    }
  }
  for (auto o : Metrics::kRecoveryOutcomes)
    m.CountRecovery(o, o == "failed" ? std::nullopt : std::optional<double>(3.5));
  for (auto r : Metrics::kDefragResults) m.CountDefragMove(r);
  kube::InformerStats st;
  st.watch_restarts = 12;
  for (auto res : Metrics::kInformerResources) m.SetInformer(res, st, 20000);
  m.SetWorkQueue(3, 1);
  m.SetLeader(true);
}

void BM_MetricsSerialize(benchmark::State& state) {
  Metrics m;
  Fill(m, static_cast<int>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = m.Serialize();
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsSerialize)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

// The collection alone (prometheus-cpp copies every series into MetricFamily values).
void BM_MetricsCollect(benchmark::State& state) {
  Metrics m;
  Fill(m, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto families = m.Collectable()->Collect();
    benchmark::DoNotOptimize(families);
  }
}
BENCHMARK(BM_MetricsCollect)->Arg(1000)->Unit(benchmark::kMillisecond);

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // p is in [0, 1], so the rank is non-negative and lround rounds it half up.
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))))];
}

void BM_MetricsScrapeHttp(benchmark::State& state) {
  Metrics m;
  Fill(m, static_cast<int>(state.range(0)));
  const bool gzip = state.range(1) != 0;
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(m.Collectable());
  const int port = exposer.GetListeningPorts().at(0);
  httplib::Client cli("127.0.0.1", port);
  // One connection per scrape, like a Prometheus scrape after an idle interval (prometheus-cpp's
  // civetweb server closes the connection after each response anyway).
  cli.set_keep_alive(false);
  cli.set_tcp_nodelay(true);
  cli.set_decompress(false);  // measure what travels; the scraper decompresses
  httplib::Headers headers;
  if (gzip) headers.emplace("Accept-Encoding", "gzip");
  std::vector<double> ms;
  size_t bytes = 0;
  bool compressed = false;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto res = cli.Get("/metrics", headers);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!res || res->status != 200) {
      state.SkipWithError((res ? "HTTP " + std::to_string(res->status)
                               : "scrape failed: " + httplib::to_string(res.error()) + " port " +
                                     std::to_string(port))
                              .c_str());
      break;
    }
    bytes = res->body.size();
    compressed = res->get_header_value("Content-Encoding") == "gzip";
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["gzip"] = compressed ? 1 : 0;
  state.counters["p50_ms"] = Pct(ms, 0.5);
  state.counters["p99_ms"] = Pct(ms, 0.99);
}
BENCHMARK(BM_MetricsScrapeHttp)
    ->Args({100, 0})
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ClusterStatsUpdate(benchmark::State& state) {
  Metrics m;
  const placement::Snapshot s = MakeCluster(static_cast<int>(state.range(0)));
  const std::vector<placement::JobShape> mix = {{.nodes = 16, .gpus_per_node = 4}};
  for (auto _ : state) m.SetClusterStats(s, placement::ComputeStats(s, 2, mix));
}
BENCHMARK(BM_ClusterStatsUpdate)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nvl72::op

BENCHMARK_MAIN();
