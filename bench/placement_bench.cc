// Placement core decision times (targets in issue 2):
//   gang placement: median < 50 us at 8 domains, < 1 ms at 1,000 domains (18,000 nodes);
//   single-pod scoring over 5,000 nodes: < 200 us.
// Clusters are filled to a realistic mix (about 60% of nodes busy, some partly used, a few
// unhealthy) with a fixed seed, so every run sees the same snapshot.
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>

#include "placement/fragmentation.h"
#include "placement/policy.h"

namespace nvl72::placement {
namespace {

Snapshot FilledCluster(int domains, int nodes_per_domain, uint64_t seed) {
  Snapshot s;
  for (int d = 0; d < domains; ++d) s.AddDomain("rack" + std::to_string(d), nodes_per_domain, 4);
  std::mt19937_64 rng(seed);
  for (Node& n : s.nodes) {
    const uint64_t r = rng() % 100;
    if (r < 50) {
      n.gpu_used = 4;
    } else if (r < 60) {
      n.gpu_used = static_cast<int>(1 + rng() % 3);
    } else if (r < 62) {
      n.ready = false;
    }
  }
  return s;
}

void BM_PlaceGang(benchmark::State& state, const char* policy_name) {
  const int domains = static_cast<int>(state.range(0));
  const int replicas = static_cast<int>(state.range(1));
  Snapshot s = FilledCluster(domains, 18, 42);
  // One domain left fully empty so that a 16-node gang always has a place to go.
  for (NodeId id : s.domains[static_cast<size_t>(domains / 2)].nodes) {
    s.nodes[static_cast<size_t>(id)].gpu_used = 0;
    s.nodes[static_cast<size_t>(id)].ready = true;
  }
  auto policy = MakePolicy(policy_name, {2});
  GangRequest r;
  r.key = "bench/gang";
  r.replicas = replicas;
  for (auto _ : state) {
    GangDecision d = policy->PlaceGang(s, r);
    benchmark::DoNotOptimize(d);
    if (!d.placed) state.SkipWithError("gang did not place");
  }
  state.SetLabel(std::to_string(domains * 18) + " nodes");
}
BENCHMARK_CAPTURE(BM_PlaceGang, nvl72, "nvl72")
    ->Args({8, 16})->Args({8, 4})->Args({1000, 16})->Args({1000, 4})
    ->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_PlaceGang, domain_best_fit, "domain-best-fit")
    ->Args({8, 16})->Args({1000, 16})
    ->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_ScorePods(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  Snapshot s = FilledCluster((nodes + 17) / 18, 18, 7);
  auto policy = MakePolicy("nvl72", {2});
  std::vector<NodeId> ids(s.nodes.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<int64_t> raw(ids.size());
  for (auto _ : state) {
    policy->ScorePods(s, 1, ids, raw);
    std::vector<int> norm = NormalizeScores(raw);
    benchmark::DoNotOptimize(norm);
  }
  state.SetLabel(std::to_string(s.nodes.size()) + " nodes");
}
BENCHMARK(BM_ScorePods)->Arg(5000)->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_SelectReplacements(benchmark::State& state) {
  Snapshot s = FilledCluster(1000, 18, 9);
  for (NodeId id : s.domains[3].nodes) s.nodes[static_cast<size_t>(id)].gpu_used = 0;
  auto policy = MakePolicy("nvl72", {2});
  GangRequest r;
  r.replicas = 16;
  GangPlacement current;
  for (int i = 0; i < 16; ++i) current.rank_nodes.push_back(s.domains[3].nodes[static_cast<size_t>(i)]);
  s.nodes[static_cast<size_t>(current.rank_nodes[5])].ready = false;
  const int failed[] = {5};
  for (auto _ : state) {
    RecoveryDecision d = policy->SelectReplacements(s, r, current, failed);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_SelectReplacements)->Unit(benchmark::kMicrosecond);

void BM_ComputeStats(benchmark::State& state) {
  Snapshot s = FilledCluster(static_cast<int>(state.range(0)), 18, 11);
  const JobShape mix[] = {{1, 1}, {2, 4}, {16, 4}};
  for (auto _ : state) {
    ClusterStats st = ComputeStats(s, 2, mix);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_ComputeStats)->Arg(8)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nvl72::placement

BENCHMARK_MAIN();
