#include "operator/recovery.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "kube/errors.h"
#include "kube/object.h"
#include "model/job_nodes.h"
#include "model/names.h"
#include "operator/compute_domains.h"
#include "operator/job_objects.h"
#include "operator/log.h"
#include "operator/object_store.h"

namespace nvl72::op {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Time = std::chrono::system_clock::time_point;

constexpr std::string_view kReasonReplacing = "ReplacingRanks";
constexpr std::string_view kReasonWaiting = "WaitingForNode";
constexpr std::string_view kReasonMoving = "MovingGang";
// Slack after a grace period ends, so the re-check sees the grace as over.
constexpr milliseconds kGraceSlack{100};

std::string Str(std::string_view s) { return std::string(s); }

int IntAt(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<int>() : 0;
}

int Epoch(const Json& pod) {
  auto ann = kube::Annotations(pod);
  auto it = ann.find(Str(kRecoveryEpochAnnotation));
  if (it == ann.end()) return 0;
  int v = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return ec == std::errc() ? v : 0;
}

std::string BoundNode(const Json& pod) {
  const Json& n = kube::AtPath(pod, "/spec/nodeName");
  return n.is_string() ? n.get<std::string>() : "";
}

// A pod of preemptible work lending its node (never a rank of a gang) that still holds GPUs.
bool IsPreemptibleLender(const Json& pod) {
  auto labels = kube::Labels(pod);
  auto it = labels.find(Str(kPreemptibleLabel));
  return it != labels.end() && it->second == "true" && !model::PodTerminated(pod) &&
         !model::GangRankOf(pod, nullptr, nullptr);
}

bool PolicyNone(const model::JobSpec& spec) {
  return spec.recovery.policy == model::RecoveryPolicy::kNone;
}

bool MaxRecoveriesReached(const model::JobSpec& spec, int recoveries) {
  return recoveries >= spec.recovery.max_recoveries;
}

// Recovery policy None, or maxRecoveries reached: a failed rank fails the job.
bool NoRecoveryLeft(const model::JobSpec& spec, int recoveries) {
  return PolicyNone(spec) || MaxRecoveriesReached(spec, recoveries);
}

// Every recovery of a RestartGang job restarts every rank.
bool RestartsGang(const model::JobSpec& spec) {
  return spec.recovery.policy == model::RecoveryPolicy::kRestartGang;
}

// True when the rank's node is cordoned and holds no live pod of the rank (a drain evicted it, or
// it was never bound there): kube-scheduler puts nothing new on a cordoned node, so the rank must
// move whatever --cordoned-ranks says. A terminated pod is the job's outcome, not a drain.
bool RankGoneFromCordonedNode(const model::ClusterState& state, const model::RankAssignment& a,
                              const std::vector<const Json*>& pods) {
  const placement::NodeId id = state.FindNode(a.node);
  if (id == placement::kNoNode || !state.snapshot().nodes[static_cast<size_t>(id)].cordoned) {
    return false;
  }
  for (const Json* p : pods) {
    if (kube::Name(*p) != a.pod || kube::IsBeingDeleted(*p)) continue;
    if (model::PodTerminated(*p) || BoundNode(*p) == a.node) return false;
  }
  return true;
}

// Records that `f.rank` stopped: a rank already failed for a reason that still runs it (cordoned)
// takes the new cause.
void MarkStopped(std::vector<FailedRank>& failed, FailedRank f) {
  auto it = std::find_if(failed.begin(), failed.end(),
                         [&](const FailedRank& x) { return x.rank == f.rank; });
  if (it == failed.end()) {
    failed.push_back(std::move(f));
  } else if (!RankStopped(it->cause)) {
    *it = std::move(f);
  }
}

// Sets condition `type` like SetCondition, but restarts lastTransitionTime when the reason changes
// too (the wait bound is measured from the moment the job started waiting).
bool SetConditionSince(Json& status, std::string_view type, std::string_view cond_status,
                       std::string_view reason, std::string_view message, int64_t generation,
                       Time now) {
  const Json* before = nullptr;
  if (status.is_object() && status.contains("conditions") && status["conditions"].is_array()) {
    for (const auto& c : status["conditions"]) {
      if (c.is_object() && c.value("type", "") == type) before = &c;
    }
  }
  const bool restart = before != nullptr && (before->value("status", "") != cond_status ||
                                             before->value("reason", "") != reason);
  bool changed = SetCondition(status, type, cond_status, reason, message, generation, now);
  if (restart) {
    for (auto& c : status["conditions"]) {
      if (c.value("type", "") == type) c["lastTransitionTime"] = kube::FormatTime(now);
    }
    changed = true;
  }
  return changed;
}

std::optional<Time> ConditionSince(const Json& status, std::string_view type,
                                   std::string_view reason) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return std::nullopt;
  }
  for (const auto& c : status["conditions"]) {
    if (!c.is_object() || c.value("type", "") != type) continue;
    if (c.value("status", "") != "True" || c.value("reason", "") != reason) return std::nullopt;
    auto t = kube::ParseTime(c.value("lastTransitionTime", ""));
    if (!t.ok()) return std::nullopt;
    return *t;
  }
  return std::nullopt;
}

std::string Seconds(milliseconds d) { return std::to_string((d.count() + 999) / 1000) + "s"; }

