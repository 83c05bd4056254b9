#include "model/slim.h"

#include <initializer_list>
#include <string_view>

namespace nvl72::model {
namespace {

using Json = nlohmann::json;

// Erases every key of `obj` not in `keep`.
void KeepOnly(Json& obj, std::initializer_list<std::string_view> keep) {
  if (!obj.is_object()) return;
  for (auto it = obj.begin(); it != obj.end();) {
    bool kept = false;
    for (std::string_view k : keep) kept = kept || it.key() == k;
    it = kept ? std::next(it) : obj.erase(it);
  }
}

void SlimContainers(Json& spec, const char* field) {
  auto it = spec.find(field);
  if (it == spec.end() || !it->is_array()) return;
  for (Json& c : *it) KeepOnly(c, {"name", "resources", "restartPolicy"});
}

}  // namespace

void SlimPod(Json& pod) {
  if (!pod.is_object()) return;
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    KeepOnly(*spec, {"nodeName", "schedulerName", "priority", "priorityClassName", "preemptionPolicy",
                     "terminationGracePeriodSeconds", "overhead", "nodeSelector", "tolerations",
                     "containers", "initContainers"});
    SlimContainers(*spec, "containers");
    SlimContainers(*spec, "initContainers");
  }
  if (auto status = pod.find("status"); status != pod.end()) {
    KeepOnly(*status, {"phase", "reason", "message", "nominatedNodeName", "conditions", "startTime"});
  }
}

void SlimNode(Json& node) {
  if (!node.is_object()) return;
  if (auto spec = node.find("spec"); spec != node.end()) KeepOnly(*spec, {"unschedulable", "taints"});
  if (auto status = node.find("status"); status != node.end()) {
    KeepOnly(*status, {"capacity", "allocatable", "conditions"});
  }
}

}  // namespace nvl72::model
