// Controller: wires informers (NVL72Jobs, Pods, Nodes), the work queue, reconcile workers, leader
// election and the event recorder around a Reconciler. Workers start only after the caches synced
// and, with leader election, only while leading.
//
// Health: Ready() once the caches synced (leading or standing by); Healthy() unless the workers are
// stuck (keys ready in the queue while leading, and no reconcile finished for
// Options::health_stall_seconds). While Run() runs, the metrics' collect hook reports the work
// queue, the informers, the leader flag and the jobs by state at every scrape.
//
// Thread-safety: Run() from one thread; Ready()/Healthy()/IsLeader() from any thread (health
// server).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "common/status.h"
#include "kube/client.h"
#include "operator/metrics.h"
#include "operator/options.h"

namespace nvl72::kube {
class Clock;
class WorkQueue;
}  // namespace nvl72::kube

namespace nvl72::op {

class Reconciler;

// True when workers that should be working are stuck: `leading`, `ready_keys` > 0 and the last
// reconcile finished (or the workers started) longer than `limit` ago. `limit` 0 = never.
bool WorkersStalled(bool leading, size_t ready_keys,
                    std::chrono::steady_clock::duration since_progress, std::chrono::seconds limit);

class Controller {
 public:
  // `client` and `metrics` must outlive the controller.
  Controller(kube::Client* client, Options options, Metrics* metrics);
  ~Controller();

  // Runs until `stop` is requested (OK) or leadership is lost (OK, the caller should exit) or a
  // fatal error. On stop, releases the lease (if held) and drains the workers.
  Status Run(std::stop_token stop);

  // Caches synced and either leading, standing by for the lease, or not electing.
  bool Ready() const { return ready_.load(); }
  bool Healthy() const;
  bool IsLeader() const { return leader_.load(); }

 private:
  struct Caches;  // the informers
  class Workers;  // the reconcile workers and the periodic admission pass

  void MarkProgress();
  // Steps of Run().
  void WireReconciler(Reconciler* reconciler, kube::WorkQueue* queue);
  void AttachProbes(kube::WorkQueue* queue, const Caches* caches);
  void DetachProbes();
  bool SyncCaches(std::stop_token stop, Caches* caches);
  Status RunLeaderElection(std::stop_token stop, kube::Clock* clock, const std::string& identity,
                           Workers* workers);
  void RunWithoutLeaderElection(std::stop_token stop, Workers* workers);

  kube::Client* client_;
  Options options_;
  Metrics* metrics_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> progress_ns_{0};  // steady_clock of the last finished reconcile
  mutable std::mutex queue_mu_;          // guards ready_keys_ (set and cleared by Run())
  std::function<size_t()> ready_keys_;
};

}  // namespace nvl72::op
