// Stock Kubernetes gang scheduling for the gangs nvl72-operator admits: a Workload and one PodGroup
// per segment (scheduling.k8s.io, KEP-4671; v1beta1 in Kubernetes 1.37, v1alpha2 in 1.36), so that
// kube-scheduler also treats each segment as a gang (one group cycle, workload-aware preemption).
//
// What is written for job J with S segments of size K (docs/pod-groups.md):
//  - Workload "J": controllerRef NVL72Job J, one podGroupTemplate "segment" (gang minCount K);
//  - PodGroups "J-seg-0" .. "J-seg-(S-1)": workloadRef to that template, gang minCount K, the
//    template's priorityClassName, and for a Required gang the topology constraint on the domain
//    label (the API server drops it while TopologyAwareWorkloadScheduling is off);
//  - each rank pod of segment s: spec.schedulingGroup.podGroupName "J-seg-s".
// All are owned by the job (controller ownerReference), so the garbage collector deletes them with
// it; Finalize deletes them too.
//
// Thread-safety: the free functions are pure; PodGroupWriter is safe to call from many threads.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "kube/resource.h"
#include "model/cluster_state.h"
#include "model/job_spec.h"

namespace nvl72::op {

using Json = nlohmann::json;

// --pod-groups: auto = when the API server serves PodGroups; on = always (the operator refuses to
// start without them); off = never.
enum class PodGroupsMode { kAuto, kOn, kOff };
std::optional<PodGroupsMode> ParsePodGroupsMode(std::string_view name);  // "auto" | "on" | "off"

// The PodGroup API the API server serves: version "v1beta1" (1.37) or "v1alpha2" (1.36), "" when
// neither is (1.35 has only the v1alpha1 Workload, with no PodGroup resource).
struct PodGroupApi {
  std::string version;
  bool Served() const { return !version.empty(); }
  kube::ResourceRef Workloads() const;
  kube::ResourceRef PodGroups() const;
};

// Lists one PodGroup at each version, newest first: the first that answers is served; a 404 at
// every version means none is. Other errors (403: RBAC; 5xx; unreachable) are returned.
StatusOr<PodGroupApi> DiscoverPodGroupApi(kube::Client& client);

// "<job>-seg-<segment>".
std::string PodGroupName(std::string_view job_name, int segment);
// The segment of `rank`: rank / EffectiveSegmentSize().
int SegmentOfRank(const model::JobSpec& spec, int rank);

// The label of the topology constraint: the domain label for a Required gang, "" (no constraint)
// for Preferred and Unconstrained gangs (a segment may span domains) and when a fallback domain
// label is configured (nodes of one domain may then carry either label, which one constraint
// cannot say).
std::string TopologyKey(const model::JobSpec& spec, const model::ClusterOptions& cluster);

// The Workload "<job>" and the PodGroup of `segment`, in the shape of `api.version`.
Json BuildWorkload(const Json& job, const model::JobSpec& spec, const PodGroupApi& api,
                   std::string_view topology_key);
Json BuildPodGroup(const Json& job, const model::JobSpec& spec, int segment, const PodGroupApi& api,
                   std::string_view topology_key);

// The PodGroup a new pod of `rank` joins: PodGroupName of its segment when that group is in
// `ready` and every other rank pod of the segment in `pods` that is not being deleted is in that
// group too; "" otherwise. (A pod that joins a group its running peers are not in would wait for
// minCount pods forever: the pods of a job admitted before the groups existed stay without.)
std::string PodGroupToJoin(std::string_view job_name, const model::JobSpec& spec, int rank,
                           const std::vector<const Json*>& pods, const std::set<int>& ready);

// Sets spec.schedulingGroup.podGroupName of `pod` to `group` (nothing when `group` is empty or
// the template chose a group itself).
void JoinPodGroup(Json& pod, std::string_view group);

// Creates and deletes the groups of jobs, and knows which API the server serves.
class PodGroupWriter {
 public:
  struct Options {
    PodGroupsMode mode = PodGroupsMode::kAuto;
    model::ClusterOptions cluster{};  // the domain label of the topology constraint
    std::string field_manager = "nvl72-operator";
    // auto: a server that served no PodGroups is asked again after this (an API enabled later).
    std::chrono::seconds reprobe{60};
  };
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `client` must outlive the writer. `clock` defaults to steady_clock::now.
  PodGroupWriter(kube::Client* client, Options options, Clock clock = nullptr);

  // The first discovery. Mode on: an error when the server serves no PodGroup API.
  Status Start();

  // The API in use: none when off; in auto re-discovered once `reprobe` has passed since a probe
  // that found none.
  PodGroupApi Api();

  // Ensures the job's Workload and PodGroups exist (owned by this job and not being deleted).
  // Returns the segments whose PodGroup is ready to be joined (none when the API is not in use).
  // Errors mean "retry" (a transient failure). In auto mode a refusal (403, 404, 422) is logged and
  // the job goes on without groups (a 404 also sets the API aside until the next probe); in on mode
  // it is returned.
  StatusOr<std::set<int>> Ensure(const Json& job, const model::JobSpec& spec);

  // Deletes the job's Workload and PodGroups (those owned by its uid). OK when there are none.
  Status Delete(const Json& job);

 private:
  StatusOr<bool> EnsureOne(const kube::ResourceRef& resource, const Json& job, const Json& object);
  Status Refused(const Status& s, const Json& job, std::string_view what);
  void NoteTopologyDropped(const Json& written);

  kube::Client* client_;
  Options options_;
  Clock clock_;
  std::mutex mu_;
  PodGroupApi api_;                                                 // guarded by mu_
  std::optional<std::chrono::steady_clock::time_point> probed_at_;  // guarded by mu_
  bool topology_dropped_logged_ = false;                            // guarded by mu_
};

}  // namespace nvl72::op
