// Placement policies: gang admission, single-pod scoring and in-place recovery on a Snapshot.
//
// Four policies share one interface so that the operator, the extender and the simulator can run
// any of them by name:
//   nvl72           ours: topology-aware best fit that leaves the least stranded capacity, honours
//                   segments, keeps `spares_per_domain` empty nodes per domain for recovery (a soft
//                   reserve by default, see SpareReserve) and recovers failed ranks in place
//                   (spares first).
//   spread          the Kubernetes default (LeastAllocated), topology-blind.
//   first-fit       packing in node order, topology-blind.
//   domain-best-fit Kueue-TAS-like: best fit inside one domain, no spares, no in-place recovery.
//
// A failure to place is a result with a reason, never an error. No policy reads a clock, does I/O
// or keeps state between calls: every method is const and thread-safe.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placement/snapshot.h"

namespace nvl72::placement {

enum class TopologyMode {
  kRequired,       // every segment inside one domain, or wait
  kPreferred,      // one domain per segment if possible, else span the fewest domains
  kUnconstrained,  // any nodes
};
std::string_view TopologyModeName(TopologyMode mode);

struct GangRequest {
  std::string key;           // caller's identity for the job (namespace/name); used in reasons only
  int replicas = 1;          // ranks; each rank is one pod on its own node
  int gpus_per_replica = 4;  // GPUs of one rank; must fit one node
  TopologyMode mode = TopologyMode::kRequired;
  int segment_size = 0;      // ranks that must share one domain; 0 = the whole gang
  int priority = 0;          // used by callers for ordering; the core does not reorder
  bool preemptible = false;  // may be moved by defragmentation
  // The caller's verdict on the job's own scheduling constraints (the rank pod's nodeSelector,
  // required node affinity, tolerations against taints, resource fit), indexed by NodeId. Empty:
  // no verdict, and a node with a taint (Node::tainted) is not eligible. When given, it replaces
  // Node::tainted: the caller judged the taints with the job's tolerations.
  std::vector<bool> allowed_nodes;

  // Ranks per segment after defaulting (segment_size 0 -> replicas).
  int EffectiveSegmentSize() const { return segment_size > 0 ? segment_size : replicas; }
  int TotalGpus() const { return replicas * gpus_per_replica; }
};

// Empty string when the request is well-formed, else what is wrong with it.
std::string ValidateGangRequest(const GangRequest& request);

// The one rule for where a rank of `request` may go (before counting GPUs): Ready, not cordoned,
// and allowed by request.allowed_nodes (or without a taint when the request has no verdict).
bool Eligible(const Snapshot& snapshot, NodeId node, const GangRequest& request);

// Why the gang can never be placed in this cluster, judged on GPU capacity alone (not on use,
// health or constraints): a Required gang needs one domain with `segment` nodes of
// gpus_per_replica GPUs per segment, any other mode `replicas` such nodes. Empty when it could fit.
std::string NeverFitsReason(const Snapshot& snapshot, const GangRequest& request);

struct GangPlacement {
  std::vector<NodeId> rank_nodes;  // rank -> node; size() == replicas when placed

  // Number of distinct domains the ranks sit in.
  int DomainsSpanned(const Snapshot& snapshot) const;
  // True when every segment of `segment_size` consecutive ranks sits in one domain.
  bool SegmentsInOneDomain(const Snapshot& snapshot, int segment_size) const;
};

struct GangDecision {
  bool placed = false;
  GangPlacement placement;  // valid when placed
  std::string reason;       // why it waits (placed == false), or a short note on the choice
};

// Replacement of failed ranks of a running gang.
struct RecoveryDecision {
  bool recovered = false;           // every failed rank has a replacement in its domain
  std::vector<NodeId> replacement;  // parallel to the failed ranks asked for; kNoNode if none
  // Parallel to `replacement`: true when the caller must first evict the reclaimable (preemptible)
  // work on that node.
  std::vector<bool> evict;
  std::string reason;
};

// How firmly nvl72 keeps its spare reserve away from new gangs.
enum class SpareReserve {
  // New gangs never take the reserve (preemptible gangs may borrow it and are evicted by recovery).
  kHard,
  // A gang goes outside the reserve when some domain can take it there. It takes reserve nodes when
  // it fits nowhere else (instead of waiting: the reserve never makes a gang wait), and a segment
  // that fills every usable node of a domain exactly goes there (an exact fit strands nothing;
  // keeping the spares would send it to break up another domain). Why soft is the default: the
  // simulator measurements in docs/simulator.md.
  kSoft,
};
std::string_view SpareReserveName(SpareReserve reserve);
// Parses "hard" / "soft"; false for anything else.
bool ParseSpareReserve(std::string_view text, SpareReserve* out);

struct PolicyOptions {
  int spares_per_domain = 2;  // nvl72 only: empty nodes per domain kept out of new gangs
  SpareReserve spare_reserve = SpareReserve::kSoft;  // nvl72 only
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view Name() const = 0;

