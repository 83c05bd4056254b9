// Reconciler: the level-triggered logic of nvl72-operator, driven by keys from a work queue.
//
// Two kinds of keys:
//  - "<namespace>/<name>" of an NVL72Job: ensure the finalizer, create the missing rank pods and
//  the
//    headless Service of an admitted job, derive conditions from the pods, clean up on deletion.
//  - kAdmissionKey: one admission pass over ALL waiting jobs, in order of priority (desc) then
//    creation time then key, on one snapshot: each job is placed all-or-nothing by the placement
//    core; a placement is committed to status.placement with optimistic concurrency (the write IS
//    the reservation; it is conditional on a fresh read that shows no placement, so a job is never
//    placed twice, even across operator restarts) and only then are pods created. Jobs that do not
//    fit get Admitted=False with the core's reason. Later jobs may use capacity an earlier, larger
//    job cannot (backfill).
// Everything is recomputed from the ObjectStore and the API on each call; the only memory kept is
// the set of placements this process committed but the store may not show yet ("assumed"), so a
// lagging cache cannot hand the same nodes out twice.
//
// Thread-safety: Reconcile() may run concurrently for different keys (the work queue never hands
// one key to two workers).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/client.h"
#include "kube/events.h"
#include "model/cluster_state.h"
#include "model/job_spec.h"
#include "operator/compute_domains.h"
#include "operator/defrag_executor.h"
#include "operator/job_objects.h"
#include "operator/metrics.h"
#include "operator/object_store.h"
#include "operator/pod_groups.h"
#include "operator/recovery.h"
#include "operator/safety_net.h"
#include "placement/policy.h"

namespace nvl72::op {

struct ReconcilerOptions {
  model::ClusterOptions cluster;  // domain labels, GPU resource
  std::string policy = "nvl72";
  int spares_per_domain = 2;
  placement::SpareReserve spare_reserve = placement::SpareReserve::kSoft;
  int master_port = 29500;
  std::string field_manager = "nvl72-operator";
  RecoveryOptions recovery;  // node failures of admitted jobs (operator/recovery.h)
  DefragOptions defrag;  // moves of preemptible jobs for waiting gangs (operator/defrag_executor.h)
  SafetyNetOptions safety_net;  // ranks kube-scheduler refuses on their planned node (safety_net.h)
  // The stuck rule (StuckOf in job_objects.h): a job whose ranks have not all run for this long
  // gets a Warning event "Stuck"; 0 = off.
  std::chrono::seconds stuck_after{300};
  // A rank pod the API server rejected is tried again after this (a PriorityClass or quota may
  // appear).
  std::chrono::milliseconds rejected_retry{30000};
  // Stock gang scheduling (operator/pod_groups.h). Off by default here (the binary's default is
  // auto): a FakeClient serves every resource.
  PodGroupsMode pod_groups = PodGroupsMode::kOff;
  // The default of spec.fabric (operator/compute_domains.h). Off by default here (the binary's
  // default is auto), as pod_groups.
  ComputeDomainsMode compute_domains = ComputeDomainsMode::kOff;
  // A job whose ComputeDomains are not Ready yet is looked at again after this (during the first
  // minute; ComputeDomainRecheck).
  std::chrono::milliseconds compute_domain_recheck{2000};
};

class Reconciler {
 public:
  static constexpr const char* kAdmissionKey = "~admission";

  using Enqueue = std::function<void(const std::string& key)>;
  using WallClock = std::function<std::chrono::system_clock::time_point()>;
  using EnqueueAfter = std::function<void(const std::string& key, std::chrono::milliseconds)>;

  // `client`, `store` must outlive the reconciler; `events` and `metrics` may be null.
  // `enqueue` adds a key to the work queue (called from Reconcile()).
  Reconciler(kube::Client* client, const ObjectStore* store, kube::EventRecorder* events,
             Metrics* metrics, Enqueue enqueue, ReconcilerOptions options,
             WallClock wall_clock = nullptr);

  // Dispatches on the key. Non-OK means "retry with backoff".
  Status Reconcile(const std::string& key);

  Status ReconcileJob(const std::string& key);
  Status AdmitPending();

  // Results of the last admission pass, for tests and metrics.
  struct PassStats {
    int considered = 0;
    int admitted = 0;
    int waiting = 0;
    int holding = 0;                       // jobs holding a reservation after the pass
    int defrag_moves = 0;                  // jobs moved by defragmentation after the pass
    std::vector<double> decision_seconds;  // one per PlaceGang call
  };
  PassStats LastPass() const;

