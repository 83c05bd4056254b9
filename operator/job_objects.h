// Pure builders of the objects the operator writes for an NVL72Job: rank pods, the headless Service,
// status conditions and the status summary derived from the rank pods.
// Thread-safety: pure functions over values.
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

// The pod of `rank`: spec.template plus name "<job>-<rank>", labels nvl72.dev/job + nvl72.dev/rank,
// annotation nvl72.dev/node = planned node, controller ownerReference to the job, env NVL72_RANK,
// NVL72_WORLD_SIZE, MASTER_ADDR (<job>-0.<job>.<ns>.svc), MASTER_PORT in every container,
// hostname/subdomain for rank DNS, schedulerName nvl72-scheduler, model::RankTolerations (the GPU
// resource's NoSchedule taint, the node lifecycle NoExecute taints), a required node affinity on
// kubernetes.io/hostname = planned node (ANDed into every existing required term), restartPolicy
// Never unless the template sets one, and `gpus_per_replica` GPUs on the first container when no
// container asks for any.
Json BuildRankPod(const Json& job, const model::JobSpec& spec, const model::RankAssignment& rank,
                  int master_port, std::string_view gpu_resource);

// Headless Service "<job>" selecting the job's pods (publishNotReadyAddresses) for rank DNS.
Json BuildHeadlessService(const Json& job, int master_port);

// Sets condition `type` in status.conditions. lastTransitionTime moves only when `status` changes.
// Returns true if anything changed.
bool SetCondition(Json& status, std::string_view type, std::string_view cond_status,
                  std::string_view reason, std::string_view message, int64_t generation,
                  std::chrono::system_clock::time_point now);

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
  // The first rank kube-scheduler refuses (model::UnschedulableCondition): "rank 3 on <node>: <its
  // message>"; the safety net re-plans the gang if it lasts (operator/safety_net.h).
  std::string refused;
};
// `pods` are the job's pods (any order; pods that are no rank of this placement are ignored).
PodSummary SummarizePods(const model::JobPlacement& placement, const std::vector<const Json*>& pods);

// Writes the conditions and summary fields (state, domains, observedGeneration) of a placed job into
// `status` from `summary`. Returns true if anything changed.
bool ApplyPlacedStatus(Json& status, const model::JobPlacement& placement, const PodSummary& summary,
                       int64_t generation, std::chrono::system_clock::time_point now);

// Writes the waiting state (Admitted False, reason Waiting, `message`). Returns true if changed.
bool ApplyWaitingStatus(Json& status, std::string_view message, int64_t generation,
                        std::chrono::system_clock::time_point now);

// Writes the admitted state for a fresh placement. Always changes `status`.
void ApplyAdmittedStatus(Json& status, const model::JobPlacement& placement, int64_t generation,
                         std::chrono::system_clock::time_point now);

// Writes the invalid-spec state (Admitted False reason InvalidSpec, state Invalid). Returns changed.
bool ApplyInvalidStatus(Json& status, std::string_view message, int64_t generation,
                        std::chrono::system_clock::time_point now);

std::string JoinDomains(const std::vector<std::string>& domains);

// The state a job is counted under in metrics (Metrics::kJobStates): "Recovering" while its
// Recovering condition is True and it has not finished, else status.state, "Pending" when the
// operator has not written one yet.
std::string JobMetricState(const Json& job);
// Jobs per JobMetricState().
std::map<std::string, int, std::less<>> CountJobStates(const std::vector<kube::ObjectPtr>& jobs);

}  // namespace nvl72::op
