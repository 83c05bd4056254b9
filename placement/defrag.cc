#include "placement/defrag.h"

#include <algorithm>
#include <utility>

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

// Preemptible jobs touching `dom`, the ones freeing the most GPUs there first: (GPUs freed in
// `dom`, job index).
std::vector<std::pair<int, int>> CandidatesIn(const Snapshot& s, std::span<const RunningJob> jobs,
                                              DomainId dom) {
  std::vector<std::pair<int, int>> cand;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!jobs[j].preemptible) continue;
    int here = 0;
    for (const auto& [node, gpus] : jobs[j].gpus_on_node) {
      if (node >= 0 && Idx(node) < s.nodes.size() && s.nodes[Idx(node)].domain == dom) here += gpus;
    }
    if (here > 0) cand.emplace_back(here, static_cast<int>(j));
  }
  std::stable_sort(cand.begin(), cand.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return cand;
}

// The search for the cheapest set of candidates to move out of one domain; improves `plan` (and
// `best_gpus`, the GPUs its moves hold) when it finds a cheaper one.
class DomainSearch {
 public:
  DomainSearch(const Snapshot& s, const PlacementPolicy& policy, const GangRequest& waiting,
               std::span<const RunningJob> jobs, DomainId dom, DefragPlan& plan, int& best_gpus)
      : s_(s),
        policy_(policy),
        waiting_(waiting),
        jobs_(jobs),
        dom_(dom),
        cand_(CandidatesIn(s, jobs, dom)),
        plan_(plan),
        best_gpus_(best_gpus) {}

  // Sets of 1, 2, ... up to `limit` candidates, until one size yields a plan.
  void Run(int limit) {
    for (int k = 1; k <= limit && k <= static_cast<int>(cand_.size()) && !done_; ++k) {
      if (Choose(static_cast<long>(cand_.size()), k) > kMaxCombinations) {
        pick_.clear();
        for (int i = 0; i < k; ++i) pick_.push_back(cand_[Idx(i)].second);
        Search(cand_.size(), k);  // evaluates the greedy prefix only
        pick_.clear();
      } else {
        Search(0, k);
      }
    }
  }

 private:
  // Tries every combination of `k` candidates (or the greedy prefix when there are too many)
  // and keeps the cheapest one that lets the gang fit with its first segment in the domain.
  void Search(size_t from, int k) {
    if (done_) return;
    if (static_cast<int>(pick_.size()) == k) {
      Evaluate();
      return;
    }
    for (size_t i = from; i < cand_.size(); ++i) {
      pick_.push_back(cand_[i].second);
      Search(i + 1, k);
      pick_.pop_back();
      if (done_) return;
    }
  }

  // Judges the complete combination `pick_`.
  void Evaluate() {
    if (!PlaceInFreedDomain(WithoutJobs(s_, jobs_, pick_), policy_, waiting_, dom_)) return;
    int gpus = 0;
    for (int j : pick_) gpus += GpusOf(jobs_[Idx(j)]);
    if (!plan_.found || static_cast<int>(pick_.size()) < static_cast<int>(plan_.moves.size()) ||
        gpus < best_gpus_) {
      plan_.found = true;
      plan_.domain = dom_;
      plan_.moves = pick_;
      best_gpus_ = gpus;
    }
    done_ = true;  // combinations are visited cheapest-looking first; one per size is enough
  }

  const Snapshot& s_;
  const PlacementPolicy& policy_;
  const GangRequest& waiting_;
  std::span<const RunningJob> jobs_;
  const DomainId dom_;
  const std::vector<std::pair<int, int>> cand_;  // CandidatesIn
  DefragPlan& plan_;
  int& best_gpus_;
  std::vector<int> pick_;
  bool done_ = false;
};

std::string PlanReason(const DefragPlan& plan, const Snapshot& s, const GangRequest& waiting,
                       int max_moves) {
  if (!plan.found) {
    return "no set of at most " + std::to_string(max_moves) + " preemptible jobs frees room for " +
           waiting.key + " in one domain";
  }
  return "move " + std::to_string(plan.moves.size()) + " preemptible job(s) to free " +
         s.domains[Idx(plan.domain)].name;
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
    const int limit = plan.found ? static_cast<int>(plan.moves.size()) : max_moves;
    DomainSearch(s, policy, waiting, jobs, dom, plan, best_gpus).Run(limit);
  }
  plan.reason = PlanReason(plan, s, waiting, max_moves);
  return plan;
}

int FreeSchedulableGpus(const Snapshot& snapshot) {
  int free = 0;
  for (const Node& n : snapshot.nodes) {
    if (n.Schedulable()) free += n.FreeGpus();
  }
  return free;
}

bool DefragEligible(const WaitingGang& gang, int free_gpus) {
  return gang.mode == TopologyMode::kRequired && free_gpus >= gang.gpus;
}

std::vector<size_t> GangsToPlanFor(std::span<const WaitingGang> waiting, int free_gpus) {
  std::vector<size_t> out;
  for (size_t i = 0; i < waiting.size() && out.size() < Idx(kMaxGangsPlannedPerPass); ++i) {
    if (DefragEligible(waiting[i], free_gpus)) out.push_back(i);
  }
  return out;
}

std::optional<GangPlacement> PlaceInFreedDomain(const Snapshot& freed,
                                                const PlacementPolicy& policy,
                                                const GangRequest& gang, DomainId domain) {
  GangDecision d = policy.PlaceGang(freed, gang);
  if (!d.placed || freed.nodes[Idx(d.placement.rank_nodes.front())].domain != domain) {
    return std::nullopt;
  }
  return std::move(d.placement);
}

}  // namespace nvl72::placement
