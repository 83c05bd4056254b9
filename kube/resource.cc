#include "kube/resource.h"

#include <cassert>

namespace nvl72::kube {

std::string ResourceRef::ApiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

std::string ResourceRef::BasePath() const {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string ResourceRef::CollectionPath(std::string_view ns) const {
  std::string path = BasePath();
  if (namespaced && !ns.empty()) {
    path += "/namespaces/";
    path += ns;
  }
  path += "/";
  path += resource;
  return path;
}

std::string ResourceRef::ObjectPath(std::string_view ns, std::string_view name,
                                    std::string_view subresource) const {
  assert(!name.empty());
  std::string path = CollectionPath(ns);
  path += "/";
  path += name;
  if (!subresource.empty()) {
    path += "/";
    path += subresource;
  }
  return path;
}

std::string ResourceRef::DisplayName() const {
  return group.empty() ? resource : resource + "." + group;
}

const ResourceRef kPods{"", "v1", "pods", "Pod", true};
const ResourceRef kNodes{"", "v1", "nodes", "Node", false};
const ResourceRef kServices{"", "v1", "services", "Service", true};
const ResourceRef kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
const ResourceRef kSecrets{"", "v1", "secrets", "Secret", true};
const ResourceRef kNamespaces{"", "v1", "namespaces", "Namespace", false};
const ResourceRef kCoreEvents{"", "v1", "events", "Event", true};
const ResourceRef kEvents{"events.k8s.io", "v1", "events", "Event", true};
const ResourceRef kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const ResourceRef kCustomResourceDefinitions{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false};
const ResourceRef kPriorityClasses{"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass",
                                   false};

}  // namespace nvl72::kube
