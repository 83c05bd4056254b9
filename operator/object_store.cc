#include "operator/object_store.h"

#include "model/names.h"

namespace nvl72::op {

const kube::ResourceRef& Nvl72JobsResource() {
  static const kube::ResourceRef kRef = kube::ResourceRef::Custom(
      std::string(model::kGroup), std::string(model::kVersion), std::string(model::kPlural),
      std::string(model::kKind), /*namespaced=*/true);
  return kRef;
}

std::vector<ObjectPtr> ClientStore::ListOf(const kube::ResourceRef& r, const std::string& ns,
                                           const std::string& selector) const {
  kube::ListOptions opts;
  opts.label_selector = selector;
  auto list = kube::ListAll(*client_, r, ns, opts);
  std::vector<ObjectPtr> out;
  if (!list.ok()) return out;
  out.reserve(list->items.size());
  for (auto& item : list->items) out.push_back(std::make_shared<const Json>(std::move(item)));
  return out;
}

std::vector<ObjectPtr> ClientStore::Jobs() const { return ListOf(Nvl72JobsResource(), ns_, ""); }

ObjectPtr ClientStore::Job(const std::string& key) const {
  auto [ns, name] = kube::SplitKey(key);
  auto got = client_->Get(Nvl72JobsResource(), ns, name);
  if (!got.ok()) return nullptr;
  return std::make_shared<const Json>(std::move(got).value());
}

std::vector<ObjectPtr> ClientStore::Pods() const { return ListOf(kube::kPods, "", ""); }

std::vector<ObjectPtr> ClientStore::PodsOfJob(const std::string& ns,
                                              const std::string& name) const {
  return ListOf(kube::kPods, ns, std::string(model::kJobLabel) + "=" + name);
}

std::vector<ObjectPtr> ClientStore::Nodes() const { return ListOf(kube::kNodes, "", ""); }

ObjectPtr ClientStore::Node(const std::string& name) const {
  auto got = client_->Get(kube::kNodes, "", name);
  if (!got.ok()) return nullptr;
  return std::make_shared<const Json>(std::move(got).value());
}

std::vector<std::string> InformerStore::IndexPodByJob(const Json& pod) {
  auto labels = kube::Labels(pod);
  auto it = labels.find(std::string(model::kJobLabel));
  if (it == labels.end() || it->second.empty()) return {};
  return {kube::Namespace(pod) + "/" + it->second};
}

}  // namespace nvl72::op
