#include "placement/defrag.h"

#include <algorithm>
#include <functional>

namespace nvl72::placement {
namespace {

size_t Idx(int32_t id) { return static_cast<size_t>(id); }

// Above this many combinations of one size the planner falls back to a greedy order.
constexpr long kMaxCombinations = 20'000;

long Choose(long n, long k) {
  long r = 1;
  for (long i = 1; i <= k; ++i) {
    r = r * (n - k + i) / i;
    if (r > kMaxCombinations) return r;
  }
  return r;
}

Snapshot WithoutJobs(const Snapshot& s, std::span<const RunningJob> jobs,
                     std::span<const int> moved) {
  Snapshot copy = s;
  for (int j : moved) {
    for (const auto& [node, gpus] : jobs[Idx(j)].gpus_on_node) {
      Node& n = copy.nodes[Idx(node)];
      n.gpu_used = std::max(0, n.gpu_used - gpus);
    }
  }
  return copy;
}

int GpusOf(const RunningJob& job) {
  int total = 0;
  for (const auto& [node, gpus] : job.gpus_on_node) total += gpus;
  return total;
}

}  // namespace

DefragPlan PlanDefrag(const Snapshot& s, const PlacementPolicy& policy, const GangRequest& waiting,
                      std::span<const RunningJob> jobs, int max_moves) {
  DefragPlan plan;
  if (GangDecision now = policy.PlaceGang(s, waiting); now.placed) {
    plan.found = true;
    plan.domain = s.nodes[Idx(now.placement.rank_nodes.front())].domain;
    plan.reason = "fits without moving anything";
    return plan;
  }
  int best_gpus = 0;
  for (DomainId dom = 0; dom < static_cast<DomainId>(s.domains.size()); ++dom) {
    // Preemptible jobs touching this domain, the ones freeing the most GPUs here first.
    std::vector<std::pair<int, int>> cand;  // (GPUs freed in dom, job index)
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (!jobs[j].preemptible) continue;
      int here = 0;
      for (const auto& [node, gpus] : jobs[j].gpus_on_node) {
        if (node >= 0 && Idx(node) < s.nodes.size() && s.nodes[Idx(node)].domain == dom)
          here += gpus;
      }
      if (here > 0) cand.emplace_back(here, static_cast<int>(j));
    }
    std::stable_sort(cand.begin(), cand.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    const int limit = plan.found ? static_cast<int>(plan.moves.size()) : max_moves;
    std::vector<int> pick;
    bool done = false;
    // Tries every combination of `k` candidates (or the greedy prefix when there are too many)
    // and keeps the cheapest one that lets the gang fit with its first segment in `dom`.
    std::function<void(size_t, int)> search = [&](size_t from, int k) {
      if (done) return;
      if (static_cast<int>(pick.size()) == k) {
        Snapshot freed = WithoutJobs(s, jobs, pick);
        GangDecision d = policy.PlaceGang(freed, waiting);
        if (!d.placed || freed.nodes[Idx(d.placement.rank_nodes.front())].domain != dom) return;
        int gpus = 0;
        for (int j : pick) gpus += GpusOf(jobs[Idx(j)]);
        if (!plan.found || static_cast<int>(pick.size()) < static_cast<int>(plan.moves.size()) ||
            gpus < best_gpus) {
          plan.found = true;
          plan.domain = dom;
          plan.moves = pick;
          best_gpus = gpus;
        }
        done = true;  // combinations are visited cheapest-looking first; one per size is enough
        return;
      }
      for (size_t i = from; i < cand.size(); ++i) {
        pick.push_back(cand[i].second);
        search(i + 1, k);
        pick.pop_back();
        if (done) return;
      }
    };
    for (int k = 1; k <= limit && k <= static_cast<int>(cand.size()) && !done; ++k) {
      if (Choose(static_cast<long>(cand.size()), k) > kMaxCombinations) {
        pick.clear();
        for (int i = 0; i < k; ++i) pick.push_back(cand[Idx(i)].second);
        search(cand.size(), k);  // evaluates the greedy prefix only
        pick.clear();
      } else {
        search(0, k);
      }
    }
  }
  if (!plan.found) {
    plan.reason = "no set of at most " + std::to_string(max_moves) +
                  " preemptible jobs frees room for " + waiting.key + " in one domain";
  } else {
    plan.reason = "move " + std::to_string(plan.moves.size()) + " preemptible job(s) to free " +
                  s.domains[Idx(plan.domain)].name;
  }
  return plan;
}

}  // namespace nvl72::placement