  // All-or-nothing placement of a gang. Ranks only go to Eligible nodes with enough free GPUs,
  // one rank per node. A preemptible gang that does not fit otherwise may borrow the spare reserve
  // (the caller should then mark its GPUs reclaimable); under a soft reserve any gang may (see
  // SpareReserve), and the reason of a gang that waits then ignores the reserve.
  virtual GangDecision PlaceGang(const Snapshot& snapshot, const GangRequest& request) const = 0;

  // Raw scores for putting one pod of `gpus` GPUs on each of `nodes`; a negative score means the
  // pod cannot go there. Higher is better. Scores are only comparable within one call; use
  // NormalizeScores() for the 0..10 range of the scheduler extender.
  // REQUIRES: scores.size() == nodes.size().
  virtual void ScorePods(const Snapshot& snapshot, int gpus, std::span<const NodeId> nodes,
                         std::span<int64_t> scores) const = 0;

  // Per domain (indexed by DomainId): how many ranks of `request` the domain can take now, counted
  // as the reason of a waiting gang counts them (the spare reserve held back where the policy keeps
  // it from this gang). The default counts every node a rank fits (FitsRank).
  virtual std::vector<int> FreeBlocks(const Snapshot& snapshot, const GangRequest& request) const;

  // Whether a failed rank is replaced inside its domain while the gang keeps running. Policies that
  // return false restart the whole gang through PlaceGang.
  virtual bool RecoversInPlace() const { return false; }
  // Empty schedulable nodes per domain this policy keeps away from new gangs.
  virtual int SparesPerDomain() const { return 0; }

  // For each failed rank, an Eligible node of the SAME domain as the node the rank ran on that has
  // `request.gpus_per_replica` free GPUs and holds no other rank of this gang: spares (empty nodes,
  // the designated ones first), then partly used nodes, then nodes whose preemptible work must be
  // evicted (`evict`). `failed_ranks` index into `current.rank_nodes`. The snapshot should already
  // count the failed nodes as not ready.
  RecoveryDecision SelectReplacements(const Snapshot& snapshot, const GangRequest& request,
                                      const GangPlacement& current,
                                      std::span<const int> failed_ranks) const;

  // Best node for a single pod over all nodes of the snapshot, or kNoNode.
  NodeId PlacePod(const Snapshot& snapshot, int gpus) const;
};

// Creates a policy by name ("nvl72", "spread", "first-fit", "domain-best-fit"); nullptr for an
// unknown name.
std::unique_ptr<PlacementPolicy> MakePolicy(std::string_view name,
                                            const PolicyOptions& options = {});
// The names MakePolicy() knows, ours first.
std::vector<std::string> PolicyNames();

// Maps raw scores to the extender's 0..10: infeasible (negative) -> 0, feasible -> 1..10 linearly
// between the lowest and the highest feasible score (all equal -> 10).
std::vector<int> NormalizeScores(std::span<const int64_t> raw);

// Empty nodes domain `dom` holds back from new gangs: the reserve minus the nodes that recovery
// could reclaim by evicting preemptible work (Node::Reclaimable), never below 0.
int HeldBackSpares(const Snapshot& snapshot, DomainId dom, int spares_per_domain);

// The nodes the spare reserve designates in each domain: the last HeldBackSpares() Schedulable,
// empty, unreserved nodes of the domain in domain order. Used by the extender to keep ordinary pods
// off them. Result is indexed by NodeId.
std::vector<bool> DesignatedSpares(const Snapshot& snapshot, int spares_per_domain);

}  // namespace nvl72::placement
