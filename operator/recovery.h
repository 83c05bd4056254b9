// Recovery of admitted NVL72Jobs whose ranks sit on failed nodes (issue 6: node health + recovery).
//
// Two layers:
//  - PlanRecovery(): pure. From the job object, its spec, a ClusterState of the cache, the job's
//  pods
//    and `now`, it decides what the job needs: nothing; wait (a NotReady node inside its grace, or
//    no healthy node left in the domain and the wait bound not reached); a new status.placement
//    that replaces the failed ranks by nodes of the SAME domain (spares first, via
//    PlacementPolicy::SelectReplacements); a re-placement of the whole gang in another domain
//    (Required) or across domains (Preferred) once the wait bound has passed; or Failed
//    (recovery policy None, or maxRecoveries reached). It also returns the new status, the ranks to
//    recreate and when to look again.
//  - JobRecovery: applies a plan in the crash-safe order (1) status.placement with optimistic
//    concurrency, which IS the new reservation, (2) evict preemptible pods lent the chosen node,
//    (3) force-delete (grace 0) rank pods that are stale, (4) create the missing rank pods on their
//    planned nodes. Steps 2-4 are level-triggered from status alone (StaleRankPods / missing
//    ranks), so an operator restart between any two steps converges on the next reconcile.
//
// Stale rank pod: a pod labelled as a rank of the job whose planned node (annotation
// nvl72.dev/node) is not the node status.placement gives its rank, whose rank is not in the
// placement, or - for RestartGang jobs - whose recovery epoch (annotation nvl72.dev/recovery,
// absent = 0) is below status.recoveries (every recovery of a RestartGang job restarts every rank).
//
// Status fields written: placement, domains, recoveries, lastRecoveryTime, state, conditions
// Recovering (True while replacing or waiting; False "Recovered" once every rank runs again),
// Running (False while recovering), Failed (True on policy None / maxRecoveries).
//
// Thread-safety: PlanRecovery and the helpers are pure. JobRecovery::Reconcile may run concurrently
// for different jobs (it keeps no state).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "model/cluster_state.h"
#include "model/job_spec.h"
#include "operator/metrics.h"
#include "operator/node_health.h"
#include "operator/pod_groups.h"
#include "placement/policy.h"

namespace nvl72::op {

using Json = nlohmann::json;

// Pod annotation: status.recoveries when the pod was created (absent = 0).
inline constexpr std::string_view kRecoveryEpochAnnotation = "nvl72.dev/recovery";
// Pod label of work that lends a spare node and may be evicted when recovery needs it
// (value "true"). Such pods count as reclaimable GPUs for SelectReplacements.
inline constexpr std::string_view kPreemptibleLabel = "nvl72.dev/preemptible";

struct RecoveryOptions {
  // No healthy node left in the domain: wait spec.recovery.waitForDomainSeconds, else
  // `wait_bound` (--recovery-wait-seconds), else this many grace periods (spec.recovery.
  // notReadyGraceSeconds) after the failure was detected before re-placing the whole gang...
  std::optional<std::chrono::seconds> wait_bound;
  int wait_grace_multiple = 3;
  // ...but at least this long (a repaired node within this time keeps the job in its domain).
  std::chrono::seconds min_wait{0};
  // Look again this soon when an old pod is still terminating or a write raced.
  std::chrono::milliseconds retry_delay{200};
  // Ranks on cordoned nodes: false (--cordoned-ranks=keep) leaves them running; true (=move) moves
  // them gracefully to a healthy node of their domain when one is free (never a wait or a gang
  // move, never Failed: the rank still runs). Cordoned nodes never get new work either way.
  bool move_cordoned_ranks = false;
  // Look again this soon at a rank on a cordoned node that could not move yet.
  std::chrono::milliseconds cordon_recheck{30000};
  // Grace period (seconds) for deleting stale rank pods on live nodes; nullopt = the pod's own
  // terminationGracePeriodSeconds (the checkpoint window of a job moved by defragmentation).
  std::optional<int64_t> stale_pod_grace_seconds;
};

enum class RecoveryAction {
  kNone,      // healthy (maybe a requeue to re-check a NotReady node when its grace ends)
  kWait,      // failed ranks, no replacement yet: status says why, requeue
  kReplace,   // failed ranks get nodes of their own domain
  kMoveGang,  // whole gang re-placed (another domain / spanning)
  kFail,      // policy None or maxRecoveries reached
};
std::string_view RecoveryActionName(RecoveryAction a);

struct RecoveryPlan {
  RecoveryAction action = RecoveryAction::kNone;
  std::vector<FailedRank> failed;   // ranks on failed nodes (past their grace)
  model::JobPlacement placement;    // the placement after the plan (new for kReplace/kMoveGang)
  std::vector<int> recreate_ranks;  // ranks whose pods are replaced (all for a gang restart)
  // Nodes of `placement` whose preemptible work must be evicted first (SelectReplacements `evict`).
  std::vector<std::string> evict_nodes;
  bool write_status = false;  // `status` differs from the job's status
  Json status;                // the job's status after the plan
  // Re-check after this long (a NotReady node whose grace ends, the wait bound); nullopt = no need.
  std::optional<std::chrono::milliseconds> requeue_after;
  std::string message;  // what moved where and why (Event note, condition message)
};

struct RecoveryInput {
  const Json* job = nullptr;  // the NVL72Job (its stored status.placement counts)
  const model::JobSpec* spec = nullptr;
  const model::ClusterState* state = nullptr;  // built with not-ready grace 0 at `now`
  std::vector<const Json*> pods{};             // the job's pods
  std::vector<const Json*> all_pods{};         // every pod (preemptible lenders); may be empty
  std::chrono::system_clock::time_point now{};
  std::string gpu_resource = std::string(model::kGpuResource);
};

// Decides the recovery of one placed, unfinished job. REQUIRES: input pointers non-null.
RecoveryPlan PlanRecovery(const placement::PlacementPolicy& policy, const RecoveryInput& input,
                          const RecoveryOptions& options = {});

// A recovery that a plan finishes, for metrics (Metrics::CountRecovery).
struct FinishedRecovery {
  std::string_view outcome;       // "in_place" | "moved" | "failed" (Metrics::kRecoveryOutcomes)
  std::optional<double> seconds;  // completed recoveries: since the Recovering condition's start
};
// What `plan`, made at `now` for a job whose status was `status_before`, finishes: the Recovering
// condition going from True (reason ReplacingRanks -> "in_place", MovingGang -> "moved") to False
// "Recovered", timed from that condition's lastTransitionTime; a kFail plan -> "failed" (no time);
// anything else -> nullopt (also a node that came back while the job waited: nothing was
// recovered).
std::optional<FinishedRecovery> RecoveryFinishedBy(const Json& status_before,
                                                   const RecoveryPlan& plan,
                                                   std::chrono::system_clock::time_point now);

// Rank pods of the job that must go (see the file comment). Terminated pods of the current
// placement are not stale (their outcome is the job's).
std::vector<const Json*> StaleRankPods(const model::JobSpec& spec, const Json& job_status,
                                       const model::JobPlacement& placement,
                                       const std::vector<const Json*>& pods);

// True when the job's Recovering condition is True with reason WaitingForNode: its failed ranks
// wait for a healthy node of their domain, so freed capacity is worth a look.
bool RecoveryWaitsForNode(const Json& job);

// Keys "<ns>/<name>" of jobs in `jobs` whose status.placement puts a rank on `node`. For the
// controller's Node event handler.
std::vector<std::string> JobsWithRankOn(const std::vector<kube::ObjectPtr>& jobs,
                                        std::string_view node);

// Applies plans for the Reconciler. `client` must outlive it; `events` may be null.
class JobRecovery {
 public:
  using Enqueue = std::function<void(const std::string& key)>;
  using EnqueueAfter = std::function<void(const std::string& key, std::chrono::milliseconds)>;

