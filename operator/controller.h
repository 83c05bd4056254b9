// Controller: wires informers (NVL72Jobs, Pods, Nodes), the work queue, reconcile workers, leader
// election and the event recorder around a Reconciler. Workers start only after the caches synced
// and, with leader election, only while leading.
//
// Thread-safety: Run() from one thread; Ready()/Healthy()/IsLeader() from any thread (health server).
#pragma once

#include <atomic>
#include <memory>
#include <stop_token>
#include <string>

#include "common/status.h"
#include "kube/client.h"
#include "operator/metrics.h"
#include "operator/options.h"

namespace nvl72::op {

class Controller {
 public:
  // `client` and `metrics` must outlive the controller.
  Controller(kube::Client* client, Options options, Metrics* metrics);
  ~Controller();

  // Runs until `stop` is requested (OK) or leadership is lost (OK, the caller should exit) or a fatal
  // error. On stop, releases the lease (if held) and drains the workers.
  Status Run(std::stop_token stop);

  // Caches synced and either leading, standing by for the lease, or not electing.
  bool Ready() const { return ready_.load(); }
  bool Healthy() const { return healthy_.load(); }
  bool IsLeader() const { return leader_.load(); }

 private:
  kube::Client* client_;
  Options options_;
  Metrics* metrics_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> healthy_{true};
  std::atomic<bool> leader_{false};
};

}  // namespace nvl72::op
