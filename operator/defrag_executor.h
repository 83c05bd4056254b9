// Defragmentation in the operator (issue 6): when a Required gang waits although enough GPUs are
// free in total, move the fewest preemptible NVL72Jobs so that one domain has room for it.
//
// Two layers, like operator/recovery.h:
//  - PlanDefragMoves(): pure. From the admission pass's ClusterState, the jobs still waiting (in
//    admission order) and every NVL72Job, it picks the first waiting Required gang that could use a
//    freed domain (at most the first placement::kMaxGangsPlannedPerPass eligible gangs are planned
//    for per pass), asks the placement core (placement::PlanDefrag) for the fewest preemptible jobs
//    to move, and checks that the plan really makes room: the waiting gang then fits in the freed
//    domain AND every moved job has a new placement elsewhere at once (the waiting gang's nodes
//    taken first). A plan that does not free room, or would leave a moved job without nodes, is not
//    executed. The rules it shares with the simulator (eligibility, the per-pass limit, the
//    interval, the cooldown, "fits in the freed domain") are placement/defrag.h's.
//  - DefragExecutor: applies a plan. Each move is one status write of the moved job with optimistic
//    concurrency: the new status.placement (the reservation at the new nodes), condition Moved True
//    (reason Defragmentation, says for whom and from where to where), defragMoves+1 and
//    lastDefragMoveTime. The job's own reconcile (JobRecovery) then deletes its old pods gracefully
//    (--defrag-grace-seconds, the checkpoint window) and creates them on the new nodes: the same
//    level-triggered, crash-safe path as a recovery. When every rank runs again, Moved goes False
//    (MoveCompleted); a moved job that fails instead gets Moved False (MoveFailed).
//
// Disruption budget and loop safety:
//  - never a non-preemptible job (spec.preemptible false), a finished job, one being deleted or
//    recovering, or one moved within the last `cooldown` (status.lastDefragMoveTime);
//  - at most `max_concurrent_moves` jobs per plan, and no new plan while any job is still being
//    moved (condition Moved True), so the jobs in flight never exceed the budget; a move whose
//    ranks do not all run again within `move_timeout` ends (Moved False, MoveTimedOut) and stops
//    counting, so one stuck job (an image that never pulls) cannot stop defragmentation for good;
//  - at least `min_interval` between two plans (the latest lastDefragMoveTime of any job, which
//    survives operator restarts, and the last plan of this process).
//
// Metrics: the executor reports every move to a MoveHook with "started" / "completed" / "failed"
// (see SetMoveHook); the controller wires it to the metrics sink.
//
// Thread-safety: PlanDefragMoves is pure. DefragExecutor::Run is called from the admission pass
// (one key, never concurrent with itself); MoveFinished from job reconciles; both lock `mu_`.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "kube/events.h"
#include "model/cluster_state.h"
#include "model/job_spec.h"
#include "placement/defrag.h"
#include "placement/policy.h"

