#include "placement/snapshot.h"

#include <utility>

namespace nvl72::placement {

DomainId Snapshot::AddDomain(const std::string& name, int node_count, int gpus_per_node) {
  const auto id = static_cast<DomainId>(domains.size());
  domains.push_back(Domain{name, {}});
  for (int i = 0; i < node_count; ++i) {
    AddNode(id, name + "-n" + std::to_string(i), gpus_per_node);
  }
  return id;
}

NodeId Snapshot::AddNode(DomainId domain, std::string name, int gpu_capacity) {
  const auto id = static_cast<NodeId>(nodes.size());
  Node node;
  node.name = std::move(name);
  node.domain = domain;
  node.gpu_capacity = gpu_capacity;
  nodes.push_back(std::move(node));
  domains[static_cast<size_t>(domain)].nodes.push_back(id);
  return id;
}

int Snapshot::TotalGpus() const {
  int total = 0;
  for (const Node& n : nodes) total += n.gpu_capacity;
  return total;
}

}  // namespace nvl72::placement
