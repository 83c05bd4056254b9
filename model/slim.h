// Slimmed copies of Pods and Nodes for the informer caches of the operator and the extender.
//
// An object as the API server sends it is mostly fields no placement decision reads: managedFields,
// container images, commands, env, volumes, probes, other labels, node images and system info. In
// nlohmann::json a 3.8 kB pod takes ~26 kB of heap, so 20,000 cached pods cost ~0.5 GB. Each
// function keeps only what model::ClusterState, the operator and the extender read (docs/
// architecture.md, "The caches keep slim objects"); it is a kube::ObjectTransform once bound to the
// options. Adding a read of another field of a cached pod or node means adding it here.
#pragma once

#include <nlohmann/json.hpp>

#include "model/cluster_state.h"

namespace nvl72::model {

// Keeps metadata.name, namespace, uid, resourceVersion, deletionTimestamp,
// deletionGracePeriodSeconds, the nvl72.dev/ labels and annotations; spec.nodeName,
// schedulerName, priority, terminationGracePeriodSeconds, overhead, schedulingGroup (the PodGroup a
// rank pod joined: operator/pod_groups.h); of each container and init
// container name, restartPolicy and the requests / limits of every resource (a node's use counts
// them all); status.phase, reason, nominatedNodeName and the DisruptionTarget and PodScheduled
// conditions. Pods are never written back from a cache.
void SlimPod(nlohmann::json& pod, const ClusterOptions& options);

// Keeps metadata.name, uid, resourceVersion, deletionTimestamp, every label (a job's nodeSelector
// and node affinity may name any) and the nvl72.dev/ annotations; spec.unschedulable, taints;
// status.allocatable (every resource) and the Ready condition.
void SlimNode(nlohmann::json& node, const ClusterOptions& options);

}  // namespace nvl72::model
