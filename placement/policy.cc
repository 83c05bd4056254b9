#include "placement/policy.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <unordered_set>

namespace nvl72::placement {
namespace {

size_t Idx(int32_t id) { return static_cast<size_t>(id); }

// Node can take a single pod of `gpus` GPUs.
bool Fits(const Node& n, int gpus) { return n.Schedulable() && n.FreeGpus() >= gpus; }
// Node can take a rank of `r`.
bool FitsRank(const Snapshot& s, NodeId id, const GangRequest& r) {
  return Eligible(s, id, r) && s.nodes[Idx(id)].FreeGpus() >= r.gpus_per_replica;
}

// Mutable view of free GPUs while a gang is being laid out, so a policy can place rank by rank
// without copying the snapshot. Also remembers which nodes hold a rank of this gang already.
class Scratch {
 public:
  Scratch(const Snapshot& s, const GangRequest& r, int reserve)
      : s_(s), r_(r), taken_(s.nodes.size(), false), reserve_(reserve) {}
  int reserve() const { return reserve_; }
  // A rank of the gang may go to `id` (the gang's own GPUs per rank).
  bool Usable(NodeId id) const { return !taken_[Idx(id)] && FitsRank(s_, id, r_); }
  void Take(NodeId id) { taken_[Idx(id)] = true; }

 private:
  const Snapshot& s_;
  const GangRequest& r_;
  std::vector<bool> taken_;
  int reserve_;  // spare nodes per domain this placement must leave
};

int HeldBack(const Snapshot& s, DomainId dom, int reserve) {
  return HeldBackSpares(s, dom, reserve);
}

// Gangs (not preemptible ones) hold every node of `dom` outside a reserve of `reserve` nodes, so
// the domain's remaining free nodes are those gangs' spares.
bool SparesGuardGangs(const Snapshot& s, DomainId dom, int reserve) {
  const std::vector<NodeId>& nodes = s.domains[Idx(dom)].nodes;
  const auto gang_held = std::count_if(nodes.begin(), nodes.end(), [&](NodeId id) {
    const Node& n = s.nodes[Idx(id)];
    return n.gang_reserved && !n.Reclaimable();
  });
  return gang_held >= static_cast<int64_t>(nodes.size()) - reserve;
}

std::string Plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// ---------------------------------------------------------------------------------------------
// Topology-blind policies: a ranked list of nodes, ranks take the first usable ones.

GangDecision PlaceInOrder(const Snapshot& s, const GangRequest& r,
                          const std::vector<NodeId>& order) {
  GangDecision d;
  for (NodeId id : order) {
    if (static_cast<int>(d.placement.rank_nodes.size()) == r.replicas) break;
    if (FitsRank(s, id, r)) d.placement.rank_nodes.push_back(id);
  }
  if (static_cast<int>(d.placement.rank_nodes.size()) < r.replicas) {
    d.reason = "needs " + Plural(r.replicas, "node") + " with " +
               std::to_string(r.gpus_per_replica) + " free GPUs; only " +
               std::to_string(d.placement.rank_nodes.size()) + " in the cluster";
    d.placement.rank_nodes.clear();
    return d;
  }
  d.placed = true;
  return d;
}

class SpreadPolicy final : public PlacementPolicy {
 public:
  std::string_view Name() const override { return "spread"; }

  GangDecision PlaceGang(const Snapshot& s, const GangRequest& r) const override {
    if (auto err = ValidateGangRequest(r); !err.empty())
      return {false, {}, "invalid request: " + err};
    std::vector<NodeId> order(s.nodes.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](NodeId a, NodeId b) {
      return s.nodes[Idx(a)].FreeGpus() > s.nodes[Idx(b)].FreeGpus();
    });
    return PlaceInOrder(s, r, order);
  }