  // Recovery of jobs on failed nodes; the controller wires its delayed requeue (SetEnqueueAfter).
  JobRecovery* recovery() { return recovery_.get(); }
  // Defragmentation; the controller wires its metrics hook (DefragExecutor::SetMoveHook).
  DefragExecutor* defrag() { return defrag_.get(); }
  // The PodGroups of gangs; the controller calls Start() before the workers run.
  PodGroupWriter* pod_groups() { return pod_groups_.get(); }
  // The ComputeDomains of gangs; the controller calls Start() before the workers run.
  ComputeDomainWriter* compute_domains() { return compute_domains_.get(); }

  // Delayed requeue (the controller's WorkQueue::AddAfter) for recovery and the defragmentation
  // budget. Call before the first Reconcile.
  void SetEnqueueAfter(EnqueueAfter fn);

 private:
  // A placement this process wrote (admission, recovery) that the store may not show yet. The store
  // has caught up once its copy of the job is at least `resource_version` (the version our write
  // produced), or is another object (uid).
  struct Assumed {
    std::string uid;
    int gpus_per_replica = 0;
    model::JobPlacement placement;
    std::string resource_version;
    bool compute_domains = false;  // status.fabric of what we wrote is ComputeDomain
  };
  static bool StoreCaughtUp(const Json& stored, const Assumed& a);
  // Records a placement written for the job; `written` is the object the API server returned.
  void Assume(const Json& written, int gpus_per_replica, const model::JobPlacement& placement);

  // Whether the job uses ComputeDomains (UsesComputeDomains), from what we wrote while the store
  // does not show it yet: rank pods are created from an assumed placement, and must carry the
  // channel claim from the first.
  bool EffectiveComputeDomains(const Json& job) const;
  // Placement of a job: status.placement, else an assumed one of the same uid.
  std::optional<model::JobPlacement> EffectivePlacement(const Json& job) const;
  model::ClusterState BuildState(std::vector<ObjectPtr>* jobs) const;
  // Snapshot of just `job`'s rank nodes, its pods and its reservation (the recovery fast path).
  model::ClusterState BuildLocalState(const Json& job, const model::JobPlacement& placement,
                                      const std::vector<const Json*>& pods) const;
  std::optional<int> PriorityClassValue(const std::string& name);

  // AdmitPending's steps (defined in reconciler.cc).
  struct Pending;
  struct AdmissionPass;
  std::vector<Pending> PendingJobs(const std::vector<ObjectPtr>& jobs);
  void Admit(model::ClusterState& state, const Pending& p,
             std::chrono::system_clock::time_point now, AdmissionPass* pass);
  void KeepWaiting(const Pending& p, const placement::GangRequest& request,
                   const std::string& reason, std::chrono::system_clock::time_point now,
                   AdmissionPass* pass);
  void CommitAdmission(model::ClusterState& state, const Pending& p,
                       const placement::GangPlacement& decided,
                       std::chrono::system_clock::time_point now, AdmissionPass* pass);
  void Defragment(const model::ClusterState& state, const std::vector<ObjectPtr>& jobs,
                  std::chrono::system_clock::time_point now, AdmissionPass* pass);
  Status FinishPass(const model::ClusterState& state, AdmissionPass pass);

  struct Committed {
    bool written = false;           // false: a placement was already stored (adopted)
    model::JobPlacement placement;  // the placement now stored
    Json object;                    // the job as written or read
  };
  // Commits `placement` for the job read as `cached`, with status.fabric ComputeDomain when
  // `compute_domains`, else None (unless the job has one from an earlier admission: kept). Returns
  // the placement now stored (ours, or one found on a fresh read), nullopt if the job is
  // gone/changed/finished, or an error.
  StatusOr<std::optional<Committed>> Commit(const Json& cached,
                                            const model::JobPlacement& placement,
                                            bool compute_domains);
  void CheckFabricKept(const Json& written);
  Status EnsureFinalizer(const Json& job);
  Status Finalize(const Json& job);
  // Creates the headless Service, the PodGroups (PodGroupWriter::Ensure) and the missing rank pods,
  // which join their segment's group (PodGroupToJoin). A pod the API server rejects for good
  // (400, 403, 422) goes to `*rejected` ("rank pod <name>: <message>"), with an event and a log
  // line, and is tried again after options_.rejected_retry (until then the creates are skipped and
  // the remembered rejection is returned: no request, event or log line per reconcile); other
  // errors are returned.
  // With `domains` (the job uses ComputeDomains: one entry per segment), a segment's pods are
  // created once its channel template exists, and carry the channel claim (AddChannelClaim).
  Status EnsureObjects(const Json& job, const model::JobSpec& spec,
                       const model::JobPlacement& placement, const std::vector<ObjectPtr>& pods,
                       const std::vector<SegmentDomain>* domains, std::string* rejected);
  // The job's ComputeDomains (ComputeDomainWriter::Ensure) when it uses them, else none.
  StatusOr<std::optional<std::vector<SegmentDomain>>> EnsureComputeDomains(
      const Json& job, const model::JobSpec& spec);
  // The stuck rule on the job of `key`: an event the first time it is stuck for a reason, and a
  // requeue when it would become stuck.
  void CheckStuck(const std::string& key);
  Status WriteStatus(const Json& job, Json status);
  // The safety net (operator/safety_net.h). Returns true when it released the job's reservation.
  StatusOr<bool> CheckRefusedRanks(const Json& job, const model::JobPlacement& placement,
                                   const std::vector<ObjectPtr>& pods);
  // Deletes the rank pods of a job that holds no placement (left by a re-plan).
  Status DeleteLeftoverRanks(const Json& job, const std::vector<ObjectPtr>& pods);

