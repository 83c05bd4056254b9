// nvl72-extender hot path at scale: server-side filter + prioritize handling (Service, no socket)
// and the HTTP round trip over one keep-alive connection, at 5,000 nodes in nodeCacheCapable mode;
// the view rebuild; the memory of 10,000 cached nodes and 20,000 pods.
//
// Latency percentiles are measured per iteration and reported as counters (p50_us, p99_us): Google
// Benchmark's own numbers are means.
#include <benchmark/benchmark.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kube/fake_client.h"
#include "scheduler-plugin/cluster_cache.h"
#include "scheduler-plugin/fixtures_for_test.h"
#include "scheduler-plugin/server.h"
#include "scheduler-plugin/service.h"

namespace nvl72::extender {
namespace {

using testing::MakeJob;
using testing::MakePod;
using testing::MakeRacks;
using testing::Ptrs;

// A cluster of `nodes` nodes (racks of 18) where about a third of the racks hold a 16-node gang,
// a third of the remaining nodes run single pods of 1-3 GPUs, and the rest is empty. Seeded.
struct World {
  std::vector<Json> nodes, pods, jobs;
  std::vector<std::string> names;
};

World MakeWorld(int node_count, int extra_pods = 0) {
  World w;
  const int racks = (node_count + 17) / 18;
  w.nodes = MakeRacks(racks, 18);
  w.nodes.resize(static_cast<size_t>(node_count));
  for (const Json& n : w.nodes) w.names.push_back(n["metadata"]["name"].get<std::string>());
  std::mt19937 rng(42);
  for (int r = 0; r < racks; ++r) {
    const int base = r * 18;
    if (base + 18 > node_count) break;
    if (r % 3 == 0) {
      std::vector<std::string> ranks;
      ranks.reserve(16);
      for (int i = 0; i < 16; ++i) {
        ranks.push_back(w.names[static_cast<size_t>(base) + static_cast<size_t>(i)]);
      }
      const std::string job = "gang-" + std::to_string(r);
      w.jobs.push_back(MakeJob("ml", job, 4, ranks, "rack-" + std::to_string(r)));
      for (int i = 0; i < 16; ++i) {
        w.pods.push_back(MakePod("ml", job + "-" + std::to_string(i), 4,
                                 ranks[static_cast<size_t>(i)], job, i,
                                 ranks[static_cast<size_t>(i)]));
      }
    } else {
      for (int i = 0; i < 18; ++i) {
        if (rng() % 3 != 0) continue;
        w.pods.push_back(MakePod("ml", "p-" + std::to_string(w.pods.size()),
                                 1 + static_cast<int>(rng() % 3),
                                 w.names[static_cast<size_t>(base) + static_cast<size_t>(i)]));
      }
    }
  }
  for (int i = 0; i < extra_pods; ++i) {
    w.pods.push_back(MakePod("batch", "x-" + std::to_string(i), 0,
                             w.names[static_cast<size_t>(i) % w.names.size()]));
  }
  return w;
}

struct Fixture {
  World world;
  std::unique_ptr<StaticViewSource> views;
  std::unique_ptr<Extender> ext;
  kube::FakeClient client;
  Metrics metrics;
  std::unique_ptr<Service> service;
  std::string single_body;  // 1-GPU pod, all node names
  std::string gang_body;    // a gang rank, all node names