  // LeastAllocated: the emptier the node after placement, the better.
  void ScorePods(const Snapshot& s, int gpus, std::span<const NodeId> nodes,
                 std::span<int64_t> scores) const override {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = s.nodes[Idx(nodes[i])];
      scores[i] = Fits(n, gpus) ? int64_t{n.FreeGpus() - gpus} * 1'000'000 / n.gpu_capacity : -1;
    }
  }
};

class FirstFitPolicy final : public PlacementPolicy {
 public:
  std::string_view Name() const override { return "first-fit"; }

  GangDecision PlaceGang(const Snapshot& s, const GangRequest& r) const override {
    if (auto err = ValidateGangRequest(r); !err.empty())
      return {false, {}, "invalid request: " + err};
    std::vector<NodeId> order(s.nodes.size());
    std::iota(order.begin(), order.end(), 0);
    return PlaceInOrder(s, r, order);
  }

  void ScorePods(const Snapshot& s, int gpus, std::span<const NodeId> nodes,
                 std::span<int64_t> scores) const override {
    const auto count = static_cast<int64_t>(s.nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      scores[i] = Fits(s.nodes[Idx(nodes[i])], gpus) ? count - nodes[i] : -1;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Domain-aware best fit, shared by domain-best-fit (spares 0, no in-place recovery) and nvl72.

class DomainBestFit : public PlacementPolicy {
 public:
  DomainBestFit(int spares, SpareReserve mode) : spares_(spares), mode_(mode) {}

  GangDecision PlaceGang(const Snapshot& s, const GangRequest& r) const override {
    if (auto err = ValidateGangRequest(r); !err.empty())
      return {false, {}, "invalid request: " + err};
    GangDecision d = PlaceWithReserve(s, r, spares_);
    // A preemptible gang may borrow the reserve: recovery evicts it when it needs the nodes back.
    // Under a soft reserve any gang that fits nowhere else takes it rather than wait.
    if (!d.placed && spares_ > 0 && (r.preemptible || mode_ == SpareReserve::kSoft)) {
      GangDecision borrowed = PlaceWithReserve(s, r, 0);
      if (borrowed.placed) {
        borrowed.reason = r.preemptible ? "borrows spare nodes (preemptible)"
                                        : "takes spare nodes (soft reserve: fits nowhere else)";
        return borrowed;
      }
      // Under a soft reserve the spares are not what makes the gang wait: say what does.
      if (mode_ == SpareReserve::kSoft) return borrowed;
    }
    return d;
  }

  int SparesPerDomain() const override { return spares_; }

  // Under a soft reserve a gang that fits nowhere else may take the spares, so its reason counts
  // them; under the hard reserve they are held back.
  std::vector<int> FreeBlocks(const Snapshot& s, const GangRequest& r) const override {
    return FreeBlocksWith(s, r, mode_ == SpareReserve::kSoft ? 0 : spares_);
  }

 private:
  std::vector<int> FreeBlocksWith(const Snapshot& s, const GangRequest& r, int reserve) const {
    Scratch fresh(s, r, reserve);
    std::vector<int> out(s.domains.size(), 0);
    for (DomainId dom = 0; dom < static_cast<DomainId>(s.domains.size()); ++dom) {
      out[Idx(dom)] = Capacity(s, dom, fresh);
    }
    return out;
  }

  GangDecision PlaceWithReserve(const Snapshot& s, const GangRequest& r, int reserve) const {
    Scratch scratch(s, r, reserve);
    GangDecision d;
    d.placement.rank_nodes.reserve(static_cast<size_t>(r.replicas));
    const int seg = r.EffectiveSegmentSize();
    for (int first = 0; first < r.replicas; first += seg) {
      const int want = std::min(seg, r.replicas - first);
      std::vector<NodeId> picked;
      if (!PlaceSegment(s, want, scratch, picked)) {
        if (r.mode == TopologyMode::kRequired || !PlaceSpanning(s, want, scratch, picked)) {
          d.reason = WaitReason(s, r, want, reserve);
          d.placement.rank_nodes.clear();
          return d;
        }
      }
      d.placement.rank_nodes.insert(d.placement.rank_nodes.end(), picked.begin(), picked.end());
    }
    d.placed = true;
    return d;
  }

  // Ranks domain `dom` can still take for this gang: nodes with room that are not
  // empty, plus empty nodes beyond the spare reserve. Nodes this gang already took are not Usable,
  // so the reserve always applies to what remains.
  int Capacity(const Snapshot& s, DomainId dom, const Scratch& scratch) const {
    return Capacity(s, dom, scratch, scratch.reserve());
  }
  int Capacity(const Snapshot& s, DomainId dom, const Scratch& scratch, int reserve) const {
    int partial = 0, empty = 0;
    for (NodeId id : s.domains[Idx(dom)].nodes) {
      if (!scratch.Usable(id)) continue;
      const Node& n = s.nodes[Idx(id)];
      if (n.Empty() && !n.gang_reserved) {
        ++empty;
      } else {
        ++partial;
      }
    }
    return partial + std::max(0, empty - HeldBack(s, dom, reserve));
  }

  // Best fit: the domain whose capacity exceeds the segment by the least (leaves the least stranded
  // capacity behind); ties go to the lower domain index so decisions are deterministic.
  //
  // Under a soft reserve a segment that fills every usable node of some domain exactly goes there
  // even if that takes the domain's spares: an exact fit strands nothing, while keeping the spares
  // would send the segment to break up another domain (measured in docs/simulator.md). Except in a
  // domain whose nodes outside the reserve are all held by gangs: its spares are what those gangs
  // recover on (issue #24: a 2-node gang took a 16-node gang's spares while other racks were
  // empty). Ties go to the lower domain index.
  bool PlaceSegment(const Snapshot& s, int want, Scratch& scratch,
                    std::vector<NodeId>& picked) const {
    if (mode_ == SpareReserve::kSoft && scratch.reserve() > 0) {
      for (DomainId dom = 0; dom < static_cast<DomainId>(s.domains.size()); ++dom) {
        if (!SparesGuardGangs(s, dom, scratch.reserve()) && Capacity(s, dom, scratch, 0) == want) {
          TakeFromDomain(s, dom, want, scratch, picked, 0);
          return true;
        }
      }
    }
    DomainId best = kNoDomain;
    int best_left = std::numeric_limits<int>::max();
    for (DomainId dom = 0; dom < static_cast<DomainId>(s.domains.size()); ++dom) {
      const int cap = Capacity(s, dom, scratch);
      if (cap >= want && cap - want < best_left) {
        best = dom;
        best_left = cap - want;
      }
    }
    if (best == kNoDomain) return false;
    TakeFromDomain(s, best, want, scratch, picked, scratch.reserve());
    return true;
  }

  // Takes `want` ranks from `dom`: partially used nodes with the tightest fit first, then empty
  // nodes from the front of the domain (the reserve designates the last ones as spares).
  // Returns how many it took.
  int TakeFromDomain(const Snapshot& s, DomainId dom, int want, Scratch& scratch,
                     std::vector<NodeId>& picked, int reserve) const {
    std::vector<NodeId> partial, empty;
    for (NodeId id : s.domains[Idx(dom)].nodes) {
      if (!scratch.Usable(id)) continue;
      const Node& n = s.nodes[Idx(id)];
      (n.Empty() && !n.gang_reserved ? empty : partial).push_back(id);
    }
    std::stable_sort(partial.begin(), partial.end(), [&](NodeId a, NodeId b) {
      return s.nodes[Idx(a)].FreeGpus() < s.nodes[Idx(b)].FreeGpus();
    });
    const int usable_empty =
        std::max(0, static_cast<int>(empty.size()) - HeldBack(s, dom, reserve));
    int taken = 0;
    for (NodeId id : partial) {
      if (taken == want) break;
      scratch.Take(id);
      picked.push_back(id);
      ++taken;
    }
    for (int i = 0; i < usable_empty && taken < want; ++i) {
      scratch.Take(empty[Idx(i)]);
      picked.push_back(empty[Idx(i)]);
      ++taken;
    }
    return taken;
  }

  // Preferred / Unconstrained fallback: fill the domains with the most capacity first, so the
  // segment spans as few domains as possible.
  bool PlaceSpanning(const Snapshot& s, int want, Scratch& scratch,
                     std::vector<NodeId>& picked) const {
    std::vector<std::pair<int, DomainId>> caps;
    int total = 0;
    for (DomainId dom = 0; dom < static_cast<DomainId>(s.domains.size()); ++dom) {
      const int cap = Capacity(s, dom, scratch);
      if (cap > 0) caps.emplace_back(cap, dom);
      total += cap;
    }
    if (total < want) return false;
    std::stable_sort(caps.begin(), caps.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    int left = want;
    for (const auto& [cap, dom] : caps) {
      if (left == 0) break;
      left -= TakeFromDomain(s, dom, std::min(cap, left), scratch, picked, scratch.reserve());
    }
    return left == 0;
  }

  std::string WaitReason(const Snapshot& s, const GangRequest& r, int want, int reserve) const {
    const std::vector<int> blocks = FreeBlocksWith(s, r, reserve);
    int best = 0, total = 0;
    DomainId best_dom = kNoDomain;
    for (DomainId dom = 0; dom < static_cast<DomainId>(blocks.size()); ++dom) {
      total += blocks[Idx(dom)];
      if (blocks[Idx(dom)] > best) {
        best = blocks[Idx(dom)];
        best_dom = dom;
      }
    }
    std::string out = "needs " + Plural(want, "node") + " with " +
                      std::to_string(r.gpus_per_replica) + " free GPUs" +
                      (r.mode == TopologyMode::kRequired ? " in one NVLink domain" : "");
    if (best_dom == kNoDomain) {
      out += "; no domain has a free node";
    } else {
      out += "; largest free block is " + Plural(best, "node") + " in " +
             s.domains[Idx(best_dom)].name;
    }
    if (reserve > 0) out += " (" + std::to_string(reserve) + " spare nodes per domain held back)";
    if (r.mode != TopologyMode::kRequired && total < want) {
      out += "; only " + Plural(total, "node") + " free in the cluster";
    }
    return out;
  }

  int spares_;
  SpareReserve mode_;
};

class DomainBestFitPolicy final : public DomainBestFit {
 public:
  DomainBestFitPolicy() : DomainBestFit(0, SpareReserve::kHard) {}
  std::string_view Name() const override { return "domain-best-fit"; }

  // Kueue's LeastFreeCapacity for pods outside gangs: the tightest node, in the fullest domain.
  void ScorePods(const Snapshot& s, int gpus, std::span<const NodeId> nodes,
                 std::span<int64_t> scores) const override {
    std::vector<int64_t> domain_used(s.domains.size(), 0);
    for (const Node& n : s.nodes) {
      if (n.domain != kNoDomain) domain_used[Idx(n.domain)] += n.gpu_used;
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = s.nodes[Idx(nodes[i])];
      if (!Fits(n, gpus)) {
        scores[i] = -1;
        continue;
      }
      const int64_t used_after = n.gpu_used + gpus;
      scores[i] = used_after * 1'000'000 + std::min<int64_t>(domain_used[Idx(n.domain)], 999'999);
    }
  }
};

class Nvl72Policy final : public DomainBestFit {
 public:
  Nvl72Policy(int spares, SpareReserve mode) : DomainBestFit(spares, mode) {}
  std::string_view Name() const override { return "nvl72"; }
  bool RecoversInPlace() const override { return true; }

  // Pack single pods where they strand the least gang capacity: never on a gang's reserved node,
  // on a designated spare only when nothing else fits, on a partly used node before an empty one,
  // the tightest node first, and in the domain that is already the most broken up; among domains
  // broken up alike, the first one. That last rule matters to the extender: during a burst
  // kube-scheduler places several pods on one view, and without it pods that must open an untouched
  // domain would be spread at random over all of them, breaking up each.
  void ScorePods(const Snapshot& s, int gpus, std::span<const NodeId> nodes,
                 std::span<int64_t> scores) const override {
    const std::vector<bool> spare = DesignatedSpares(s, SparesPerDomain());
    std::vector<int64_t> domain_busy(s.domains.size(), 0);  // nodes that are not empty
    for (const Node& n : s.nodes) {
      if (n.domain != kNoDomain && !n.Empty()) ++domain_busy[Idx(n.domain)];
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeId id = nodes[i];
      const Node& n = s.nodes[Idx(id)];
      if (!Fits(n, gpus) || n.gang_reserved) {
        scores[i] = -1;
      } else if (spare[Idx(id)]) {
        scores[i] = 0;
      } else {
        const int64_t busy = n.Empty() ? 0 : 1;
        const int64_t used_after = std::min<int64_t>(n.gpu_used + gpus, 999);
        const int64_t domain_order = 999'999 - std::min<int64_t>(Idx(n.domain), 999'999);
        scores[i] = 1 + busy * 1'000'000'000'000'000 + used_after * 1'000'000'000'000 +
                    std::min<int64_t>(domain_busy[Idx(n.domain)], 999'999) * 1'000'000 +
                    domain_order;
      }
    }
  }
};

}  // namespace

std::string_view TopologyModeName(TopologyMode mode) {
  switch (mode) {
    case TopologyMode::kRequired:
      return "Required";
    case TopologyMode::kPreferred:
      return "Preferred";
    case TopologyMode::kUnconstrained:
      return "Unconstrained";
  }
  return "Unknown";
}

std::string_view SpareReserveName(SpareReserve reserve) {
  switch (reserve) {
    case SpareReserve::kHard:
      return "hard";
    case SpareReserve::kSoft:
      return "soft";
  }
  return "unknown";
}

bool ParseSpareReserve(std::string_view text, SpareReserve* out) {
  if (text == "hard") {
    *out = SpareReserve::kHard;
  } else if (text == "soft") {
    *out = SpareReserve::kSoft;
  } else {
    return false;
  }
  return true;
}

std::string ValidateGangRequest(const GangRequest& r) {
  if (r.replicas < 1) return "replicas must be >= 1, got " + std::to_string(r.replicas);
  if (r.gpus_per_replica < 0)
    return "gpusPerReplica must be >= 0, got " + std::to_string(r.gpus_per_replica);
  if (r.segment_size < 0) return "segmentSize must be >= 0, got " + std::to_string(r.segment_size);
  if (r.segment_size > r.replicas) {
    return "segmentSize " + std::to_string(r.segment_size) + " exceeds replicas " +
           std::to_string(r.replicas);
  }
  return "";
}

bool Eligible(const Snapshot& s, NodeId id, const GangRequest& r) {
  const Node& n = s.nodes[Idx(id)];
  if (!n.ready || n.cordoned) return false;
  return r.allowed_nodes.empty() ? !n.tainted : r.allowed_nodes[Idx(id)];
}

std::string NeverFitsReason(const Snapshot& s, const GangRequest& r) {
  if (!ValidateGangRequest(r).empty()) return "";
  std::vector<int> big_nodes(s.domains.size(), 0);  // nodes with gpus_per_replica GPUs, per domain
  int total = 0;
  for (const Node& n : s.nodes) {
    if (n.domain == kNoDomain || n.gpu_capacity < r.gpus_per_replica) continue;
    ++big_nodes[Idx(n.domain)];
    ++total;
  }
  const std::string nodes_of = " with " + std::to_string(r.gpus_per_replica) + " GPUs";
  if (r.mode != TopologyMode::kRequired) {
    if (total >= r.replicas) return "";
    return "needs " + Plural(r.replicas, "node") + nodes_of + "; the cluster has " +
           std::to_string(total) + ": can never fit";
  }
  const int seg = r.EffectiveSegmentSize();
  int segments = 0;  // segments the domains can hold at most (one per domain each, or several)
  for (int n : big_nodes) segments += n / seg;
  const int needed = (r.replicas + seg - 1) / seg;
  if (segments >= needed) return "";
  return "needs " + Plural(needed, "segment") + " of " + Plural(seg, "node") + nodes_of +
         ", each in one NVLink domain; the cluster's domains hold " + std::to_string(segments) +
         ": can never fit";
}

int GangPlacement::DomainsSpanned(const Snapshot& s) const {
  std::unordered_set<DomainId> seen;
  for (NodeId id : rank_nodes) seen.insert(s.nodes[Idx(id)].domain);
  return static_cast<int>(seen.size());
}

bool GangPlacement::SegmentsInOneDomain(const Snapshot& s, int segment_size) const {
  if (segment_size <= 0) segment_size = static_cast<int>(rank_nodes.size());
  for (size_t i = 0; i < rank_nodes.size(); ++i) {
    const size_t first = i - i % static_cast<size_t>(segment_size);
    if (s.nodes[Idx(rank_nodes[i])].domain != s.nodes[Idx(rank_nodes[first])].domain) return false;
  }
  return true;
}

RecoveryDecision PlacementPolicy::SelectReplacements(const Snapshot& s, const GangRequest& r,
                                                     const GangPlacement& current,
                                                     std::span<const int> failed_ranks) const {
  RecoveryDecision out;
  out.replacement.assign(failed_ranks.size(), kNoNode);
  out.evict.assign(failed_ranks.size(), false);
  std::vector<bool> used(s.nodes.size(), false);
  for (NodeId id : current.rank_nodes) {
    if (id != kNoNode) used[Idx(id)] = true;
  }
  const int gpus = r.gpus_per_replica;
  out.recovered = true;
  for (size_t i = 0; i < failed_ranks.size(); ++i) {
    const int rank = failed_ranks[i];
    if (rank < 0 || Idx(rank) >= current.rank_nodes.size() ||
        current.rank_nodes[Idx(rank)] == kNoNode) {
      out.recovered = false;
      out.reason = "rank " + std::to_string(rank) + " is not part of the placement";
      continue;
    }
    const DomainId dom = s.nodes[Idx(current.rank_nodes[Idx(rank)])].domain;
    const auto& members = s.domains[Idx(dom)].nodes;
    auto candidate = [&](NodeId id) { return !used[Idx(id)] && Eligible(s, id, r); };
    NodeId pick = kNoNode;
    // 1. Spares: the reserve designates the LAST empty nodes of a domain, so walk backwards.
    for (auto it = members.rbegin(); it != members.rend() && pick == kNoNode; ++it) {
      const Node& n = s.nodes[Idx(*it)];
      if (candidate(*it) && n.Empty() && !n.gang_reserved && n.FreeGpus() >= gpus) pick = *it;
    }
    // 2. A partly used node that fits, tightest first: no eviction needed.
    for (NodeId id : members) {
      if (pick != kNoNode && s.nodes[Idx(pick)].Empty()) break;
      const Node& n = s.nodes[Idx(id)];
      if (!candidate(id) || n.gang_reserved || n.FreeGpus() < gpus) continue;
      if (pick == kNoNode || n.FreeGpus() < s.nodes[Idx(pick)].FreeGpus()) pick = id;
    }
    // 3. A node lent to preemptible work: evict it, the fewest reclaimable GPUs first.
    if (pick == kNoNode) {
      for (auto it = members.rbegin(); it != members.rend(); ++it) {
        const Node& n = s.nodes[Idx(*it)];
        if (!candidate(*it) || n.gpu_reclaimable <= 0) continue;
        const int free_after = n.gpu_capacity - std::max(0, n.gpu_used - n.gpu_reclaimable);
        if (free_after < gpus) continue;
        if (pick == kNoNode || n.gpu_reclaimable < s.nodes[Idx(pick)].gpu_reclaimable) pick = *it;
      }
      if (pick != kNoNode) out.evict[i] = true;
    }
    if (pick == kNoNode) {
      out.recovered = false;
      out.reason = "no healthy node with " + std::to_string(gpus) + " free GPUs left in " +
                   s.domains[Idx(dom)].name + " for rank " + std::to_string(rank);
      continue;
    }
    used[Idx(pick)] = true;
    out.replacement[i] = pick;
  }
  if (out.recovered) out.reason = "every failed rank has a replacement in its own domain";
  return out;
}

NodeId PlacementPolicy::PlacePod(const Snapshot& s, int gpus) const {
  std::vector<NodeId> all(s.nodes.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<int64_t> scores(all.size());
  ScorePods(s, gpus, all, scores);
  NodeId best = kNoNode;
  int64_t best_score = -1;
  for (size_t i = 0; i < all.size(); ++i) {
    if (scores[i] > best_score) {
      best_score = scores[i];
      best = all[i];
    }
  }
  return best;
}

std::unique_ptr<PlacementPolicy> MakePolicy(std::string_view name, const PolicyOptions& options) {
  if (name == "nvl72") {
    return std::make_unique<Nvl72Policy>(std::max(0, options.spares_per_domain),
                                         options.spare_reserve);
  }
  if (name == "spread") return std::make_unique<SpreadPolicy>();
  if (name == "first-fit") return std::make_unique<FirstFitPolicy>();
  if (name == "domain-best-fit") return std::make_unique<DomainBestFitPolicy>();
  return nullptr;
}

std::vector<std::string> PolicyNames() {
  return {"nvl72", "spread", "first-fit", "domain-best-fit"};
}

std::vector<int> NormalizeScores(std::span<const int64_t> raw) {
  std::vector<int> out(raw.size(), 0);
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = -1;
  for (int64_t v : raw) {
    if (v < 0) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (hi < 0) return out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 0) continue;
    // Every feasible node gets at least 1 so a feasible node never ties an infeasible one; a single
    // distinct value maps to 10.
    out[i] = hi == lo ? 10 : 1 + static_cast<int>((raw[i] - lo) * 9 / (hi - lo));
  }
  return out;
}

int HeldBackSpares(const Snapshot& s, DomainId dom, int reserve) {
  if (reserve <= 0) return 0;
  int reclaimable = 0;
  for (NodeId id : s.domains[Idx(dom)].nodes) {
    const Node& n = s.nodes[Idx(id)];
    if (n.Schedulable() && n.Reclaimable()) ++reclaimable;
  }
  return std::max(0, reserve - reclaimable);
}

std::vector<int> PlacementPolicy::FreeBlocks(const Snapshot& s, const GangRequest& r) const {
  std::vector<int> out(s.domains.size(), 0);
  for (size_t id = 0; id < s.nodes.size(); ++id) {
    const Node& n = s.nodes[id];
    if (n.domain != kNoDomain && FitsRank(s, static_cast<NodeId>(id), r)) ++out[Idx(n.domain)];
  }
  return out;
}

std::vector<bool> DesignatedSpares(const Snapshot& s, int spares_per_domain) {
  std::vector<bool> spare(s.nodes.size(), false);
  if (spares_per_domain <= 0) return spare;
  for (DomainId d = 0; d < static_cast<DomainId>(s.domains.size()); ++d) {
    const Domain& dom = s.domains[Idx(d)];
    int left = HeldBackSpares(s, d, spares_per_domain);
    for (auto it = dom.nodes.rbegin(); it != dom.nodes.rend() && left > 0; ++it) {
      const Node& n = s.nodes[Idx(*it)];
      if (n.Schedulable() && n.Empty() && !n.gang_reserved) {
        spare[Idx(*it)] = true;
        --left;
      }
    }
  }
  return spare;
}

}  // namespace nvl72::placement
