// ObjectStore: the read side of the operator. The reconciler reads NVL72Jobs, Pods and Nodes only
// through this interface, so that production reads informer caches and unit tests and benchmarks
// can read a kube::Client directly (always fresh, deterministic).
//
// Objects are shared and read-only: copy before modifying.
// Thread-safety: implementations are safe to call from many threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"

namespace nvl72::op {

using kube::Json;
using kube::ObjectPtr;

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // NVL72Jobs of the watched namespace(s).
  virtual std::vector<ObjectPtr> Jobs() const = 0;
  // By key "namespace/name"; nullptr if absent.
  virtual ObjectPtr Job(const std::string& key) const = 0;
  // Every pod of the cluster (GPU usage counts across namespaces).
  virtual std::vector<ObjectPtr> Pods() const = 0;
  // Pods labelled nvl72.dev/job=<name> in `ns`.
  virtual std::vector<ObjectPtr> PodsOfJob(const std::string& ns,
                                           const std::string& name) const = 0;
  virtual std::vector<ObjectPtr> Nodes() const = 0;
  // By name; nullptr if absent.
  virtual ObjectPtr Node(const std::string& name) const = 0;
};

// Reads through a Client on every call (List/Get). For tests and benchmarks.
class ClientStore : public ObjectStore {
 public:
  // `client` must outlive the store. `ns` "" = all namespaces for jobs.
  ClientStore(kube::Client* client, std::string ns) : client_(client), ns_(std::move(ns)) {}
  std::vector<ObjectPtr> Jobs() const override;
  ObjectPtr Job(const std::string& key) const override;
  std::vector<ObjectPtr> Pods() const override;
  std::vector<ObjectPtr> PodsOfJob(const std::string& ns, const std::string& name) const override;
  std::vector<ObjectPtr> Nodes() const override;
  ObjectPtr Node(const std::string& name) const override;

 private:
  std::vector<ObjectPtr> ListOf(const kube::ResourceRef& r, const std::string& ns,
                                const std::string& selector) const;
  kube::Client* client_;
  std::string ns_;
};

// Reads informer caches. Pods must be indexed with kJobIndex (IndexPodByJob).
class InformerStore : public ObjectStore {
 public:
  static constexpr const char* kJobIndex = "nvl72-job";
  // Index function for the pod informer: "namespace/job" for pods with label nvl72.dev/job.
  static std::vector<std::string> IndexPodByJob(const Json& pod);

  // The informers must outlive the store.
  InformerStore(const kube::Informer* jobs, const kube::Informer* pods, const kube::Informer* nodes)
      : jobs_(jobs), pods_(pods), nodes_(nodes) {}
  std::vector<ObjectPtr> Jobs() const override { return jobs_->List(); }
  ObjectPtr Job(const std::string& key) const override { return jobs_->Get(key); }
  std::vector<ObjectPtr> Pods() const override { return pods_->List(); }
  std::vector<ObjectPtr> PodsOfJob(const std::string& ns, const std::string& name) const override {
    return pods_->ByIndex(kJobIndex, ns + "/" + name);
  }
  std::vector<ObjectPtr> Nodes() const override { return nodes_->List(); }
  ObjectPtr Node(const std::string& name) const override { return nodes_->Get(name); }

 private:
  const kube::Informer* jobs_;
  const kube::Informer* pods_;
  const kube::Informer* nodes_;
};

// The NVL72Job resource.
const kube::ResourceRef& Nvl72JobsResource();

}  // namespace nvl72::op
