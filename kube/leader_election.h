// LeaderElector: leader election on a coordination.k8s.io/v1 Lease (client-go leaderelection).
//
// Protocol: a candidate reads the Lease; it may take it when the lease is free (no holder), held by
// itself, or expired: the candidate has not seen the lease record change for leaseDurationSeconds
// of its OWN monotonic clock (like client-go: no comparison of wall clocks across machines). Writes
// use the read resourceVersion, so two candidates racing for it cannot both win (409 for the
// loser). The leader renews every retry_period; if it cannot renew for renew_deadline it steps
// down. On Stop (or stop_token) the leader releases the lease (empty holder, leaseDurationSeconds
// 1) so a successor does not wait for expiry.
//
// Timestamps written: acquireTime/renewTime as MicroTime "2006-01-02T15:04:05.000000Z".
//
// Callbacks run on the thread that called Run(); OnStartedLeading must return promptly (start your
// workers there); OnStoppedLeading is called exactly once per leadership term, after losing or
// releasing it: stop doing leader work (most processes exit).
//
// Thread-safety: Run() from one thread at a time; IsLeader()/LeaderIdentity() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>

#include "kube/client.h"
#include "kube/clock.h"

namespace nvl72::kube {

struct LeaderElectionConfig {
  std::string lease_namespace{};
  std::string lease_name{};
  std::string identity{};  // unique per candidate, e.g. pod name + "_" + random
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  bool release_on_cancel = true;
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)>
      on_new_leader;  // optional; observed holder change
};

// REQUIRES of a valid config: names and identity non-empty; lease_duration > renew_deadline >
// retry_period * 1.2 > 0 (client-go's JitterFactor).
Status ValidateLeaderElectionConfig(const LeaderElectionConfig& config);

class LeaderElector {
 public:
  // `client` and `clock` must outlive the elector. REQUIRES: config valid (checked in Run()).
  LeaderElector(Client* client, Clock* clock, LeaderElectionConfig config);

  // Campaigns until leader, leads until leadership is lost or `stop` is requested, then returns.
  // Returns kInvalidArgument for a bad config, kCancelled if stopped, OK if leadership was lost
  // (callers usually exit the process then).
  Status Run(std::stop_token stop);

  bool IsLeader() const { return is_leader_.load(); }
  std::string LeaderIdentity() const;

  // One attempt to acquire or renew; true if we hold the lease afterwards. Exposed for tests.
  bool TryAcquireOrRenew();
  // Gives the lease up if we hold it. Exposed for tests; Run() calls it on stop.
  Status Release();

 private:
  bool SleepUnlessStopped(Clock::Duration d, std::stop_token stop);
  Json LeaseObject(const Json& spec) const;
  // Records the Lease as read (its record times expiry when it changed) and reports a new holder;
  // true if someone else holds it unexpired.
  bool ObserveHeldByOther(const Json& lease, const Json& spec, const std::string& holder,
                          int64_t record_duration);
  // Records a Lease we wrote holding ourselves (created or renewed). Non-const: a missing spec
  // reads as null, as operator[] does.
  void AdoptOwnLease(Json& lease);

  Client* client_;
  Clock* clock_;
  LeaderElectionConfig config_;
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::atomic<bool> is_leader_{false};

  mutable std::mutex mu_;
  Json observed_record_;     // spec of the Lease as last read/written
  std::string observed_rv_;  // its resourceVersion
  bool have_observed_ = false;
  Clock::TimePoint observed_time_{};
  std::string leader_identity_;
};

}  // namespace nvl72::kube
