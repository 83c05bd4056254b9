// Fragmentation measures per domain and for the whole cluster.
//
// "Stranded" GPUs are free, healthy GPUs that no job shape of a given workload mix can use: a
// partial-node shape (a single pod of g GPUs) can use a node with >= g free GPUs; a whole-node gang
// shape of k nodes can use the empty nodes of a domain only if that domain has >= k of them (after
// the spare reserve). The mix is the caller's (the simulator passes the shapes of waiting jobs).
// Pure functions of a Snapshot; thread-safe.
#pragma once

#include <span>
#include <vector>

#include "placement/snapshot.h"

namespace nvl72::placement {

// One job shape of the workload mix.
struct JobShape {
  int nodes = 1;          // 1 for a single pod, k for a gang of k ranks that wants one domain
  int gpus_per_node = 1;  // GPUs of one pod / one rank
};

struct DomainStats {
  int nodes = 0;
  int healthy_nodes = 0;       // Schedulable
  int gpus_total = 0;          // capacity of all nodes
  int gpus_healthy = 0;        // capacity of Schedulable nodes
  int gpus_used = 0;           // used on all nodes
  int gpus_free = 0;           // free on Schedulable nodes
  int empty_nodes = 0;         // Schedulable, empty, not gang-reserved
  int spare_nodes = 0;         // empty nodes held back as spares (HeldBackSpares)
  int gpus_spare = 0;          // GPUs on the spare nodes
  int largest_gang_nodes = 0;  // empty_nodes - spare_nodes: whole-node ranks a new gang may get
  int stranded_gpus = 0;       // free GPUs that no shape of the mix can use
};

struct ClusterStats {
  std::vector<DomainStats> domains;  // indexed by DomainId
  int gpus_healthy = 0;
  int gpus_free = 0;
  int stranded_gpus = 0;
  int largest_gang_nodes = 0;  // max over domains
  // 1 - largest free block / all free whole nodes (0 when nothing is free): how far the free
  // whole-node capacity is from sitting in one domain.
  double fragmentation = 0.0;
};

ClusterStats ComputeStats(const Snapshot& snapshot, int spares_per_domain,
                          std::span<const JobShape> mix);

}  // namespace nvl72::placement