namespace nvl72::op {

using Json = nlohmann::json;

// Condition of a job moved by defragmentation: True while its ranks restart on the new nodes.
inline constexpr std::string_view kConditionMoved = "Moved";

struct DefragOptions {
  bool enabled = true;
  int max_concurrent_moves = placement::kDefaultDefragMaxMoves;
  std::chrono::seconds min_interval{placement::kDefaultDefragMinIntervalSeconds};
  std::chrono::seconds cooldown{placement::kDefaultDefragCooldownSeconds};
  // A move whose ranks do not all run again within this (from lastDefragMoveTime) ends: Moved
  // False / MoveTimedOut, and it stops counting against max_concurrent_moves.
  std::chrono::seconds move_timeout{600};
  // The GPU resource (the reconciler sets its cluster option): what the rank pods' constraints
  // leave to the placement core (model::JudgeJob).
  std::string gpu_resource = std::string(model::kGpuResource);
};

// A job the admission pass could not place, in admission order.
struct DefragWaitingJob {
  const Json* job = nullptr;
  const model::JobSpec* spec = nullptr;
  int priority = 0;
  placement::GangRequest request;  // as the admission pass judged it (model::JudgeJob)
};

struct DefragMove {
  const Json* job = nullptr;  // the moved job as read (its status is the base of the write)
  std::string key;
  model::JobPlacement from;
  model::JobPlacement to;
};

struct DefragDecision {
  bool execute = false;
  const Json* waiting_job = nullptr;  // the gang the moves make room for
  std::string waiting_key;
  std::string domain;  // the domain freed for it
  std::vector<DefragMove> moves;
  std::string reason;  // what is done, or why nothing is
  // Nothing done only because of the budget's minimum interval: look again after this long.
  std::optional<std::chrono::milliseconds> retry_after;
};

// REQUIRES: pointers in `waiting` non-null; `jobs` are every NVL72Job of the cache; `state` is the
// state after the admission pass (reservations committed in the pass included).
DefragDecision PlanDefragMoves(const placement::PlacementPolicy& policy,
                               const model::ClusterState& state,
                               const std::vector<DefragWaitingJob>& waiting,
                               const std::vector<const Json*>& jobs, const DefragOptions& options,
                               std::chrono::system_clock::time_point now,
                               std::optional<std::chrono::system_clock::time_point> last_plan);

// Executes decisions for the Reconciler. `client`, `policy` must outlive it; `events` may be null.
class DefragExecutor {
 public:
  using MoveHook = std::function<void(std::string_view result)>;
  using Enqueue = std::function<void(const std::string& key)>;

  struct Config {
    DefragOptions options{};
    std::string field_manager = "nvl72-operator";
    model::PlacementWritten assume;  // told of every move's new placement (may be empty)
  };
  DefragExecutor(kube::Client* client, kube::EventRecorder* events,
                 const placement::PlacementPolicy* policy, Enqueue enqueue, Config config);

  // METRICS HOOK (single call site for defragmentation moves): called with "started" when a move
  // is committed, "completed" when the moved job runs again, "failed" when the commit fails or the
  // moved job fails. The controller wires it to Metrics::CountDefragMove(result).
  void SetMoveHook(MoveHook hook) { hook_ = std::move(hook); }

  // Plans (PlanDefragMoves) and executes. Returns the decision; an error when a move's write
  // failed (the moves written before it stand; the rest is re-planned later).
  StatusOr<DefragDecision> Run(const model::ClusterState& state,
                               const std::vector<DefragWaitingJob>& waiting,
                               const std::vector<const Json*>& jobs,
                               std::chrono::system_clock::time_point now);

  // For the job reconcile: if `job` has Moved True and runs again (`running`), failed (`failed`)
  // or its move_timeout passed, sets Moved False (MoveCompleted / MoveFailed / MoveTimedOut) in
  // `status` and returns "completed" / "failed" / "timed_out", else "". The caller writes
  // `status`, then calls MoveFinished(result) so a write that fails is not counted.
  std::string_view FinishMove(const Json& job, Json& status, bool running, bool failed,
                              std::chrono::system_clock::time_point now);
  // How long until the move of `job` (Moved True) times out; nullopt when it is not being moved.
  // The job reconcile looks again then, as nothing else may happen to the job meanwhile.
  std::optional<std::chrono::milliseconds> MoveTimeoutIn(
      const Json& job, std::chrono::system_clock::time_point now) const;
  void MoveFinished(const Json& job, std::string_view result);

  const DefragOptions& options() const { return config_.options; }

 private:
  void Report(std::string_view result) {
    if (hook_) hook_(result);  // Metrics::CountDefragMove(result), wired by the controller
  }
  void Event(const Json& job, bool warning, const std::string& reason, const std::string& note);

  kube::Client* client_;
  kube::EventRecorder* events_;
  const placement::PlacementPolicy* policy_;
  Enqueue enqueue_;
  Config config_;
  MoveHook hook_;
  std::mutex mu_;
  std::optional<std::chrono::system_clock::time_point> last_plan_;
};

}  // namespace nvl72::op