// The domain a Required job's segment was placed in ("" for other modes, whose segments may span
// domains, or a placement without one domain per segment).
std::string PlannedDomain(const model::JobPlacement& p, const model::JobSpec& spec, int rank) {
  if (spec.mode != placement::TopologyMode::kRequired) return "";
  const int seg = std::max(1, spec.EffectiveSegmentSize());  // divides replicas (ParseJobSpec)
  const auto s = static_cast<size_t>(rank / seg);
  const auto segments = static_cast<size_t>(spec.replicas / seg);
  return p.domains.size() == segments && s < segments ? p.domains[s] : "";
}

// The node of a rank of a Required job is no longer in its segment's domain (its domain label
// changed, e.g. GPU Feature Discovery relabelled nvidia.com/gpu.clique after an NVLink change).
bool LeftDomain(const model::ClusterState& state, const model::JobPlacement& p,
                const model::JobSpec& spec, const model::RankAssignment& a, std::string* now_in) {
  const std::string planned = PlannedDomain(p, spec, a.rank);
  const placement::NodeId id = state.FindNode(a.node);
  if (planned.empty() || id == placement::kNoNode) return false;
  const auto dom = state.snapshot().nodes[static_cast<size_t>(id)].domain;
  *now_in = state.snapshot().domains[static_cast<size_t>(dom)].name;
  return *now_in != planned;
}

// Rank -> node ids of the stored placement. A rank whose node is gone or left its domain gets
// another node of its segment's domain (SelectReplacements only reads the domain of a failed rank's
// node), or kNoNode.
placement::GangPlacement CurrentPlacement(const model::ClusterState& state,
                                          const model::JobPlacement& p,
                                          const model::JobSpec& spec) {
  placement::GangPlacement g;
  int max_rank = -1;
  for (const auto& r : p.ranks) max_rank = std::max(max_rank, r.rank);
  const int rank_count = max_rank + 1;
  g.rank_nodes.assign(static_cast<size_t>(rank_count), placement::kNoNode);
  for (const auto& r : p.ranks) {
    std::string now_in;
    if (LeftDomain(state, p, spec, r, &now_in)) continue;
    g.rank_nodes[static_cast<size_t>(r.rank)] = state.FindNode(r.node);
  }
  const int seg = std::max(1, spec.EffectiveSegmentSize());
  for (const auto& r : p.ranks) {
    auto& id = g.rank_nodes[static_cast<size_t>(r.rank)];
    if (id != placement::kNoNode) continue;
    const int s = r.rank / seg;
    for (const auto& o : p.ranks) {
      const auto other = g.rank_nodes[static_cast<size_t>(o.rank)];
      if (o.rank / seg == s && other != placement::kNoNode && state.FindNode(o.node) == other) {
        id = other;
        break;
      }
    }
    if (id == placement::kNoNode && static_cast<size_t>(s) < p.domains.size()) {
      placement::DomainId dom = state.FindDomain(p.domains[static_cast<size_t>(s)]);
      if (dom != placement::kNoDomain && !state.snapshot().domains[dom].nodes.empty()) {
        id = state.snapshot().domains[dom].nodes.front();
      }
    }
  }
  return g;
}

void WriteRecovered(Json& status, const model::JobPlacement& placement, int recoveries, Time now) {
  status["placement"] = model::PlacementToJson(placement);
  status["domains"] = JoinDomains(placement.domains);
  status["recoveries"] = recoveries;
  status["lastRecoveryTime"] = kube::FormatTime(now);
}

}  // namespace

std::string_view RecoveryActionName(RecoveryAction a) {
  switch (a) {
    case RecoveryAction::kNone:
      return "None";
    case RecoveryAction::kWait:
      return "Wait";
    case RecoveryAction::kReplace:
      return "Replace";
    case RecoveryAction::kMoveGang:
      return "MoveGang";
    case RecoveryAction::kFail:
      return "Fail";
  }
  return "None";
}

