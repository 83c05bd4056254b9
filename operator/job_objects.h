// Pure builders of the objects the operator writes for an NVL72Job: rank pods, the headless
// Service, status conditions and the status summary derived from the rank pods. Thread-safety: pure
// functions over values.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kube/informer.h"
#include "model/job_spec.h"

namespace nvl72::op {

using Json = nlohmann::json;

// The controller ownerReference (blockOwnerDeletion) of everything the operator creates for `job`.
Json JobOwnerReference(const Json& job);

// The pod of `rank`: spec.template plus name "<job>-<rank>", labels nvl72.dev/job + nvl72.dev/rank,
// annotation nvl72.dev/node = planned node, controller ownerReference to the job, env NVL72_RANK,
// NVL72_WORLD_SIZE, MASTER_ADDR (<job>-0.<job>.<ns>.svc), MASTER_PORT (the template's own, else
// `master_port`) in every container, dnsPolicy ClusterFirstWithHostNet for hostNetwork pods that
// left it at ClusterFirst,
// hostname/subdomain for rank DNS, schedulerName nvl72-scheduler, model::RankTolerations (the GPU
// resource's NoSchedule taint, the node lifecycle NoExecute taints), a required node affinity on
// kubernetes.io/hostname = planned node (ANDed into every existing required term), restartPolicy
// Never unless the template sets one, and `gpus_per_replica` GPUs on the first container when no
// container asks for any.
Json BuildRankPod(const Json& job, const model::JobSpec& spec, const model::RankAssignment& rank,
                  int master_port, std::string_view gpu_resource);

// Headless Service "<job>" selecting the job's pods (publishNotReadyAddresses) for rank DNS; its
// port is the job's MASTER_PORT (JobSpec::EffectiveMasterPort).
Json BuildHeadlessService(const Json& job, int master_port);

// Sets condition `type` in status.conditions. lastTransitionTime moves only when `status` changes.
// Returns true if anything changed.
bool SetCondition(Json& status, std::string_view type, std::string_view cond_status,
                  std::string_view reason, std::string_view message, int64_t generation,
                  std::chrono::system_clock::time_point now);

// True when condition `type` of `status` (a job's .status) is "True"; its reason goes to `reason`.
bool StatusConditionTrue(const Json& status, std::string_view type, std::string* reason = nullptr);

// status.state of a job that is being recovered: "Recovering" while its Recovering condition is
// True and it has not ended (Failed, Succeeded); a state of "Recovering" whose condition went False
// falls back to "Admitted" (ApplyPlacedStatus refines it from the pods). Returns true if changed.
bool SyncRecoveringState(Json& status);

// Why a rank pod failed, for the Failed condition: the first terminated container with a non-zero
// exit code ("container trainer exited with code 137 (OOMKilled)"), else the pod's own reason and
// message (an eviction), else "".
std::string FailedPodDetail(const Json& pod);

// What the rank pods say about a placed job.
struct PodSummary {
  int ranks = 0;      // replicas
  int created = 0;    // rank pods that exist
  int bound = 0;      // ... bound to their planned node
  int misplaced = 0;  // ... bound to another node
  int running = 0;
  int succeeded = 0;
  int failed = 0;
  std::string first_failed_pod;
  std::string first_failed_detail;  // FailedPodDetail of that pod
  // The first rank kube-scheduler refuses (model::UnschedulableCondition): "rank 3 on <node>: <its
  // message>"; the safety net re-plans the gang if it lasts (operator/safety_net.h).
  std::string refused;
  // The first rank pod the API server refused to create (a 400/403/422 of
  // Reconciler::EnsureObjects: an unknown PriorityClass, a quota, an invalid container): "rank pod
  // <name>: <API message>". Not derived from the pods (there is none); the caller sets it.
  std::string rejected;
  // The first bound, pending rank whose container waits with a reason (ErrImagePull,
  // CreateContainerConfigError...): "rank 3: container trainer ImagePullBackOff: <message>".
  std::string waiting;
  // The first unbound rank whose resource claim kube-controller-manager has not made from its
  // template yet (a user's template that does not exist): kube-scheduler waits for the claim and
  // says nothing. The caller also puts here why it holds rank pods back (TemplateWait of
  // operator/compute_domains.h: the driver has not created a ComputeDomain's channel template).
  std::string claim_pending;
};
// `pods` are the job's pods (any order; pods that are no rank of this placement are ignored).
PodSummary SummarizePods(const model::JobPlacement& placement,
                         const std::vector<const Json*>& pods);

// Writes the conditions and summary fields (state, domains, observedGeneration) of a placed job
// into `status` from `summary`. Returns true if anything changed. While not every rank runs, the
// Running condition's reason says why (NotRunningReason); the stuck rule (StuckOf) counts jobs by
// it.
bool ApplyPlacedStatus(Json& status, const model::JobPlacement& placement,
                       const PodSummary& summary, int64_t generation,
                       std::chrono::system_clock::time_point now);

// Writes the waiting state (Admitted False, reason Waiting, `message`). Returns true if changed.
bool ApplyWaitingStatus(Json& status, std::string_view message, int64_t generation,
                        std::chrono::system_clock::time_point now);

// Writes the admitted state for a fresh placement. Always changes `status`.
void ApplyAdmittedStatus(Json& status, const model::JobPlacement& placement, int64_t generation,
                         std::chrono::system_clock::time_point now);

// Writes the invalid-spec state (Admitted False reason InvalidSpec, state Invalid). Returns
// changed.
bool ApplyInvalidStatus(Json& status, std::string_view message, int64_t generation,
                        std::chrono::system_clock::time_point now);

std::string JoinDomains(const std::vector<std::string>& domains);

// Why not every rank of a placed job runs, most specific first: PodRejected, Unschedulable,
// Misplaced, ClaimPending, ContainerWaiting, PodsPending (not bound yet), RanksNotRunning (bound
// and starting).
struct NotRunning {
  std::string_view reason;
  std::string message;
};
NotRunning NotRunningReason(const PodSummary& summary);

// A job that holds a reservation, has not finished, and whose Running condition has been False for
// at least `bound`: the reason and message of that condition, and since when.
struct Stuck {
  std::string reason;
  std::string message;
  std::string since;  // the condition's lastTransitionTime (RFC 3339)
  std::chrono::seconds age{0};
};
// The stuck rule: nullopt when the job is not stuck (or `bound` is 0: off). `*recheck_in` (if not
// null) gets the time left until it would become stuck, when its ranks are not all running.
std::optional<Stuck> StuckOf(const Json& job, std::chrono::system_clock::time_point now,
                             std::chrono::seconds bound,
                             std::optional<std::chrono::seconds>* recheck_in = nullptr);
// Stuck jobs per reason.
std::map<std::string, int, std::less<>> CountStuckJobs(const std::vector<kube::ObjectPtr>& jobs,
                                                       std::chrono::system_clock::time_point now,
                                                       std::chrono::seconds bound);

// The state a job is counted under in metrics (Metrics::kJobStates): "Recovering" while its
// Recovering condition is True and it has not finished, else status.state, "Pending" when the
// operator has not written one yet.
std::string JobMetricState(const Json& job);
// Jobs per JobMetricState().
std::map<std::string, int, std::less<>> CountJobStates(const std::vector<kube::ObjectPtr>& jobs);

}  // namespace nvl72::op
