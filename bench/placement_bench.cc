// Placement core decision times (targets in issue 2):
//   gang placement: median < 50 us at 8 domains, < 1 ms at 1,000 domains (18,000 nodes);
//   single-pod scoring over 5,000 nodes: < 200 us.
// Clusters are filled to a realistic mix (about 60% of nodes busy, some partly used, a few
// unhealthy) with a fixed seed, so every run sees the same snapshot.
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>

#include "model/cluster_state.h"
#include "model/job_nodes.h"
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
    ->Args({8, 16})
    ->Args({8, 4})
    ->Args({1000, 16})
    ->Args({1000, 4})
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_PlaceGang, domain_best_fit, "domain-best-fit")
    ->Args({8, 16})
    ->Args({1000, 16})
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// The same decision with a per-job node mask (GangRequest::allowed_nodes): the job's constraints
// allow every other node, and the whole empty domain.
void BM_PlaceGangMasked(benchmark::State& state) {
  const int domains = static_cast<int>(state.range(0));
  Snapshot s = FilledCluster(domains, 18, 42);
  GangRequest r;
  r.key = "bench/gang";
  r.replicas = static_cast<int>(state.range(1));
  r.allowed_nodes.resize(s.nodes.size());
  for (size_t i = 0; i < s.nodes.size(); ++i) r.allowed_nodes[i] = i % 2 == 0;
  for (NodeId id : s.domains[static_cast<size_t>(domains / 2)].nodes) {
    s.nodes[static_cast<size_t>(id)] = Node{
        .name = s.nodes[static_cast<size_t>(id)].name, .domain = domains / 2, .gpu_capacity = 4};
    r.allowed_nodes[static_cast<size_t>(id)] = true;
  }
  auto policy = MakePolicy("nvl72", {2});
  for (auto _ : state) {
    GangDecision d = policy->PlaceGang(s, r);
    benchmark::DoNotOptimize(d);
    if (!d.placed) state.SkipWithError("gang did not place");
  }
  state.SetLabel(std::to_string(domains * 18) + " nodes");
}
BENCHMARK(BM_PlaceGangMasked)
    ->Args({8, 16})
    ->Args({1000, 16})
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// What the operator does per waiting job: judge its rank pod (nodeSelector, a toleration, a CPU
// request) against every node (model::JudgeJob) and place it with that mask. The ClusterState is
// built once, outside the loop, as the operator builds it once per admission pass. Nodes carry the
// labels kwok nodes of scripts/local-cluster carry; every 10th node is tainted.
void BM_JudgeAndPlace(benchmark::State& state) {
  const int domains = static_cast<int>(state.range(0));
  std::vector<nlohmann::json> nodes;
  for (int d = 0; d < domains; ++d) {
    for (int n = 0; n < 18; ++n) {
      const std::string name = "rack" + std::to_string(d) + "-node" + std::to_string(n);
      nlohmann::json node = {
          {"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"kubernetes.io/os", "linux"},
              {"kubernetes.io/arch", "arm64"},
              {"nvidia.com/gpu.clique", "c." + std::to_string(d)},
              {"nvidia.com/gpu.present", "true"},
              {"pool", n % 2 == 0 ? "a" : "b"}}}}},
          {"spec", nlohmann::json::object()},
          {"status",
           {{"allocatable",
             {{"cpu", "144"}, {"memory", "960Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
      if (n % 10 == 3)
        node["spec"]["taints"] = {{{"key", "dedicated"}, {"value", "x"}, {"effect", "NoSchedule"}}};
      nodes.push_back(std::move(node));
    }
  }
  auto state_ = model::ClusterState::Build(nodes, {}, {}, {});
  const nlohmann::json job = {
      {"metadata", {{"name", "gang"}, {"namespace", "bench"}, {"generation", 1}}}};
  model::JobSpec spec;
  spec.replicas = static_cast<int>(state.range(1));
  spec.pod_template = nlohmann::json::parse(R"({"spec": {"nodeSelector": {"pool": "a"},
      "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
      "containers": [{"name": "c", "resources": {"requests": {"cpu": "8", "memory": "64Gi"}}}]}})");
  auto policy = MakePolicy("nvl72", {2});
  for (auto _ : state) {
    model::JobVerdict v = model::JudgeJob(state_, job, spec, "bench/gang", 0, "nvidia.com/gpu");
    GangDecision d = policy->PlaceGang(state_.snapshot(), v.request);
    benchmark::DoNotOptimize(d);
    if (!d.placed) state.SkipWithError("gang did not place");
  }
  state.SetLabel(std::to_string(domains * 18) + " nodes");
}
BENCHMARK(BM_JudgeAndPlace)
    ->Args({8, 8})
    ->Args({1000, 8})
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

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
BENCHMARK(BM_ScorePods)
    ->Arg(5000)
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_SelectReplacements(benchmark::State& state) {
  Snapshot s = FilledCluster(1000, 18, 9);
  for (NodeId id : s.domains[3].nodes) s.nodes[static_cast<size_t>(id)].gpu_used = 0;
  auto policy = MakePolicy("nvl72", {2});
  GangRequest r;
  r.replicas = 16;
  GangPlacement current;
  for (int i = 0; i < 16; ++i)
    current.rank_nodes.push_back(s.domains[3].nodes[static_cast<size_t>(i)]);
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
