#include "model/slim.h"

#include <initializer_list>
#include <string_view>

#include "model/cluster_state.h"
#include "model/names.h"

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

// Annotations: only ours ("nvl72.dev/..."); others (tooling, sidecar injectors) can be large.
void KeepOwnAnnotations(Json& obj) {
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return;
  auto ann = md->find("annotations");
  if (ann == md->end() || !ann->is_object()) return;
  for (auto it = ann->begin(); it != ann->end();) {
    std::string_view k = it.key();
    const bool ours =
        k.size() > kGroup.size() && k.substr(0, kGroup.size()) == kGroup && k[kGroup.size()] == '/';
    it = ours ? std::next(it) : ann->erase(it);
  }
  if (ann->empty()) md->erase(ann);
}

// Pod labels: only ours (the job / rank / preemptible labels). Node labels all stay: a job's
// nodeSelector and node affinity may name any of them (model/feasibility.h).
void KeepOwnLabels(Json& obj) {
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return;
  auto labels = md->find("labels");
  if (labels == md->end() || !labels->is_object()) return;
  for (auto it = labels->begin(); it != labels->end();) {
    std::string_view k = it.key();
    const bool keep =
        k.size() > kGroup.size() && k.substr(0, kGroup.size()) == kGroup && k[kGroup.size()] == '/';
    it = keep ? std::next(it) : labels->erase(it);
  }
  if (labels->empty()) md->erase(labels);
}

// Conditions: only those whose type is in `types`.
void KeepConditions(Json& status, std::initializer_list<std::string_view> types) {
  auto it = status.find("conditions");
  if (it == status.end() || !it->is_array()) return;
  Json kept = Json::array();
  for (Json& c : *it) {
    if (!c.is_object()) continue;
    const std::string type = c.value("type", "");
    bool wanted = false;
    for (std::string_view t : types) wanted = wanted || type == t;
    if (wanted) kept.push_back(std::move(c));
  }
  if (kept.empty()) {
    status.erase(it);
  } else {
    *it = std::move(kept);
  }
}

// Containers: what their requests need (every resource: a node's use counts them all).
void SlimContainers(Json& spec, const char* field) {
  auto it = spec.find(field);
  if (it == spec.end() || !it->is_array()) return;
  for (Json& c : *it) {
    KeepOnly(c, {"name", "resources", "restartPolicy"});
    if (!c.is_object()) continue;
    auto res = c.find("resources");
    if (res != c.end()) KeepOnly(*res, {"requests", "limits"});
  }
}

// Metadata an informer and our code need; the rest (generateName, timestamps, finalizers) is never
// read from a cached pod or node. Of ownerReferences only uid and controller stay: a job's deletion
// deletes only the pods it still controls (kube::ControllerUid).
void SlimMetadata(Json& obj) {
  auto md = obj.find("metadata");
  if (md == obj.end()) return;
  KeepOnly(*md, {"name", "namespace", "uid", "resourceVersion", "labels", "annotations",
                 "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences"});
  if (auto refs = md->find("ownerReferences"); refs != md->end() && refs->is_array()) {
    for (auto& ref : *refs) KeepOnly(ref, {"uid", "controller"});
  }
}

}  // namespace

void SlimPod(Json& pod, const ClusterOptions& /*options*/) {
  if (!pod.is_object()) return;
  KeepOnly(pod, {"metadata", "spec", "status"});
  SlimMetadata(pod);
  KeepOwnLabels(pod);
  KeepOwnAnnotations(pod);
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    KeepOnly(*spec, {"nodeName", "schedulerName", "priority", "terminationGracePeriodSeconds",
                     "containers", "initContainers", "overhead", "schedulingGroup"});
    SlimContainers(*spec, "containers");
    SlimContainers(*spec, "initContainers");
  }
  if (auto status = pod.find("status"); status != pod.end() && status->is_object()) {
    KeepOnly(*status, {"phase", "reason", "nominatedNodeName", "conditions"});
    // PodScheduled: kube-scheduler's verdict on an unbound rank (the operator's safety net).
    KeepConditions(*status, {"DisruptionTarget", "PodScheduled"});
  }
}

void SlimNode(Json& node, const ClusterOptions& /*options*/) {
  if (!node.is_object()) return;
  KeepOnly(node, {"metadata", "spec", "status"});
  SlimMetadata(node);
  KeepOwnAnnotations(node);
  if (auto spec = node.find("spec"); spec != node.end())
    KeepOnly(*spec, {"unschedulable", "taints"});
  if (auto status = node.find("status"); status != node.end() && status->is_object()) {
    KeepOnly(*status, {"allocatable", "conditions"});
    KeepConditions(*status, {"Ready"});
  }
}

}  // namespace nvl72::model
