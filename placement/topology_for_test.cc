#include "placement/topology_for_test.h"

#include <cassert>
#include <sstream>
#include <string>

namespace nvl72::placement {

Snapshot ParseTopology(std::string_view drawing, int gpus_per_node) {
  Snapshot s;
  std::istringstream lines{std::string(drawing)};
  std::string line;
  while (std::getline(lines, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(" \t"));
    const DomainId dom = s.AddDomain(name, 0, gpus_per_node);
    std::istringstream tokens(line.substr(colon + 1));
    std::string tok;
    int i = 0;
    while (tokens >> tok) {
      const NodeId id = s.AddNode(dom, name + "-n" + std::to_string(i++), gpus_per_node);
      Node& n = s.nodes[static_cast<size_t>(id)];
      const char c = tok[0];
      if (c >= '0' && c <= '9') {
        n.gpu_used = c - '0';
      } else if (c == 'X') {
        n.ready = false;
      } else if (c == 'C') {
        n.cordoned = true;
      } else if (c == 'T') {
        n.tainted = true;
      } else if (c == 'P') {
        n.gpu_used = gpus_per_node;
        n.gpu_reclaimable = gpus_per_node;
      } else if (c == 'R') {
        n.gang_reserved = true;
        n.gpu_used = gpus_per_node;
      } else {
        assert(c == '.' && "unknown topology token");
      }
    }
  }
  return s;
}

}  // namespace nvl72::placement