  // ReconcileJob's steps.
  Status ForgetJob(const std::string& key);
  // Admitted=False reason InvalidSpec (and an event) when the status changes.
  Status ReportInvalidSpec(const Json& job, const std::string& message,
                           std::chrono::system_clock::time_point now);
  Status StopFailedRanks(const Json& job, const std::vector<ObjectPtr>& pods);
  // The recovery check. Returns true when recovery ended the reconcile.
  StatusOr<bool> CheckRecovery(const Json& job, const model::JobSpec& spec,
                               const std::vector<ObjectPtr>& pods,
                               std::chrono::system_clock::time_point now);
  // The conditions derived from the pods (`rejected`: EnsureObjects') and, for a job that uses
  // ComputeDomains, from `domains` (ComputeDomainReady; looked at again until it is True), written
  // when they change.
  Status UpdatePodStatus(const std::string& key, const Json& job,
                         const model::JobPlacement& placement, const std::vector<ObjectPtr>& pods,
                         const std::vector<SegmentDomain>* domains, const std::string& rejected,
                         std::chrono::system_clock::time_point now);
  std::string_view FinishDefragMove(const std::string& key, const Json& job, Json& status,
                                    const PodSummary& summary, const std::string& state_after,
                                    std::chrono::system_clock::time_point now);
  void ReportProgress(const std::string& key, const Json& job, const std::string& state_before,
                      const std::string& state_after, int misplaced);
  void Event(const Json& obj, bool warning, const std::string& reason, const std::string& action,
             const std::string& note);

  kube::Client* client_;
  const ObjectStore* store_;
  kube::EventRecorder* events_;
  Metrics* metrics_;
  Enqueue enqueue_;
  ReconcilerOptions options_;
  WallClock wall_clock_;
  std::unique_ptr<placement::PlacementPolicy> policy_;
  std::unique_ptr<PodGroupWriter> pod_groups_;
  std::unique_ptr<ComputeDomainWriter> compute_domains_;
  std::atomic<bool> stale_crd_logged_{false};
  std::unique_ptr<JobRecovery> recovery_;
  std::unique_ptr<DefragExecutor> defrag_;
  EnqueueAfter enqueue_after_;

  // One placement decision at a time: an admission pass (with its defragmentation plan) and a
  // recovery each plan on a snapshot and write a placement; two of them at once (two gangs of a
  // failed rack moving on two workers) would both take the same free nodes.
  std::mutex decide_mu_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Assumed> assumed_;  // job key -> committed placement
  std::map<std::string, int> priority_classes_;     // name -> value (values are immutable)
  PassStats last_pass_;
  std::map<std::string, std::string> stuck_reported_;  // job key -> "<reason>@<since>" evented
  struct Rejection {
    std::string uid;      // of the job the API server rejected a pod of
    std::string message;  // "rank pod <name>: <API message>"
    std::chrono::system_clock::time_point at;
  };
  std::map<std::string, Rejection> rejections_;  // job key -> last rejection (guarded by mu_)
  // The rejection of `job` to report instead of creating its pods again, while it is younger than
  // options_.rejected_retry; nullopt when the creates should be tried.
  std::optional<std::string> FreshRejection(const Json& job);
  void RememberRejection(const Json& job, const std::string& rejected);
};

}  // namespace nvl72::op