namespace {

// The rank's current pod failed because of its node: a node failure even if the node looks fine.
void MarkPodsFailedByNode(std::vector<FailedRank>& failed, const model::JobPlacement& placement,
                          const std::vector<const Json*>& pods) {
  for (const Json* p : pods) {
    const model::RankAssignment* a = model::CurrentRankOf(*p, placement);
    if (a == nullptr || kube::IsBeingDeleted(*p)) continue;
    std::string why = PodFailedByNode(*p);
    if (!why.empty()) MarkStopped(failed, {a->rank, a->node, NodeFailure::kPodFailedByNode, why});
  }
}

// Ranks whose node left their segment's domain, or whose cordoned node no longer runs them.
void MarkRanksLeftDomainOrDrained(std::vector<FailedRank>& failed, const model::ClusterState& state,
                                  const model::JobPlacement& placement, const model::JobSpec& spec,
                                  const std::vector<const Json*>& pods) {
  for (const auto& a : placement.ranks) {
    std::string now_in;
    if (LeftDomain(state, placement, spec, a, &now_in)) {
      MarkStopped(failed, {a.rank, a.node, NodeFailure::kLeftDomain, "now in " + now_in});
    } else if (RankGoneFromCordonedNode(state, a, pods)) {
      MarkStopped(failed, {a.rank, a.node, NodeFailure::kDrained, ""});
    }
  }
}

// Ranks that stopped go first; ranks on cordoned nodes move only when nothing else is wrong.
void DropRunningRanksWhenAnyStopped(std::vector<FailedRank>& failed) {
  const bool any_stopped = std::any_of(failed.begin(), failed.end(),
                                       [](const FailedRank& f) { return RankStopped(f.cause); });
  if (any_stopped) {
    std::erase_if(failed, [](const FailedRank& f) { return !RankStopped(f.cause); });
  }
}

// The ranks of the job on failed nodes (past their grace), by rank.
std::vector<FailedRank> CollectFailedRanks(const RecoveryInput& in,
                                           const model::JobPlacement& placement, seconds grace,
                                           bool move_cordoned_ranks) {
  std::vector<FailedRank> failed = FailedRanks(*in.state, placement, in.spec->gpus_per_replica,
                                               grace, in.now, move_cordoned_ranks);
  MarkPodsFailedByNode(failed, placement, in.pods);
  MarkRanksLeftDomainOrDrained(failed, *in.state, placement, *in.spec, in.pods);
  std::sort(failed.begin(), failed.end(),
            [](const FailedRank& a, const FailedRank& b) { return a.rank < b.rank; });
  DropRunningRanksWhenAnyStopped(failed);
  return failed;
}

// Every failed rank still runs (on a cordoned node): it may stay until a node is free.
bool OnlyCordonedRanks(const std::vector<FailedRank>& failed) {
  return !failed.empty() && std::none_of(failed.begin(), failed.end(),
                                         [](const FailedRank& f) { return RankStopped(f.cause); });
}

// "rank R on NODE (Cause detail), ..." for messages.
std::string DescribeFailedRanks(const std::vector<FailedRank>& failed) {
  std::string what;
  for (const auto& f : failed) {
    if (!what.empty()) what += ", ";
    what += "rank " + std::to_string(f.rank) + " on " + f.node + " (" +
            Str(NodeFailureName(f.cause)) + (f.detail.empty() ? "" : " " + f.detail) + ")";
  }
  return what;
}

std::vector<int> RanksOf(const std::vector<FailedRank>& failed) {
  std::vector<int> ranks;
  ranks.reserve(failed.size());
  for (const auto& f : failed) ranks.push_back(f.rank);
  return ranks;
}

std::vector<int> RanksOf(const model::JobPlacement& placement) {
  std::vector<int> ranks;
  for (const auto& r : placement.ranks) ranks.push_back(r.rank);
  return ranks;
}

// Every rank of the placement runs on its planned node (pods being deleted do not count).
bool AllRanksRunning(const model::JobPlacement& placement, const std::vector<const Json*>& pods) {
  std::vector<const Json*> current;
  for (const Json* p : pods) {
    if (!kube::IsBeingDeleted(*p)) current.push_back(p);
  }
  PodSummary s = SummarizePods(placement, current);
  const int ranks = static_cast<int>(placement.ranks.size());
  return s.running == ranks && ranks > 0 && s.misplaced == 0;
}

// The snapshot the policy sees: pods of preemptible lenders are reclaimable GPUs.
placement::Snapshot SnapshotWithLenders(const model::ClusterState& state,
                                        const std::vector<const Json*>& all_pods,
                                        const std::string& gpu_resource) {
  placement::Snapshot snap = state.snapshot();
  for (const Json* p : all_pods) {
    if (!IsPreemptibleLender(*p)) continue;
    placement::NodeId id = state.FindNode(BoundNode(*p));
    if (id == placement::kNoNode) continue;
    snap.nodes[id].gpu_reclaimable += model::PodGpuRequest(*p, gpu_resource);
  }
  for (auto& n : snap.nodes) n.gpu_reclaimable = std::min(n.gpu_reclaimable, n.gpu_used);
  return snap;
}

// How long failed ranks wait for a healthy node of their domain before the gang moves:
// spec.recovery.waitForDomainSeconds, else --recovery-wait-seconds, else a multiple of the grace;
// never below min_wait.
milliseconds WaitBound(const model::JobSpec& spec, const RecoveryOptions& options, seconds grace) {
  const seconds configured = spec.recovery.wait_for_domain_seconds
                                 ? seconds(*spec.recovery.wait_for_domain_seconds)
                             : options.wait_bound ? *options.wait_bound
                                                  : grace * options.wait_grace_multiple;
  return std::max(duration_cast<milliseconds>(options.min_wait),
                  duration_cast<milliseconds>(configured));
}

// One recovery decision (PlanRecovery before the state sync): the rules of docs/recovery.md,
// "What the operator does", each step writing into the plan.
class RecoveryDecider {
 public:
  RecoveryDecider(const placement::PlacementPolicy& policy, const RecoveryInput& in,
                  const RecoveryOptions& options);

  RecoveryPlan Run() {
    Decide();
    return std::move(plan_);
  }

 private:
  void Decide();
  void RequeueAtMost(milliseconds d);
  void RequeueAtGraceEnd();
  void EndRecovery();
  void KeepCordoned(const std::string& what, const std::string& why);
  void FailNoRecoveryLeft(const std::string& what);
  void Fail(std::string_view reason, const std::string& message);
  void ReplaceRanks(const placement::Snapshot& snap, const std::vector<int>& failed_ranks,
                    const placement::RecoveryDecision& d);
  std::string MoveFailedRanks(const placement::Snapshot& snap, const std::vector<int>& failed_ranks,
                              const placement::RecoveryDecision& d);
  void WaitOrMoveGang(const std::string& what, const std::string& reason,
                      const placement::GangRequest& request);
  void Wait(const std::string& message, milliseconds again);
  void MoveGang(const std::string& what, milliseconds waited, const placement::Snapshot& snapshot,
                const placement::GangPlacement& gang);
  void StartRecovery(std::string_view reason);
  std::string NextRecovery() const { return "recovery " + std::to_string(recoveries_ + 1); }

