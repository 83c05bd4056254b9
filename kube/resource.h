// ResourceRef: which REST collection a call addresses (group/version/resource + scope), and the
// URL paths derived from it. Constants for the built-in resources the project uses; a CRD resource
// is described the same way, e.g.
//   const ResourceRef kNvl72Jobs = ResourceRef::Custom("nvl72.dev", "v1alpha1", "nvl72jobs",
//                                                      "NVL72Job", /*namespaced=*/true);
// Thread-safety: values.
#pragma once

#include <string>
#include <string_view>

namespace nvl72::kube {

struct ResourceRef {
  std::string group{};     // "" for the core group (served under /api), else e.g. "apps"
  std::string version{};   // "v1", "v1alpha1"
  std::string resource{};  // lower-case plural: "pods", "nvl72jobs"
  std::string kind{};      // "Pod": used for apiVersion/kind defaults and messages
  bool namespaced = true;

  static ResourceRef Custom(std::string group, std::string version, std::string resource,
                            std::string kind, bool namespaced) {
    return ResourceRef{std::move(group), std::move(version), std::move(resource), std::move(kind),
                       namespaced};
  }

  // "v1" for core, "group/version" otherwise: the value of an object's apiVersion.
  std::string ApiVersion() const;
  // "/api/v1" or "/apis/<group>/<version>".
  std::string BasePath() const;
  // Collection URL path. `ns` is ignored for cluster-scoped resources; for a namespaced resource an
  // empty `ns` means "all namespaces" (valid for List and Watch only).
  std::string CollectionPath(std::string_view ns) const;
  // Object URL path, optionally with a subresource ("status", "binding", "eviction").
  // REQUIRES: !name.empty(); !ns.empty() if namespaced.
  std::string ObjectPath(std::string_view ns, std::string_view name,
                         std::string_view subresource = "") const;
  // "pods" or "nvl72jobs.nvl72.dev": for messages.
  std::string DisplayName() const;

  bool operator==(const ResourceRef& o) const {
    return group == o.group && version == o.version && resource == o.resource;
  }
};

// Built-in resources.
extern const ResourceRef kPods;                       // v1 pods (namespaced)
extern const ResourceRef kNodes;                      // v1 nodes (cluster)
extern const ResourceRef kServices;                   // v1 services
extern const ResourceRef kConfigMaps;                 // v1 configmaps
extern const ResourceRef kSecrets;                    // v1 secrets
extern const ResourceRef kNamespaces;                 // v1 namespaces (cluster)
extern const ResourceRef kCoreEvents;                 // v1 events (legacy)
extern const ResourceRef kEvents;                     // events.k8s.io/v1 events
extern const ResourceRef kLeases;                     // coordination.k8s.io/v1 leases
extern const ResourceRef kCustomResourceDefinitions;  // apiextensions.k8s.io/v1 (cluster)
extern const ResourceRef kPriorityClasses;            // scheduling.k8s.io/v1 (cluster)

}  // namespace nvl72::kube