  explicit Fixture(int nodes) : world(MakeWorld(nodes)) {
    ViewOptions vo;
    views = std::make_unique<StaticViewSource>(
        BuildView(Ptrs(world.nodes), Ptrs(world.pods), Ptrs(world.jobs), vo));
    auto e = Extender::Create({});
    ext = std::move(*e);
    service = std::make_unique<Service>(ext.get(), views.get(), &client, &metrics);
    single_body = Json{{"Pod", MakePod("team", "single", 1)}, {"NodeNames", world.names}}.dump();
    gang_body = Json{{"Pod", MakePod("ml", "gang-0-3", 4, "", "gang-0", 3, world.names[3])},
                     {"NodeNames", world.names}}
                    .dump();
  }
};

void ReportPercentiles(benchmark::State& state, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = us.back();
}

template <typename F>
void Timed(benchmark::State& state, F&& f) {
  std::vector<double> us;
  us.reserve(100000);
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  ReportPercentiles(state, us);
}

// kube-scheduler's prioritize request after `filter_body`: the same Pod, and as NodeNames the nodes
// the filter reply passed, in its order (pkg/scheduler/extender.go sends the filtered list).
std::string PrioritizeBodyFor(const Service& service, const std::string& filter_body) {
  const Response f = service.Filter(filter_body);
  const Json reply = Json::parse(f.body);
  const Json request = Json::parse(filter_body);
  return Json{{"Pod", request["Pod"]}, {"NodeNames", reply["NodeNames"]}}.dump();
}

// One scheduling cycle's extender calls, server side: filter, then prioritize of the passed nodes.
// `filter_bodies[k]` is followed by `prioritize_bodies[k]`, k taken in turn.
void RunCycles(benchmark::State& state, const Service& service,
               const std::vector<std::string>& filter_bodies,
               const std::vector<std::string>& prioritize_bodies) {
  size_t next = 0;
  Timed(state, [&] {
    const size_t k = next++ % filter_bodies.size();
    auto f = service.Filter(filter_bodies[k]);
    auto p = service.Prioritize(prioritize_bodies[k]);
    benchmark::DoNotOptimize(f.body.data());
    benchmark::DoNotOptimize(p.body.data());
  });
}

// The same NodeNames every cycle (a quiet cluster: kube-scheduler's own filters pass every node).
void BM_ServiceFilterPrioritize(benchmark::State& state) {
  Fixture fx(static_cast<int>(state.range(0)));
  const std::vector<std::string> filter{fx.single_body};
  const std::vector<std::string> prioritize{PrioritizeBodyFor(*fx.service, fx.single_body)};
  RunCycles(state, *fx.service, filter, prioritize);
  state.counters["request_kB"] = static_cast<double>(fx.single_body.size()) / 1024.0;
}
BENCHMARK(BM_ServiceFilterPrioritize)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

// Every filter request carries a NodeNames array not seen before: 64 arrays, each without a
// different node (kube-scheduler's own filters drop full nodes as a burst fills them), taken in
// turn (the cache keeps 4). `shuffled` (argument 2 = 1): each array also in its own random order,
// as kube-scheduler's parallel filtering appends feasible nodes in whatever order its goroutines
// finish (findNodesThatPassFilters, pkg/scheduler/schedule_one.go), so no two cycles send the same
// bytes.
void BM_ServiceFilterPrioritizeNewNames(benchmark::State& state) {
  Fixture fx(static_cast<int>(state.range(0)));
  const bool shuffled = state.range(1) != 0;
  std::mt19937 rng(7);
  std::vector<std::string> filter, prioritize;
  for (size_t k = 0; k < 64; ++k) {
    std::vector<std::string> names = fx.world.names;
    names.erase(names.begin() + static_cast<std::ptrdiff_t>(k * 7 % names.size()));
    if (shuffled) std::shuffle(names.begin(), names.end(), rng);
    filter.push_back(Json{{"Pod", MakePod("team", "single", 1)}, {"NodeNames", names}}.dump());
    prioritize.push_back(PrioritizeBodyFor(*fx.service, filter.back()));
  }
  RunCycles(state, *fx.service, filter, prioritize);
}
BENCHMARK(BM_ServiceFilterPrioritizeNewNames)
    ->Args({5000, 0})
    ->Args({5000, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_ServiceFilterOnly(benchmark::State& state) {
  Fixture fx(static_cast<int>(state.range(0)));
  Timed(state, [&] { benchmark::DoNotOptimize(fx.service->Filter(fx.single_body).body.data()); });
}
BENCHMARK(BM_ServiceFilterOnly)->Arg(5000)->Unit(benchmark::kMicrosecond);

// A gang rank: one node passes, 4,999 get a reason.
void BM_ServiceFilterGangRank(benchmark::State& state) {
  Fixture fx(static_cast<int>(state.range(0)));
  Timed(state, [&] { benchmark::DoNotOptimize(fx.service->Filter(fx.gang_body).body.data()); });
}
BENCHMARK(BM_ServiceFilterGangRank)->Arg(5000)->Unit(benchmark::kMicrosecond);

void BM_ParseArgs(benchmark::State& state) {
  Fixture fx(static_cast<int>(state.range(0)));
  Timed(state, [&] {
    auto a = ParseExtenderArgs(fx.single_body, "nvidia.com/gpu");
    benchmark::DoNotOptimize(a.ok());
  });
}
BENCHMARK(BM_ParseArgs)->Arg(5000)->Unit(benchmark::kMicrosecond);

// The HTTP round trip of filter + prioritize over one keep-alive connection on 127.0.0.1.
void BM_HttpFilterPrioritizeRoundTrip(benchmark::State& state) {
  Fixture fx(static_cast<int>(state.range(0)));
  ServerOptions so;
  so.port = 0;
  Server server(so, fx.service.get(), &fx.metrics);
  if (!server.Start().ok()) {
    state.SkipWithError("server did not start");
    return;
  }
  httplib::Client cli("127.0.0.1", server.port());
  cli.set_keep_alive(true);
  cli.set_tcp_nodelay(true);  // as Go's net/http does; without it delayed ACKs add ~40 ms per call
  std::vector<double> filter_us, both_us;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto f = cli.Post("/filter", fx.single_body, "application/json");
    const auto t1 = std::chrono::steady_clock::now();
    auto p = cli.Post("/prioritize", fx.single_body, "application/json");
    const auto t2 = std::chrono::steady_clock::now();
    if (!f || !p || f->status != 200 || p->status != 200) {
      state.SkipWithError("request failed");
      break;
    }
    filter_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    both_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
  }
  ReportPercentiles(state, both_us);
  std::sort(filter_us.begin(), filter_us.end());
  if (!filter_us.empty()) {
    state.counters["filter_p99_us"] =
        filter_us[std::min(filter_us.size() - 1, filter_us.size() * 99 / 100)];
  }
  server.Stop();
}
BENCHMARK(BM_HttpFilterPrioritizeRoundTrip)
    ->Arg(5000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One rebuild of the view from the caches' objects (what the cache thread does after changes).
void BM_BuildView(benchmark::State& state) {
  World w = MakeWorld(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  auto n = Ptrs(w.nodes), p = Ptrs(w.pods), j = Ptrs(w.jobs);
  Timed(state, [&] { benchmark::DoNotOptimize(BuildView(n, p, j, {}).get()); });
  state.counters["pods"] = static_cast<double>(w.pods.size());
}
BENCHMARK(BM_BuildView)->Args({5000, 0})->Args({10000, 10000})->Unit(benchmark::kMillisecond);

long RssKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// Memory of the caches the extender keeps at 10,000 nodes and 20,000 pods: the objects as the
// informers hold them (shared_ptr<const Json>) plus one view.
void BM_CacheMemory(benchmark::State& state) {
  for (auto _ : state) {
    const long before = RssKb();
    World w = MakeWorld(10000, 0);
    const int more = 20000 - static_cast<int>(w.pods.size());
    World extra = MakeWorld(18, std::max(0, more));
    std::vector<kube::ObjectPtr> nodes, pods, jobs;
    for (auto& o : w.nodes) nodes.push_back(std::make_shared<const Json>(std::move(o)));
    for (auto& o : w.pods) pods.push_back(std::make_shared<const Json>(std::move(o)));
    for (auto& o : extra.pods) pods.push_back(std::make_shared<const Json>(std::move(o)));
    for (auto& o : w.jobs) jobs.push_back(std::make_shared<const Json>(std::move(o)));
    w = World();
    extra = World();
    std::vector<const Json*> n, p, j;
    for (auto& o : nodes) n.push_back(o.get());
    for (auto& o : pods) p.push_back(o.get());
    for (auto& o : jobs) j.push_back(o.get());
    auto view = BuildView(n, p, j, {});
    state.counters["rss_MB"] = static_cast<double>(RssKb() - before) / 1024.0;
    state.counters["pods"] = static_cast<double>(pods.size());
    benchmark::DoNotOptimize(view.get());
  }
}
BENCHMARK(BM_CacheMemory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nvl72::extender

BENCHMARK_MAIN();
