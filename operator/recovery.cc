#include "operator/recovery.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "kube/errors.h"
#include "kube/object.h"
#include "model/job_nodes.h"
#include "model/names.h"
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

std::string PlannedNodeOf(const Json& pod) {
  auto ann = kube::Annotations(pod);
  auto it = ann.find(Str(model::kNodeAnnotation));
  return it == ann.end() ? "" : it->second;
}

std::string BoundNode(const Json& pod) {
  const Json& n = kube::AtPath(pod, "/spec/nodeName");
  return n.is_string() ? n.get<std::string>() : "";
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
  g.rank_nodes.assign(static_cast<size_t>(max_rank + 1), placement::kNoNode);
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
RecoveryPlan DecideRecovery(const placement::PlacementPolicy& policy, const RecoveryInput& in,
                            const RecoveryOptions& options) {
  RecoveryPlan plan;
  const Json& job = *in.job;
  const model::JobSpec& spec = *in.spec;
  const model::ClusterState& state = *in.state;
  plan.status = kube::AtPath(job, "/status");
  if (!plan.status.is_object()) plan.status = Json::object();
  auto stored = model::PlacementOf(job);
  if (!stored.ok() || !stored->has_value()) return plan;
  plan.placement = **stored;
  const int64_t generation = kube::Generation(job);
  const std::string key = kube::KeyOf(job);
  const seconds grace(std::max(0, spec.recovery.not_ready_grace_seconds));
  const Time now = in.now;

  plan.failed = FailedRanks(state, plan.placement, spec.gpus_per_replica, grace, now,
                            options.move_cordoned_ranks);
  // The rank's current pod failed because of its node: a node failure even if the node looks fine.
  for (const Json* p : in.pods) {
    int rank = -1;
    if (!model::GangRankOf(*p, nullptr, &rank) || kube::IsBeingDeleted(*p)) continue;
    const model::RankAssignment* a = plan.placement.FindRank(rank);
    if (a == nullptr || kube::Name(*p) != a->pod || PlannedNodeOf(*p) != a->node) continue;
    std::string why = PodFailedByNode(*p);
    if (!why.empty()) MarkStopped(plan.failed, {rank, a->node, NodeFailure::kPodFailedByNode, why});
  }
  for (const auto& a : plan.placement.ranks) {
    std::string now_in;
    if (LeftDomain(state, plan.placement, spec, a, &now_in)) {
      MarkStopped(plan.failed, {a.rank, a.node, NodeFailure::kLeftDomain, "now in " + now_in});
    } else if (RankGoneFromCordonedNode(state, a, in.pods)) {
      MarkStopped(plan.failed, {a.rank, a.node, NodeFailure::kDrained, ""});
    }
  }
  std::sort(plan.failed.begin(), plan.failed.end(),
            [](const FailedRank& a, const FailedRank& b) { return a.rank < b.rank; });
  // Ranks that stopped go first; ranks on cordoned nodes move only when nothing else is wrong.
  const bool any_stopped = std::any_of(plan.failed.begin(), plan.failed.end(),
                                       [](const FailedRank& f) { return RankStopped(f.cause); });
  if (any_stopped) {
    std::erase_if(plan.failed, [](const FailedRank& f) { return !RankStopped(f.cause); });
  }
  const bool cordon_only = !plan.failed.empty() && !any_stopped;

  // A NotReady node still inside its grace: look again when the grace ends.
  auto requeue_at_most = [&](milliseconds d) {
    d = std::max(d, milliseconds(1));
    if (!plan.requeue_after || d < *plan.requeue_after) plan.requeue_after = d;
  };
  for (const auto& r : plan.placement.ranks) {
    placement::NodeId id = state.FindNode(r.node);
    if (id == placement::kNoNode) continue;
    const model::NodeHealth& h = state.Health(id);
    if (!h.ready_condition && h.not_ready_since && now - *h.not_ready_since < grace) {
      requeue_at_most(duration_cast<milliseconds>(*h.not_ready_since + grace - now) + kGraceSlack);
    }
  }

  const int recoveries = IntAt(plan.status, "recoveries");
  const int ranks = static_cast<int>(plan.placement.ranks.size());
  if (plan.failed.empty()) {
    std::string reason;
    if (StatusConditionTrue(plan.status, model::kConditionRecovering, &reason)) {
      if (reason == kReasonWaiting) {
        plan.write_status =
            SetCondition(plan.status, model::kConditionRecovering, "False", "NodeRecovered",
                         "the failed nodes are healthy again", generation, now);
        plan.message = "the failed nodes are healthy again";
      } else {
        std::vector<const Json*> current;
        for (const Json* p : in.pods) {
          if (!kube::IsBeingDeleted(*p)) current.push_back(p);
        }
        PodSummary s = SummarizePods(plan.placement, current);
        if (s.running == ranks && ranks > 0 && s.misplaced == 0) {
          plan.message = "all " + std::to_string(ranks) + " ranks running again after recovery " +
                         std::to_string(recoveries);
          plan.write_status = SetCondition(plan.status, model::kConditionRecovering, "False",
                                           "Recovered", plan.message, generation, now);
        }
      }
    }
    return plan;
  }

  std::string what;
  for (const auto& f : plan.failed) {
    if (!what.empty()) what += ", ";
    what += "rank " + std::to_string(f.rank) + " on " + f.node + " (" +
            Str(NodeFailureName(f.cause)) + (f.detail.empty() ? "" : " " + f.detail) + ")";
  }
  // A rank on a cordoned node still runs: it moves when a node is free, else it stays.
  auto keep_cordoned = [&](const std::string& why) {
    plan.failed.clear();
    plan.message = what + ": stays: " + why;
    requeue_at_most(options.cordon_recheck);
    return plan;
  };
  if (cordon_only && (spec.recovery.policy == model::RecoveryPolicy::kNone ||
                      recoveries >= spec.recovery.max_recoveries)) {
    return keep_cordoned("no recovery left");
  }

  auto fail = [&](std::string_view reason, const std::string& message) {
    plan.action = RecoveryAction::kFail;
    plan.message = message;
    SetCondition(plan.status, model::kConditionFailed, "True", reason, message, generation, now);
    SetCondition(plan.status, model::kConditionRunning, "False", reason, message, generation, now);
    SetCondition(plan.status, model::kConditionRecovering, "False", reason, message, generation,
                 now);
    plan.status["state"] = "Failed";
    plan.write_status = true;
    return plan;
  };
  if (spec.recovery.policy == model::RecoveryPolicy::kNone) {
    return fail("NodeFailed", what + "; recovery policy None");
  }
  if (recoveries >= spec.recovery.max_recoveries) {
    return fail("MaxRecoveriesExceeded", what + "; " + std::to_string(recoveries) +
                                             " recoveries reached maxRecoveries " +
                                             std::to_string(spec.recovery.max_recoveries));
  }

  // The snapshot the policy sees: pods of preemptible lenders are reclaimable GPUs.
  placement::Snapshot snap = state.snapshot();
  for (const Json* p : in.all_pods) {
    auto labels = kube::Labels(*p);
    auto it = labels.find(Str(kPreemptibleLabel));
    if (it == labels.end() || it->second != "true" || model::PodTerminated(*p)) continue;
    if (model::GangRankOf(*p, nullptr, nullptr)) continue;
    placement::NodeId id = state.FindNode(BoundNode(*p));
    if (id == placement::kNoNode) continue;
    snap.nodes[id].gpu_reclaimable += model::PodGpuRequest(*p, in.gpu_resource);
  }
  for (auto& n : snap.nodes) n.gpu_reclaimable = std::min(n.gpu_reclaimable, n.gpu_used);

  // The job's own constraints (model::JudgeJob): replacements go only where kube-scheduler will
  // take the rank pod.
  const placement::GangRequest request =
      model::JudgeJob(state, job, spec, key, 0, in.gpu_resource).request;
  placement::GangPlacement current = CurrentPlacement(state, plan.placement, spec);
  std::vector<int> failed_ranks;
  for (const auto& f : plan.failed) failed_ranks.push_back(f.rank);
  placement::RecoveryDecision d = policy.SelectReplacements(snap, request, current, failed_ranks);
  const bool restart_gang = spec.recovery.policy == model::RecoveryPolicy::kRestartGang;

  if (d.recovered) {
    std::string moves;
    for (size_t i = 0; i < failed_ranks.size(); ++i) {
      const std::string& to = snap.nodes[d.replacement[i]].name;
      for (auto& r : plan.placement.ranks) {
        if (r.rank != failed_ranks[i]) continue;
        if (!moves.empty()) moves += ", ";
        moves += "rank " + std::to_string(r.rank) + " " + r.node + " (" +
                 Str(NodeFailureName(plan.failed[i].cause)) + ") -> " + to;
        if (d.evict[i]) {
          moves += " (evicting preemptible pods)";
          plan.evict_nodes.push_back(to);
        }
        r.node = to;
      }
    }
    plan.action = RecoveryAction::kReplace;
    plan.recreate_ranks = failed_ranks;
    if (restart_gang) {
      plan.recreate_ranks.clear();
      for (const auto& r : plan.placement.ranks) plan.recreate_ranks.push_back(r.rank);
    }
    plan.message = "recovery " + std::to_string(recoveries + 1) + ": " + moves +
                   (restart_gang ? "; restarting the gang" : "");
    WriteRecovered(plan.status, plan.placement, recoveries + 1, now);
    SetConditionSince(plan.status, model::kConditionRecovering, "True", kReasonReplacing,
                      plan.message, generation, now);
    SetCondition(plan.status, model::kConditionRunning, "False", "Recovering", plan.message,
                 generation, now);
    plan.write_status = true;
    return plan;
  }

  if (cordon_only) return keep_cordoned(d.reason);

  // No healthy node in the domain: wait up to the bound, then re-place the whole gang.
  const seconds configured = spec.recovery.wait_for_domain_seconds
                                 ? seconds(*spec.recovery.wait_for_domain_seconds)
                             : options.wait_bound ? *options.wait_bound
                                                  : grace * options.wait_grace_multiple;
  const milliseconds bound = std::max(duration_cast<milliseconds>(options.min_wait),
                                      duration_cast<milliseconds>(configured));
  std::optional<Time> since =
      ConditionSince(plan.status, model::kConditionRecovering, kReasonWaiting);
  const milliseconds waited = since ? duration_cast<milliseconds>(now - *since) : milliseconds(0);
  auto wait = [&](const std::string& message, milliseconds again) {
    plan.action = RecoveryAction::kWait;
    plan.message = message;
    plan.write_status = SetConditionSince(plan.status, model::kConditionRecovering, "True",
                                          kReasonWaiting, message, generation, now);
    plan.write_status |= SetCondition(plan.status, model::kConditionRunning, "False",
                                      kReasonWaiting, message, generation, now);
    requeue_at_most(again);
    return plan;
  };
  if (!since || waited < bound) {
    return wait(what + ": " + d.reason + "; waiting up to " + Seconds(bound) +
                    " for a node before moving the gang",
                bound - waited + kGraceSlack);
  }
  model::ClusterState without = state;
  without.Release(key);
  placement::GangDecision g = policy.PlaceGang(without.snapshot(), request);
  if (!g.placed) {
    return wait(what + ": " + d.reason + "; no other placement either: " + g.reason,
                std::max(duration_cast<milliseconds>(grace), milliseconds(5000)));
  }
  const std::string from = JoinDomains(plan.placement.domains);
  plan.placement =
      model::MakeJobPlacement(without.snapshot(), g.placement, kube::Name(job), spec.segment_size);
  plan.action = RecoveryAction::kMoveGang;
  for (const auto& r : plan.placement.ranks) plan.recreate_ranks.push_back(r.rank);
  plan.message = "recovery " + std::to_string(recoveries + 1) + ": " + what +
                 "; no healthy node in " + from + " after " + Seconds(waited) + ", gang moved to " +
                 JoinDomains(plan.placement.domains);
  WriteRecovered(plan.status, plan.placement, recoveries + 1, now);
  SetConditionSince(plan.status, model::kConditionRecovering, "True", kReasonMoving, plan.message,
                    generation, now);
  SetCondition(plan.status, model::kConditionRunning, "False", "Recovering", plan.message,
               generation, now);
  plan.write_status = true;
  return plan;
}

}  // namespace

