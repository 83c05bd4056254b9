// Slimmed copies of Pods and Nodes for the informer caches of the operator and the extender.
//
// An object as the API server sends it is mostly fields no placement decision reads: managedFields,
// container images, commands, env, volumes, probes, node images and system info. In nlohmann::json a
// 3.7 kB pod takes ~26 kB of heap, so 20,000 cached pods cost ~0.5 GB; slimmed they cost a few
// kB each. Each function keeps what model::ClusterState, the operator and the extender read
// (docs/architecture.md, "What the caches keep"). Metadata is left alone: compose with
// kube::DropManagedFields for the informers' kube::ObjectTransform.
#pragma once

#include <nlohmann/json.hpp>

namespace nvl72::model {

// Keeps: metadata; spec.nodeName,
// schedulerName, priority, priorityClassName, preemptionPolicy, terminationGracePeriodSeconds,
// overhead, nodeSelector, tolerations; of each container and init container only name, resources
// and restartPolicy; status.phase, reason, message, nominatedNodeName, conditions, startTime.
void SlimPod(nlohmann::json& pod);

// Keeps: metadata; spec.unschedulable, taints;
// status.capacity, allocatable, conditions.
void SlimNode(nlohmann::json& node);

}  // namespace nvl72::model
