#include "placement/fragmentation.h"

#include <algorithm>

#include "placement/policy.h"

namespace nvl72::placement {

ClusterStats ComputeStats(const Snapshot& s, int spares_per_domain, std::span<const JobShape> mix) {
  ClusterStats out;
  out.domains.resize(s.domains.size());
  for (const Node& n : s.nodes) {
    if (n.domain == kNoDomain) continue;
    DomainStats& d = out.domains[static_cast<size_t>(n.domain)];
    ++d.nodes;
    d.gpus_total += n.gpu_capacity;
    d.gpus_used += std::min(n.gpu_used, n.gpu_capacity);
    if (!n.Schedulable()) continue;
    ++d.healthy_nodes;
    d.gpus_healthy += n.gpu_capacity;
    d.gpus_free += n.FreeGpus();
    if (n.Empty() && !n.gang_reserved) ++d.empty_nodes;
  }
  // Smallest single-pod shape and smallest gang shape of the mix decide what is usable.
  int min_pod_gpus = 0, min_gang_nodes = 0;
  for (const JobShape& shape : mix) {
    if (shape.nodes <= 1) {
      min_pod_gpus =
          min_pod_gpus == 0 ? shape.gpus_per_node : std::min(min_pod_gpus, shape.gpus_per_node);
    } else {
      min_gang_nodes = min_gang_nodes == 0 ? shape.nodes : std::min(min_gang_nodes, shape.nodes);
    }
  }
  const std::vector<bool> spare = DesignatedSpares(s, spares_per_domain);
  int free_blocks_total = 0;
  for (size_t i = 0; i < out.domains.size(); ++i) {
    DomainStats& d = out.domains[i];
    d.spare_nodes =
        std::min(d.empty_nodes, HeldBackSpares(s, static_cast<DomainId>(i), spares_per_domain));
    d.largest_gang_nodes = d.empty_nodes - d.spare_nodes;
    free_blocks_total += d.largest_gang_nodes;
    out.largest_gang_nodes = std::max(out.largest_gang_nodes, d.largest_gang_nodes);
    out.gpus_healthy += d.gpus_healthy;
    out.gpus_free += d.gpus_free;
  }
  for (size_t id = 0; id < s.nodes.size(); ++id) {
    const Node& n = s.nodes[id];
    if (n.domain == kNoDomain || !n.Schedulable() || n.FreeGpus() == 0) continue;
    DomainStats& d = out.domains[static_cast<size_t>(n.domain)];
    if (spare[id]) {
      d.gpus_spare += n.gpu_capacity;
      continue;
    }
    if (mix.empty()) continue;  // no demand: nothing is stranded
    const bool pod_fits = min_pod_gpus > 0 && n.FreeGpus() >= min_pod_gpus;
    const bool gang_fits = min_gang_nodes > 0 && n.Empty() && !n.gang_reserved &&
                           d.largest_gang_nodes >= min_gang_nodes;
    if (!pod_fits && !gang_fits) d.stranded_gpus += n.FreeGpus();
  }
  for (const DomainStats& d : out.domains) out.stranded_gpus += d.stranded_gpus;
  out.fragmentation = free_blocks_total == 0
                          ? 0.0
                          : 1.0 - static_cast<double>(out.largest_gang_nodes) / free_blocks_total;
  return out;
}

}  // namespace nvl72::placement