  const placement::PlacementPolicy& policy_;
  const RecoveryInput& in_;
  const RecoveryOptions& options_;
  const Json& job_;
  const model::JobSpec& spec_;
  const model::ClusterState& state_;
  const int64_t generation_;
  const std::string key_;
  const seconds grace_;
  const Time now_;
  RecoveryPlan plan_;
  int recoveries_ = 0;
};

RecoveryDecider::RecoveryDecider(const placement::PlacementPolicy& policy, const RecoveryInput& in,
                                 const RecoveryOptions& options)
    : policy_(policy),
      in_(in),
      options_(options),
      job_(*in.job),
      spec_(*in.spec),
      state_(*in.state),
      generation_(kube::Generation(job_)),
      key_(kube::KeyOf(job_)),
      grace_(std::max(0, spec_.recovery.not_ready_grace_seconds)),
      now_(in.now) {
  plan_.status = kube::AtPath(job_, "/status");
  if (!plan_.status.is_object()) plan_.status = Json::object();
  recoveries_ = IntAt(plan_.status, "recoveries");
}

void RecoveryDecider::Decide() {
  auto stored = model::PlacementOf(job_);
  if (!stored.ok() || !stored->has_value()) return;
  plan_.placement = **stored;
  plan_.failed = CollectFailedRanks(in_, plan_.placement, grace_, options_.move_cordoned_ranks);
  RequeueAtGraceEnd();
  if (plan_.failed.empty()) return EndRecovery();

  const std::string what = DescribeFailedRanks(plan_.failed);
  const bool cordon_only = OnlyCordonedRanks(plan_.failed);
  if (NoRecoveryLeft(spec_, recoveries_)) {
    if (cordon_only) return KeepCordoned(what, "no recovery left");
    return FailNoRecoveryLeft(what);
  }

  const placement::Snapshot snap = SnapshotWithLenders(state_, in_.all_pods, in_.gpu_resource);
  // The job's own constraints (model::JudgeJob): replacements go only where kube-scheduler will
  // take the rank pod.
  const model::JobVerdict verdict = model::JudgeJob(state_, job_, spec_, key_, 0, in_.gpu_resource);
  const placement::GangRequest& request = verdict.request;
  const placement::GangPlacement current = CurrentPlacement(state_, plan_.placement, spec_);
  const std::vector<int> failed_ranks = RanksOf(plan_.failed);
  const placement::RecoveryDecision d =
      policy_.SelectReplacements(snap, request, current, failed_ranks);
  if (d.recovered) return ReplaceRanks(snap, failed_ranks, d);
  // The nodes the job's verdict rules out (a taint, another ComputeDomain...) say why none is left.
  const std::string ruled_out = verdict.nodes.Summary();
  const std::string why = ruled_out.empty() ? d.reason : d.reason + "; " + ruled_out;
  if (cordon_only) return KeepCordoned(what, why);
  WaitOrMoveGang(what, why, request);
}

void RecoveryDecider::RequeueAtMost(milliseconds d) {
  d = std::max(d, milliseconds(1));
  if (!plan_.requeue_after || d < *plan_.requeue_after) plan_.requeue_after = d;
}

// A NotReady node still inside its grace: look again when the grace ends.
void RecoveryDecider::RequeueAtGraceEnd() {
  for (const auto& r : plan_.placement.ranks) {
    placement::NodeId id = state_.FindNode(r.node);
    if (id == placement::kNoNode) continue;
    const model::NodeHealth& h = state_.Health(id);
    if (!h.ready_condition && h.not_ready_since && now_ - *h.not_ready_since < grace_) {
      RequeueAtMost(duration_cast<milliseconds>(*h.not_ready_since + grace_ - now_) + kGraceSlack);
    }
  }
}

// No failed rank: Recovering goes False, "NodeRecovered" when the nodes came back while the job
// waited, "Recovered" once every rank runs again after a recovery.
void RecoveryDecider::EndRecovery() {
  std::string reason;
  if (!StatusConditionTrue(plan_.status, model::kConditionRecovering, &reason)) return;
  if (reason == kReasonWaiting) {
    plan_.write_status =
        SetCondition(plan_.status, model::kConditionRecovering, "False", "NodeRecovered",
                     "the failed nodes are healthy again", generation_, now_);
    plan_.message = "the failed nodes are healthy again";
    return;
  }
  if (!AllRanksRunning(plan_.placement, in_.pods)) return;
  const int ranks = static_cast<int>(plan_.placement.ranks.size());
  plan_.message = "all " + std::to_string(ranks) + " ranks running again after recovery " +
                  std::to_string(recoveries_);
  plan_.write_status = SetCondition(plan_.status, model::kConditionRecovering, "False", "Recovered",
                                    plan_.message, generation_, now_);
}

// A rank on a cordoned node still runs: it moves when a node is free, else it stays.
void RecoveryDecider::KeepCordoned(const std::string& what, const std::string& why) {
  plan_.failed.clear();
  plan_.message = what + ": stays: " + why;
  RequeueAtMost(options_.cordon_recheck);
}

void RecoveryDecider::FailNoRecoveryLeft(const std::string& what) {
  if (PolicyNone(spec_)) return Fail("NodeFailed", what + "; recovery policy None");
  Fail("MaxRecoveriesExceeded", what + "; " + std::to_string(recoveries_) +
                                    " recoveries reached maxRecoveries " +
                                    std::to_string(spec_.recovery.max_recoveries));
}

void RecoveryDecider::Fail(std::string_view reason, const std::string& message) {
  plan_.action = RecoveryAction::kFail;
  plan_.message = message;
  SetCondition(plan_.status, model::kConditionFailed, "True", reason, message, generation_, now_);
  SetCondition(plan_.status, model::kConditionRunning, "False", reason, message, generation_, now_);
  SetCondition(plan_.status, model::kConditionRecovering, "False", reason, message, generation_,
               now_);
  plan_.status["state"] = "Failed";
  plan_.write_status = true;
}

// Replace: every failed rank gets a node of its own domain (RestartGang recreates every rank).
void RecoveryDecider::ReplaceRanks(const placement::Snapshot& snap,
                                   const std::vector<int>& failed_ranks,
                                   const placement::RecoveryDecision& d) {
  const std::string moves = MoveFailedRanks(snap, failed_ranks, d);
  const bool restart_gang = RestartsGang(spec_);
  plan_.action = RecoveryAction::kReplace;
  plan_.recreate_ranks = restart_gang ? RanksOf(plan_.placement) : failed_ranks;
  plan_.message = NextRecovery() + ": " + moves + (restart_gang ? "; restarting the gang" : "");
  StartRecovery(kReasonReplacing);
}

// Puts each failed rank on its replacement in the placement; returns what moved where.
std::string RecoveryDecider::MoveFailedRanks(const placement::Snapshot& snap,
                                             const std::vector<int>& failed_ranks,
                                             const placement::RecoveryDecision& d) {
  std::string moves;
  for (size_t i = 0; i < failed_ranks.size(); ++i) {
    const std::string& to = snap.nodes[d.replacement[i]].name;
    for (auto& r : plan_.placement.ranks) {
      if (r.rank != failed_ranks[i]) continue;
      if (!moves.empty()) moves += ", ";
      moves += "rank " + std::to_string(r.rank) + " " + r.node + " (" +
               Str(NodeFailureName(plan_.failed[i].cause)) + ") -> " + to;
      if (d.evict[i]) {
        moves += " (evicting preemptible pods)";
        plan_.evict_nodes.push_back(to);
      }
      r.node = to;
    }
  }
  return moves;
}

// No healthy node in the domain: wait up to the bound, then re-place the whole gang.
void RecoveryDecider::WaitOrMoveGang(const std::string& what, const std::string& reason,
                                     const placement::GangRequest& request) {
  const milliseconds bound = WaitBound(spec_, options_, grace_);
  std::optional<Time> since =
      ConditionSince(plan_.status, model::kConditionRecovering, kReasonWaiting);
  const milliseconds waited = since ? duration_cast<milliseconds>(now_ - *since) : milliseconds(0);
  if (!since || waited < bound) {
    return Wait(what + ": " + reason + "; waiting up to " + Seconds(bound) +
                    " for a node before moving the gang",
                bound - waited + kGraceSlack);
  }
  model::ClusterState without = state_;
  without.Release(key_);
  placement::GangDecision g = policy_.PlaceGang(without.snapshot(), request);
  if (!g.placed) {
    return Wait(what + ": " + reason + "; no other placement either: " + g.reason,
                std::max(duration_cast<milliseconds>(grace_), milliseconds(5000)));
  }
  MoveGang(what, waited, without.snapshot(), g.placement);
}

// Wait: Recovering True WaitingForNode (the wait bound counts from its start), Running False.
void RecoveryDecider::Wait(const std::string& message, milliseconds again) {
  plan_.action = RecoveryAction::kWait;
  plan_.message = message;
  plan_.write_status = SetConditionSince(plan_.status, model::kConditionRecovering, "True",
                                         kReasonWaiting, message, generation_, now_);
  plan_.write_status |= SetCondition(plan_.status, model::kConditionRunning, "False",
                                     kReasonWaiting, message, generation_, now_);
  RequeueAtMost(again);
}

// MoveGang: the whole gang re-placed (another domain, or spanning for Preferred); every rank
// restarts.
void RecoveryDecider::MoveGang(const std::string& what, milliseconds waited,
                               const placement::Snapshot& snapshot,
                               const placement::GangPlacement& gang) {
  const std::string from = JoinDomains(plan_.placement.domains);
  plan_.placement = model::MakeJobPlacement(snapshot, gang, kube::Name(job_), spec_.segment_size);
  plan_.action = RecoveryAction::kMoveGang;
  plan_.recreate_ranks = RanksOf(plan_.placement);
  plan_.message = NextRecovery() + ": " + what + "; no healthy node in " + from + " after " +
                  Seconds(waited) + ", gang moved to " + JoinDomains(plan_.placement.domains);
  StartRecovery(kReasonMoving);
}

// Replace and MoveGang: the new placement, one more recovery, Recovering True, Running False.
void RecoveryDecider::StartRecovery(std::string_view reason) {
  WriteRecovered(plan_.status, plan_.placement, recoveries_ + 1, now_);
  SetConditionSince(plan_.status, model::kConditionRecovering, "True", reason, plan_.message,
                    generation_, now_);
  SetCondition(plan_.status, model::kConditionRunning, "False", "Recovering", plan_.message,
               generation_, now_);
  plan_.write_status = true;
}

}  // namespace