  struct Config {
    RecoveryOptions options{};
    std::string field_manager = "nvl72-operator";
    int master_port = model::kDefaultMasterPort;
    std::string admission_key;   // enqueued when a recovery frees nodes ("" = none)
    Metrics* metrics = nullptr;  // finished recoveries are counted here (may be null)
    // Told of every placement a plan wrote (Replace, MoveGang), with the job as the API server
    // returned it, so that the next decision counts it before the cache shows it (may be empty).
    model::PlacementWritten assume;
    // The PodGroups replacement pods join (operator/pod_groups.h); null = none.
    PodGroupWriter* pod_groups = nullptr;
  };
  // `client`, `policy` must outlive it; `events` may be null.
  JobRecovery(kube::Client* client, kube::EventRecorder* events,
              const placement::PlacementPolicy* policy, Enqueue enqueue, Config config);

  // Delayed requeue (the controller's WorkQueue::AddAfter). Without it, delays are ignored (tests
  // drive time themselves). Call before the first Reconcile.
  void SetEnqueueAfter(EnqueueAfter fn) { enqueue_after_ = std::move(fn); }

  // Runs recovery for one placed, unfinished job. Returns true when it wrote or deleted something
  // and the caller's pass must end (the next reconcile sees the result); false when the caller
  // continues with its usual pod/status work. Errors mean retry with backoff.
  StatusOr<bool> Reconcile(const RecoveryInput& input);

  // The common case in O(ranks): true when the job was never recovered, is not recovering, no rank
  // sits on a failed (or, with move_cordoned_ranks, cordoned) node, no rank pod failed because of
  // its node and no rank pod is stale. Then Reconcile() would neither write nor delete and return
  // false, whatever the rest of the cluster looks like, so `input.state` need only hold the job's
  // rank nodes and `input.all_pods` may be empty. Schedules the re-check of a NotReady node still
  // inside its grace, as Reconcile() would. False: call Reconcile() with the whole cluster.
  bool Quiet(const RecoveryInput& input);

 private:
  // Reconcile's steps (the file comment's crash-safe order).
  StatusOr<bool> CommitStatus(const RecoveryInput& input, const RecoveryPlan& plan,
                              const std::string& key);
  void Announce(const Json& job, const RecoveryPlan& plan, const std::string& key);
  StatusOr<bool> ApplyPlacement(const RecoveryInput& input, const RecoveryPlan& plan,
                                const std::string& key);
  StatusOr<bool> DeleteStaleRankPods(const RecoveryInput& input,
                                     const std::vector<const Json*>& stale, const std::string& key);
  StatusOr<int> CreateRankPods(const RecoveryInput& input,
                               const std::vector<const model::RankAssignment*>& ranks, int epoch,
                               const std::string& key);
  Status EvictLenders(const RecoveryInput& input, const std::vector<std::string>& nodes);
  void Event(const Json& job, bool warning, const std::string& reason, const std::string& note);
  void Later(const std::string& key, std::chrono::milliseconds d);

  kube::Client* client_;
  kube::EventRecorder* events_;
  const placement::PlacementPolicy* policy_;
  Enqueue enqueue_;
  EnqueueAfter enqueue_after_;
  Config config_;
};

}  // namespace nvl72::op
