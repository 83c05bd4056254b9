// Cluster snapshot: the only input of the placement core.
//
// A Snapshot is a plain value built by a caller (the operator from informer caches, the extender
// from its caches, the simulator from its event state). The core never reads a clock, a file or a
// socket: everything it decides on is in here. Domain and node sizes are whatever the caller puts
// in; 18 nodes x 4 GPUs is only the callers' default.
//
// Thread-safety: a Snapshot is a value; concurrent const access is safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvl72::placement {

using NodeId = int32_t;    // index into Snapshot::nodes
using DomainId = int32_t;  // index into Snapshot::domains
inline constexpr NodeId kNoNode = -1;
inline constexpr DomainId kNoDomain = -1;

struct Node {
  std::string name;
  DomainId domain = kNoDomain;
  int gpu_capacity = 0;  // allocatable GPUs
  int gpu_used = 0;      // GPUs requested by pods on the node plus GPUs reserved for admitted gangs
  bool ready = true;     // Ready condition true (or within the caller's grace period)
  bool cordoned = false;  // spec.unschedulable
  bool tainted = false;   // a NoSchedule / NoExecute taint that GPU work does not tolerate
  // True when an admitted gang holds (part of) this node. Single pods are kept off such nodes.
  bool gang_reserved = false;
  // GPUs of gpu_used held by work the caller lets recovery evict (preemptible pods and gangs).
  // A node whose whole use is reclaimable counts toward its domain's spare reserve.
  int gpu_reclaimable = 0;
  // Fewer allocatable GPUs than a whole node of its domain has (GPUs went unhealthy): it may still
  // take smaller pods, but it is never an empty whole node, so never a spare nor a free block.
  bool degraded = false;

  // REQUIRES: nothing. A node that may take new work.
  bool Schedulable() const { return ready && !cordoned && !tainted; }
  int FreeGpus() const { return gpu_capacity > gpu_used ? gpu_capacity - gpu_used : 0; }
  // Whole node free: the unit a whole-node gang rank and a spare need.
  bool Empty() const { return gpu_used == 0 && gpu_capacity > 0 && !degraded; }
  // In use, but only by work that recovery may evict: the node can serve as a spare.
  bool Reclaimable() const { return gpu_used > 0 && gpu_reclaimable >= gpu_used; }
};

struct Domain {
  std::string name;           // e.g. the value of nvidia.com/gpu.clique
  std::vector<NodeId> nodes;  // in a stable order (the caller's; ties are broken by this order)
};

struct Snapshot {
  std::vector<Domain> domains;
  std::vector<Node> nodes;

  // Appends a domain with `node_count` empty nodes named "<name>-n<i>". Test and simulator helper.
  DomainId AddDomain(const std::string& name, int node_count, int gpus_per_node);
  // Appends one node to an existing domain.
  NodeId AddNode(DomainId domain, std::string name, int gpu_capacity);
  int TotalGpus() const;
};

}  // namespace nvl72::placement