RecoveryPlan PlanRecovery(const placement::PlacementPolicy& policy, const RecoveryInput& in,
                          const RecoveryOptions& options) {
  RecoveryPlan plan = RecoveryDecider(policy, in, options).Run();
  // status.state follows the Recovering condition the plan wrote (one rule: SyncRecoveringState).
  if (plan.write_status) SyncRecoveringState(plan.status);
  return plan;
}

std::optional<FinishedRecovery> RecoveryFinishedBy(const Json& status_before,
                                                   const RecoveryPlan& plan, Time now) {
  if (plan.action == RecoveryAction::kFail) return FinishedRecovery{"failed", std::nullopt};
  if (plan.action != RecoveryAction::kNone || !plan.write_status) return std::nullopt;
  std::string reason_before, reason_after;
  if (!StatusConditionTrue(status_before, model::kConditionRecovering, &reason_before)) {
    return std::nullopt;
  }
  std::string_view outcome;
  if (reason_before == kReasonReplacing) {
    outcome = "in_place";
  } else if (reason_before == kReasonMoving) {
    outcome = "moved";
  } else {
    return std::nullopt;
  }
  for (const auto& c : plan.status.value("conditions", Json::array())) {
    if (c.is_object() && c.value("type", "") == model::kConditionRecovering &&
        c.value("status", "") == "False") {
      reason_after = c.value("reason", "");
    }
  }
  if (reason_after != "Recovered") return std::nullopt;
  std::optional<double> seconds;
  if (auto since = ConditionSince(status_before, model::kConditionRecovering, reason_before)) {
    seconds = std::max(0.0, std::chrono::duration<double>(now - *since).count());
  }
  return FinishedRecovery{outcome, seconds};
}

