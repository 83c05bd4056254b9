// Names shared by the operator, the scheduler extender and the CRD: API group, labels, annotations,
// resource names, condition types. One place so that the pieces can never disagree.
// Thread-safety: constants.
#pragma once

#include <string_view>

namespace nvl72::model {

// --- API ---
inline constexpr std::string_view kGroup = "nvl72.dev";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "nvl72.dev/v1alpha1";
inline constexpr std::string_view kKind = "NVL72Job";
inline constexpr std::string_view kPlural = "nvl72jobs";
inline constexpr std::string_view kShortName = "nvj";

// --- labels / annotations on pods created for a job ---
inline constexpr std::string_view kJobLabel = "nvl72.dev/job";  // value: job name (same namespace)
inline constexpr std::string_view kRankLabel = "nvl72.dev/rank";       // value: decimal rank
inline constexpr std::string_view kNodeAnnotation = "nvl72.dev/node";  // value: planned node name
// Optional job annotation: integer priority; overrides the template's PriorityClass value.
inline constexpr std::string_view kPriorityAnnotation = "nvl72.dev/priority";
// Finalizer on admitted jobs: the reservation is released before the job object goes away.
inline constexpr std::string_view kReservationFinalizer = "nvl72.dev/reservation";

// --- nodes ---
// NoExecute taints of kube-controller-manager's node lifecycle controller: a node whose Ready
// condition is False (not-ready) or Unknown (unreachable: no heartbeat). Rank pods tolerate both
// without a time limit (BuildRankPod), so taint-based eviction never removes a rank: the job's
// spec.recovery.notReadyGraceSeconds on the Ready condition alone decides when a rank moves, and
// only the operator moves it. Other NoExecute taints fail a rank at once.
inline constexpr std::string_view kTaintNodeNotReady = "node.kubernetes.io/not-ready";
inline constexpr std::string_view kTaintNodeUnreachable = "node.kubernetes.io/unreachable";
inline constexpr std::string_view kRankToleratedNoExecuteTaints[] = {kTaintNodeNotReady,
                                                                     kTaintNodeUnreachable};
inline constexpr std::string_view kDefaultDomainLabel = "nvidia.com/gpu.clique";
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
// Set by NVIDIA's DRA driver on a node that serves a ComputeDomain (value: its uid), while a
// channel claim of it is prepared there. A node serves one ComputeDomain at a time, so a node with
// this label is not free for the rank of another gang (model/job_nodes.h).
inline constexpr std::string_view kComputeDomainNodeLabel = "resource.nvidia.com/computeDomain";

// --- scheduling ---
inline constexpr std::string_view kSchedulerName = "nvl72-scheduler";

// --- environment of rank pods ---
inline constexpr std::string_view kEnvRank = "NVL72_RANK";
inline constexpr std::string_view kEnvWorldSize = "NVL72_WORLD_SIZE";
inline constexpr std::string_view kEnvMasterAddr = "MASTER_ADDR";
inline constexpr std::string_view kEnvMasterPort = "MASTER_PORT";
inline constexpr int kDefaultMasterPort = 29500;

// --- NVL72Job status condition types ---
inline constexpr std::string_view kConditionAdmitted = "Admitted";
inline constexpr std::string_view kConditionPlaced = "Placed";
inline constexpr std::string_view kConditionRunning = "Running";
inline constexpr std::string_view kConditionSucceeded = "Succeeded";
inline constexpr std::string_view kConditionFailed = "Failed";
inline constexpr std::string_view kConditionRecovering = "Recovering";
// How the operator's reason starts when a job with spec.fabric ComputeDomain waits because the API
// server serves no ComputeDomains (or --compute-domains=off); `kubectl nvl72 explain` tells it
// apart.
inline constexpr std::string_view kFabricUnavailable = "spec.fabric is ComputeDomain, but ";
// The job's ComputeDomains (one per segment) are Ready (operator/compute_domains.h).
inline constexpr std::string_view kConditionComputeDomainReady = "ComputeDomainReady";

// Defaults of a domain (one GB200 NVL72 rack) used by spec validation.
inline constexpr int kDefaultDomainNodes = 18;
inline constexpr int kMaxGpusPerNode = 8;

}  // namespace nvl72::model