RecoveryPlan PlanRecovery(const placement::PlacementPolicy& policy, const RecoveryInput& in,
                          const RecoveryOptions& options) {
  RecoveryPlan plan = DecideRecovery(policy, in, options);
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
  const bool restart_gang = spec.recovery.policy == model::RecoveryPolicy::kRestartGang;
  std::vector<const Json*> out;
  for (const Json* p : pods) {
    int rank = -1;
    if (!model::GangRankOf(*p, nullptr, &rank)) continue;
    const model::RankAssignment* a = placement.FindRank(rank);
    if (a == nullptr || kube::Name(*p) != a->pod || PlannedNodeOf(*p) != a->node ||
        (restart_gang && Epoch(*p) < epoch)) {
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
    auto labels = kube::Labels(*p);
    auto it = labels.find(Str(kPreemptibleLabel));
    if (it == labels.end() || it->second != "true" || model::PodTerminated(*p) ||
        kube::IsBeingDeleted(*p) || model::GangRankOf(*p, nullptr, nullptr) ||
        wanted.count(BoundNode(*p)) == 0) {
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
  const Json& job = *in.job;
  const std::string key = kube::KeyOf(job);
  RecoveryPlan plan = PlanRecovery(*policy_, in, config_.options);
  if (plan.requeue_after) Later(key, *plan.requeue_after);

  if (plan.write_status) {
    // (1) The new placement is the reservation: optimistic concurrency on the object we planned
    // from. A conflict means our view is stale: retry from the key.
    Json obj = job;
    obj["status"] = plan.status;
    auto written = client_->UpdateStatus(Nvl72JobsResource(), kube::Namespace(job), obj,
                                         {.field_manager = config_.field_manager});
    if (!written.ok()) {
      if (kube::IsNotFound(written.status())) return true;
      return written.status();
    }
    if ((plan.action == RecoveryAction::kReplace || plan.action == RecoveryAction::kMoveGang) &&
        config_.assume) {
      config_.assume(*written, in.spec->gpus_per_replica, plan.placement);
    }
    if (config_.metrics != nullptr) {
      if (auto f = RecoveryFinishedBy(kube::AtPath(job, "/status"), plan, in.now)) {
        config_.metrics->CountRecovery(f->outcome, f->seconds);
      }
    }
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
    if ((plan.action == RecoveryAction::kMoveGang || plan.action == RecoveryAction::kFail) &&
        !config_.admission_key.empty()) {
      enqueue_(config_.admission_key);  // nodes were freed
    }
    if (plan.action != RecoveryAction::kReplace && plan.action != RecoveryAction::kMoveGang) {
      enqueue_(key);
      return true;
    }
  }

  // Waiting for a node: the pods still look fine to the usual status pass, which must not
  // overwrite the Recovering/Running conditions with their view.
  if (plan.action == RecoveryAction::kWait) return true;

  const Json& status = plan.write_status ? plan.status : kube::AtPath(job, "/status");
  const int epoch = IntAt(status, "recoveries");
  const std::vector<const Json*> stale = StaleRankPods(*in.spec, status, plan.placement, in.pods);
  // Never recovered nor moved: the caller's usual pass creates the pods.
  if (epoch == 0 && plan.action == RecoveryAction::kNone && stale.empty()) return false;

  // (2) Preemptible pods lent the nodes of ranks whose pod does not run there yet.
  std::map<std::string, const Json*> by_name;
  for (const Json* p : in.pods) by_name[kube::Name(*p)] = p;
  std::vector<std::string> unbound_nodes = plan.evict_nodes;
  for (const auto& r : plan.placement.ranks) {
    auto it = by_name.find(r.pod);
    if (it == by_name.end() || BoundNode(*it->second) != r.node) unbound_nodes.push_back(r.node);
  }
  Status evicted = EvictLenders(in, unbound_nodes);
  if (!evicted.ok()) NVL72_LOG(kWarning).Job(key) << key << ": eviction failed: " << evicted;

  // (3) Stale rank pods go: force (grace 0) when their node failed, gracefully otherwise.
  bool acted = plan.write_status;
  bool freed = false;
  std::set<std::string> stale_names;
  for (const Json* p : stale) {
    stale_names.insert(kube::Name(*p));
    const std::string node = BoundNode(*p);
    placement::NodeId id = in.state->FindNode(node);
    // Grace 0 when nothing runs any more: the node is dead (its kubelet never confirms a graceful
    // delete), the pod never got bound, or it already terminated.
    const bool dead = node.empty() || id == placement::kNoNode ||
                      !in.state->snapshot().nodes[id].ready ||
                      in.state->Health(id).no_execute_taint || model::PodTerminated(*p);
    const Json& grace = kube::AtPath(*p, "/metadata/deletionGracePeriodSeconds");
    if (kube::IsBeingDeleted(*p) &&
        (!dead || (grace.is_number_integer() && grace.get<int64_t>() == 0))) {
      continue;  // already on its way
    }
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
    acted = true;
    freed = true;
  }
  // Old pods gone: their GPUs may let a waiting gang in (the controller also sees the deletions).
  if (freed && !config_.admission_key.empty()) enqueue_(config_.admission_key);

  // (4) Missing rank pods of a recovered job, created here so they carry the recovery epoch.
  int created = 0;
  bool pending = false;
  for (const auto& r : plan.placement.ranks) {
    if (by_name.count(r.pod) != 0 && stale_names.count(r.pod) == 0) continue;
    Json pod = BuildRankPod(job, *in.spec, r, config_.master_port, in.gpu_resource);
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
    acted = true;
  }
  if (pending) Later(key, config_.options.retry_delay);
  if (acted) enqueue_(key);
  return acted;
}

}  // namespace nvl72::op
