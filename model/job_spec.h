// NVL72Job spec and status.placement: parsing, validation and serialisation.
//
// The operator and the scheduler extender both read NVL72Job objects through these functions so
// they agree on defaults and on what a placement means. Inputs are nlohmann::json exactly as the
// API server sends them; nothing here throws (JSON exceptions are caught at this edge).
// Thread-safety: pure functions over values.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "placement/policy.h"
#include "placement/snapshot.h"

namespace nvl72::model {

using Json = nlohmann::json;

enum class RecoveryPolicy {
  kInPlace,      // replace a failed rank by a node of the same domain
  kRestartGang,  // restart the whole gang
  kNone,         // do nothing; the job fails
};
std::string_view RecoveryPolicyName(RecoveryPolicy policy);  // "InPlace", "RestartGang", "None"

// spec.fabric: how the ranks of a segment reach each other over NVLink on GB200.
enum class Fabric {
  kComputeDomain,  // an IMEX ComputeDomain per segment (NVIDIA's DRA driver); channel claim per
                   // rank
  kNone,           // nothing (the ranks use NVLink only inside a node, or the cluster needs none)
};
std::string_view FabricName(Fabric fabric);  // "ComputeDomain", "None"

struct RecoverySpec {
  RecoveryPolicy policy = RecoveryPolicy::kInPlace;
  int not_ready_grace_seconds = 60;
  int max_recoveries = 10;
  // recovery.waitForDomainSeconds: how long a job waits for a healthy node in its own domain
  // before the whole gang is re-placed elsewhere; nullopt = the operator's default.
  std::optional<int> wait_for_domain_seconds;
};

// The typed, defaulted and validated `spec` of an NVL72Job.
struct JobSpec {
  int replicas = 1;
  int gpus_per_replica = 4;
  placement::TopologyMode mode = placement::TopologyMode::kRequired;
  int segment_size = 0;  // 0 = the whole gang is one segment
  bool preemptible = false;
  // spec.fabric; nullopt = the operator's default (--compute-domains).
  std::optional<Fabric> fabric;
  RecoverySpec recovery;
  Json pod_template = Json::object();  // spec.template (a PodTemplateSpec), as given
  // MASTER_PORT the template's containers set themselves (a literal port; every container that sets
  // it agrees): the user's port wins over the operator's --master-port. nullopt = not set.
  std::optional<int> master_port;

  int EffectiveMasterPort(int operator_default) const {
    return master_port.value_or(operator_default);
  }

  int EffectiveSegmentSize() const { return segment_size > 0 ? segment_size : replicas; }
};

// Limits a spec is validated against (the CRD enforces the same defaults).
struct SpecLimits {
  int domain_nodes = 18;      // a segment (and a Required gang) may not be larger than this
  int max_gpus_per_node = 8;  // gpusPerReplica must be in 1..this
};

// Parses and validates `spec` (the object under .spec). Missing optional fields get the defaults
// above. Errors are kInvalidArgument with a message that starts with the field path, e.g.
// "spec.topology.segmentSize: 5 does not divide spec.replicas 16".
StatusOr<JobSpec> ParseJobSpec(const Json& spec, const SpecLimits& limits = {});

// The placement request for a job: key is "<namespace>/<name>".
placement::GangRequest ToGangRequest(const JobSpec& spec, std::string key, int priority = 0);

// ---- status.placement ----

struct RankAssignment {
  int rank = 0;
  std::string node;
  std::string pod;
};

// status.placement: {domains: [names, one per segment in segment order], ranks: [{rank,node,pod}]}
// Ranks are stored sorted by rank and cover 0..replicas-1 when written by the operator.
struct JobPlacement {
  std::vector<std::string> domains;
  std::vector<RankAssignment> ranks;

  // The assignment of `rank`, or nullptr.
  const RankAssignment* FindRank(int rank) const;
  bool operator==(const JobPlacement& o) const;
};

// Parses `placement` (the value at status.placement). A null/absent value is an error here: use
// PlacementOf() to read it from a whole object. Errors name the field
// ("status.placement.ranks[3].node").
StatusOr<JobPlacement> ParsePlacement(const Json& placement);
Json PlacementToJson(const JobPlacement& placement);

// status.placement of a whole NVL72Job object: nullopt when absent or empty (not admitted), an
// error when present but malformed.
StatusOr<std::optional<JobPlacement>> PlacementOf(const Json& job);

// Pod name of a rank: "<job>-<rank>".
std::string RankPodName(std::string_view job_name, int rank);

// Builds the status.placement for a decision of the placement core: nodes by name, pods named by
// RankPodName, domains listed per segment in segment order (a Preferred/Unconstrained segment that
// spans domains lists each of its domains once, in rank order).
// REQUIRES: decision.rank_nodes are valid NodeIds of `snapshot`.
JobPlacement MakeJobPlacement(const placement::Snapshot& snapshot,
                              const placement::GangPlacement& decision, std::string_view job_name,
                              int segment_size);

// ---- whole-object helpers ----

// Status condition `type` of an object (status.conditions[]), or nullptr.
const Json* FindCondition(const Json& obj, std::string_view type);
// True when condition `type` exists with status "True".
bool ConditionIsTrue(const Json& obj, std::string_view type);

// True when the job is finished (Succeeded or Failed condition True): a finished job holds no
// reservation any more.
bool JobFinished(const Json& job);

// True when the job's status.placement currently holds GPUs: placement present and the job not
// finished. (A job being deleted still holds until its finalizer is removed.)
bool HoldsReservation(const Json& job);

// Priority of a job for admission order: annotation nvl72.dev/priority if it is an integer, else
// `priority_class_value` (the caller's lookup of spec.template.spec.priorityClassName; nullopt if
// unknown), else 0.
int JobPriority(const Json& job, std::optional<int> priority_class_value);
// spec.template.spec.priorityClassName or "".
std::string PriorityClassName(const Json& job);

}  // namespace nvl72::model