std::vector<const Json*> StaleRankPods(const model::JobSpec& spec, const Json& job_status,
                                       const model::JobPlacement& placement,
                                       const std::vector<const Json*>& pods) {
  const int epoch = IntAt(job_status, "recoveries");
  const bool restart_gang = RestartsGang(spec);
  std::vector<const Json*> out;
  for (const Json* p : pods) {
    if (!model::GangRankOf(*p, nullptr, nullptr)) continue;
    if (model::CurrentRankOf(*p, placement) == nullptr || (restart_gang && Epoch(*p) < epoch)) {
      out.push_back(p);
    }
  }
  return out;
}

bool RecoveryWaitsForNode(const Json& job) {
  std::string reason;
  return StatusConditionTrue(kube::AtPath(job, "/status"), model::kConditionRecovering, &reason) &&
         reason == kReasonWaiting;
}

std::vector<std::string> JobsWithRankOn(const std::vector<kube::ObjectPtr>& jobs,
                                        std::string_view node) {
  std::vector<std::string> out;
  for (const auto& j : jobs) {
    const Json& ranks = kube::AtPath(*j, "/status/placement/ranks");
    if (!ranks.is_array()) continue;
    for (const auto& r : ranks) {
      if (r.is_object() && r.value("node", "") == node) {
        out.push_back(kube::KeyOf(*j));
        break;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

namespace {

bool MovesRanks(RecoveryAction a) {
  return a == RecoveryAction::kReplace || a == RecoveryAction::kMoveGang;
}

// Nodes whose preemptible lenders must go: those the plan chose with `evict`, then every node of
// the placement whose rank pod does not run there yet.
std::vector<std::string> UnboundNodes(const RecoveryPlan& plan,
                                      const std::map<std::string, const Json*>& by_name) {
  std::vector<std::string> nodes = plan.evict_nodes;
  for (const auto& r : plan.placement.ranks) {
    auto it = by_name.find(r.pod);
    if (it == by_name.end() || BoundNode(*it->second) != r.node) nodes.push_back(r.node);
  }
  return nodes;
}

// Grace 0 when nothing runs any more: the node is dead (its kubelet never confirms a graceful
// delete), the pod never got bound, or it already terminated.
bool NothingRunsAnyMore(const model::ClusterState& state, const Json& pod,
                        const std::string& node) {
  placement::NodeId id = state.FindNode(node);
  return node.empty() || id == placement::kNoNode || !state.snapshot().nodes[id].ready ||
         state.Health(id).no_execute_taint || model::PodTerminated(pod);
}

// A pod still there kOverdue past its deletionTimestamp (the end of its grace period): no kubelet
// confirms the deletion (its node died, or it is wedged), so it is forced like one on a dead node;
// until then a new rank pod cannot take its name.
constexpr seconds kOverdue{10};
bool DeletionOverdue(const Json& pod, Time now) {
  const Json& ts = kube::AtPath(pod, "/metadata/deletionTimestamp");
  if (!ts.is_string()) return false;
  auto deadline = kube::ParseTime(ts.get_ref<const std::string&>());
  return deadline.ok() && now - *deadline > kOverdue;
}

// A stale pod already being deleted is left alone, unless nothing runs any more and its delete
// was not forced yet.
bool AlreadyOnItsWay(const Json& pod, bool dead) {
  const Json& grace = kube::AtPath(pod, "/metadata/deletionGracePeriodSeconds");
  return kube::IsBeingDeleted(pod) &&
         (!dead || (grace.is_number_integer() && grace.get<int64_t>() == 0));
}

// Ranks of the placement with no pod, or whose pod is stale (the new pod takes its name).
std::vector<const model::RankAssignment*> RanksToCreate(
    const model::JobPlacement& placement, const std::map<std::string, const Json*>& by_name,
    const std::vector<const Json*>& stale) {
  std::set<std::string> stale_names;
  for (const Json* p : stale) stale_names.insert(kube::Name(*p));
  std::vector<const model::RankAssignment*> out;
  for (const auto& r : placement.ranks) {
    if (by_name.count(r.pod) != 0 && stale_names.count(r.pod) == 0) continue;
    out.push_back(&r);
  }
  return out;
}

}  // namespace

JobRecovery::JobRecovery(kube::Client* client, kube::EventRecorder* events,
                         const placement::PlacementPolicy* policy, Enqueue enqueue, Config config)
    : client_(client),
      events_(events),
      policy_(policy),
      enqueue_(std::move(enqueue)),
      config_(std::move(config)) {}

void JobRecovery::Event(const Json& job, bool warning, const std::string& reason,
                        const std::string& note) {
  if (events_ == nullptr) return;
  events_->Record(job, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                  "Recover", note.size() > 1000 ? note.substr(0, 1000) : note);
}

void JobRecovery::Later(const std::string& key, milliseconds d) {
  if (enqueue_after_) enqueue_after_(key, d);
}

Status JobRecovery::EvictLenders(const RecoveryInput& in, const std::vector<std::string>& nodes) {
  if (nodes.empty()) return Status::Ok();
  std::set<std::string> wanted(nodes.begin(), nodes.end());
  Status first_error;
  for (const Json* p : in.all_pods) {
    if (!IsPreemptibleLender(*p) || kube::IsBeingDeleted(*p) || wanted.count(BoundNode(*p)) == 0) {
      continue;
    }
    Status s = client_->Evict(kube::Namespace(*p), kube::Name(*p));
    if (s.ok()) {
      NVL72_LOG(kInfo).Job(kube::KeyOf(*in.job)).Node(BoundNode(*p))
          << "evicted preemptible pod " << kube::KeyOf(*p) << " from " << BoundNode(*p)
          << " for recovery of " << kube::KeyOf(*in.job);
      Event(*in.job, false, "EvictedLender",
            "evicted preemptible pod " + kube::KeyOf(*p) + " from " + BoundNode(*p));
    } else if (!kube::IsNotFound(s) && first_error.ok()) {
      first_error = s;
    }
  }
  return first_error;
}

bool JobRecovery::Quiet(const RecoveryInput& in) {
  const Json& status = kube::AtPath(*in.job, "/status");
  if (IntAt(status, "recoveries") != 0 ||
      StatusConditionTrue(status, model::kConditionRecovering)) {
    return false;
  }
  RecoveryPlan plan = PlanRecovery(*policy_, in, config_.options);
  // An empty `failed` with no message is the plan's healthy branch, which reads only the rank
  // nodes, the job and its pods (a cordoned rank that stays clears `failed` but says why).
  if (!plan.failed.empty() || !plan.message.empty() || plan.write_status ||
      plan.action != RecoveryAction::kNone || plan.placement.ranks.empty()) {
    return false;
  }
  if (!StaleRankPods(*in.spec, status, plan.placement, in.pods).empty()) return false;
  if (plan.requeue_after) Later(kube::KeyOf(*in.job), *plan.requeue_after);
  return true;
}

StatusOr<bool> JobRecovery::Reconcile(const RecoveryInput& in) {
  const std::string key = kube::KeyOf(*in.job);
  RecoveryPlan plan = PlanRecovery(*policy_, in, config_.options);
  if (plan.requeue_after) Later(key, *plan.requeue_after);

  if (plan.write_status) {
    StatusOr<bool> done = CommitStatus(in, plan, key);
    if (!done.ok() || *done) return done;
  }

  // Waiting for a node: the pods still look fine to the usual status pass, which must not
  // overwrite the Recovering/Running conditions with their view.
  if (plan.action == RecoveryAction::kWait) return true;
  return ApplyPlacement(in, plan, key);
}

// (1) The new placement is the reservation: optimistic concurrency on the object we planned
// from. A conflict means our view is stale: retry from the key. True: the pass ends here.
StatusOr<bool> JobRecovery::CommitStatus(const RecoveryInput& in, const RecoveryPlan& plan,
                                         const std::string& key) {
  const Json& job = *in.job;
  Json obj = job;
  obj["status"] = plan.status;
  auto written = client_->UpdateStatus(Nvl72JobsResource(), kube::Namespace(job), obj,
                                       {.field_manager = config_.field_manager});
  if (!written.ok()) {
    if (kube::IsNotFound(written.status())) return true;
    return written.status();
  }
  if (MovesRanks(plan.action) && config_.assume) {
    config_.assume(*written, in.spec->gpus_per_replica, plan.placement);
  }
  if (config_.metrics != nullptr) {
    if (auto f = RecoveryFinishedBy(kube::AtPath(job, "/status"), plan, in.now)) {
      config_.metrics->CountRecovery(f->outcome, f->seconds);
    }
  }
  Announce(job, plan, key);
  if ((plan.action == RecoveryAction::kMoveGang || plan.action == RecoveryAction::kFail) &&
      !config_.admission_key.empty()) {
    enqueue_(config_.admission_key);  // nodes were freed
  }
  if (MovesRanks(plan.action)) return false;
  enqueue_(key);
  return true;
}

// The log line and Event of a plan whose status was written.
void JobRecovery::Announce(const Json& job, const RecoveryPlan& plan, const std::string& key) {
  const std::string failed_node = plan.failed.empty() ? "" : plan.failed.front().node;
  switch (plan.action) {
    case RecoveryAction::kReplace:
    case RecoveryAction::kMoveGang:
      NVL72_LOG(kInfo).Job(key).Node(failed_node) << key << ": " << plan.message;
      Event(job, true, "Recovering", plan.message);
      break;
    case RecoveryAction::kFail:
      NVL72_LOG(kWarning).Job(key).Node(failed_node) << key << " failed: " << plan.message;
      Event(job, true, "Failed", plan.message);
      break;
    case RecoveryAction::kWait:
      NVL72_LOG(kInfo).Job(key).Node(failed_node) << key << " waits: " << plan.message;
      Event(job, true, "WaitingForNode", plan.message);
      break;
    case RecoveryAction::kNone:
      if (!plan.message.empty()) Event(job, false, "Recovered", plan.message);
      break;
  }
}

// Steps (2)-(4), derived from the status and the pods alone, so an operator restart between any
// two steps converges on the next reconcile.
StatusOr<bool> JobRecovery::ApplyPlacement(const RecoveryInput& in, const RecoveryPlan& plan,
                                           const std::string& key) {
  const Json& status = plan.write_status ? plan.status : kube::AtPath(*in.job, "/status");
  const int epoch = IntAt(status, "recoveries");
  const std::vector<const Json*> stale = StaleRankPods(*in.spec, status, plan.placement, in.pods);
  // Never recovered nor moved: the caller's usual pass creates the pods.
  if (epoch == 0 && plan.action == RecoveryAction::kNone && stale.empty()) return false;

  // (2) Preemptible pods lent the nodes of ranks whose pod does not run there yet.
  std::map<std::string, const Json*> by_name;
  for (const Json* p : in.pods) by_name[kube::Name(*p)] = p;
  Status evicted = EvictLenders(in, UnboundNodes(plan, by_name));
  if (!evicted.ok()) NVL72_LOG(kWarning).Job(key) << key << ": eviction failed: " << evicted;

  StatusOr<bool> deleted = DeleteStaleRankPods(in, stale, key);
  if (!deleted.ok()) return deleted.status();
  // Old pods gone: their GPUs may let a waiting gang in (the controller also sees the deletions).
  if (*deleted && !config_.admission_key.empty()) enqueue_(config_.admission_key);

  StatusOr<int> created =
      CreateRankPods(in, RanksToCreate(plan.placement, by_name, stale), epoch, key);
  if (!created.ok()) return created.status();
  const bool acted = plan.write_status || *deleted || *created > 0;
  if (acted) enqueue_(key);
  return acted;
}

// (3) Stale rank pods go: force (grace 0) when their node failed or their graceful deletion is
// overdue, gracefully otherwise. True when it deleted one.
StatusOr<bool> JobRecovery::DeleteStaleRankPods(const RecoveryInput& in,
                                                const std::vector<const Json*>& stale,
                                                const std::string& key) {
  bool deleted = false;
  for (const Json* p : stale) {
    const std::string node = BoundNode(*p);
    const bool dead = NothingRunsAnyMore(*in.state, *p, node) || DeletionOverdue(*p, in.now);
    if (AlreadyOnItsWay(*p, dead)) continue;
    kube::DeleteOptions opts;
    opts.precondition_uid = kube::Uid(*p);
    if (dead) {
      opts.grace_period_seconds = 0;
    } else if (config_.options.stale_pod_grace_seconds) {
      opts.grace_period_seconds = *config_.options.stale_pod_grace_seconds;
    }
    Status s = client_->Delete(kube::kPods, kube::Namespace(*p), kube::Name(*p), opts);
    if (!s.ok() && !kube::IsNotFound(s) && !kube::IsConflict(s)) return s;
    NVL72_LOG(kDebug).Job(key).Node(node)
        << "deleted stale rank pod " << kube::KeyOf(*p) << (dead ? " (force)" : "");
    deleted = true;
  }
  return deleted;
}

// (4) Missing rank pods of a recovered job, created here so they carry the recovery epoch.
// Returns how many it created.
StatusOr<int> JobRecovery::CreateRankPods(const RecoveryInput& in,
                                          const std::vector<const model::RankAssignment*>& ranks,
                                          int epoch, const std::string& key) {
  const Json& job = *in.job;
  int created = 0;
  bool pending = false;
  std::set<int> groups;
  if (config_.pod_groups != nullptr) {
    auto ensured = config_.pod_groups->Ensure(job, *in.spec);
    if (!ensured.ok()) return ensured.status();
    groups = std::move(*ensured);
  }
  for (const model::RankAssignment* r : ranks) {
    Json pod = BuildRankPod(job, *in.spec, *r, config_.master_port, in.gpu_resource);
    JoinPodGroup(pod, PodGroupToJoin(kube::Name(job), *in.spec, r->rank, in.pods, groups));
    if (UsesComputeDomains(job)) {
      // The replacement joins its segment's ComputeDomain: a new claim from the same template.
      AddChannelClaim(pod, ChannelTemplateName(kube::Name(job), SegmentOfRank(*in.spec, r->rank)));
    }
    pod["metadata"]["annotations"][Str(kRecoveryEpochAnnotation)] = std::to_string(epoch);
    auto c = client_->Create(kube::kPods, kube::Namespace(job), pod,
                             {.field_manager = config_.field_manager});
    if (c.ok()) {
      ++created;
    } else if (kube::IsAlreadyExists(c.status())) {
      pending = true;  // the old pod is still terminating
    } else {
      return c.status();
    }
  }
  if (created > 0) {
    NVL72_LOG(kInfo).Job(key) << key << ": created " << created << " replacement rank pods";
    Event(job, false, "PodsReplaced",
          "created " + std::to_string(created) + " rank pods on their new planned nodes");
  }
  if (pending) Later(key, config_.options.retry_delay);
  return created;
}

}  // namespace nvl72::op
