#include "kube/leader_election.h"

#include <random>

namespace nvl72::kube {

Status ValidateLeaderElectionConfig(const LeaderElectionConfig& c) {
  auto bad = [](const std::string& m) {
    return Status(StatusCode::kInvalidArgument, "leader election: " + m);
  };
  if (c.lease_namespace.empty() || c.lease_name.empty())
    return bad("lease namespace and name are required");
  if (c.identity.empty()) return bad("identity is required");
  if (c.retry_period.count() <= 0) return bad("retry_period must be > 0");
  if (c.lease_duration <= c.renew_deadline)
    return bad("lease_duration must be greater than renew_deadline");
  if (c.renew_deadline.count() <=
      static_cast<int64_t>(1.2 * static_cast<double>(c.retry_period.count()))) {
    return bad("renew_deadline must be greater than retry_period * 1.2");
  }
  return Status::Ok();
}

LeaderElector::LeaderElector(Client* client, Clock* clock, LeaderElectionConfig config)
    : client_(client), clock_(clock), config_(std::move(config)) {}

std::string LeaderElector::LeaderIdentity() const {
  std::lock_guard<std::mutex> l(mu_);
  return leader_identity_;
}

Json LeaderElector::LeaseObject(const Json& spec) const {
  return Json{{"apiVersion", kLeases.ApiVersion()},
              {"kind", "Lease"},
              {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
              {"spec", spec}};
}

bool LeaderElector::TryAcquireOrRenew() {
  const std::string now = FormatMicroTime(clock_->WallNow());
  const int64_t duration_s =
      std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count();
  Json desired = {{"holderIdentity", config_.identity},
                  {"leaseDurationSeconds", duration_s},
                  {"acquireTime", now},
                  {"renewTime", now},
                  {"leaseTransitions", 0}};

  auto current = client_->Get(kLeases, config_.lease_namespace, config_.lease_name);
  if (!current.ok()) {
    if (!IsNotFound(current.status())) return false;
    auto created = client_->Create(kLeases, config_.lease_namespace, LeaseObject(desired));
    if (!created.ok()) return false;
    AdoptOwnLease(*created);
    return true;
  }

  Json spec = current->contains("spec") ? (*current)["spec"] : Json::object();
  std::string holder = spec.value("holderIdentity", "");
  int64_t record_duration = spec.value("leaseDurationSeconds", duration_s);
  if (ObserveHeldByOther(*current, spec, holder, record_duration)) return false;

  int64_t transitions = spec.value("leaseTransitions", int64_t{0});
  if (holder == config_.identity) {
    if (spec.contains("acquireTime")) desired["acquireTime"] = spec["acquireTime"];
    desired["leaseTransitions"] = transitions;
  } else {
    desired["leaseTransitions"] = transitions + 1;
  }
  Json lease = *current;
  lease["spec"] = desired;
  auto updated = client_->Update(kLeases, config_.lease_namespace, lease);
  if (!updated.ok()) return false;
  AdoptOwnLease(*updated);
  return true;
}

bool LeaderElector::ObserveHeldByOther(const Json& lease, const Json& spec,
                                       const std::string& holder, int64_t record_duration) {
  std::string new_leader;
  bool held_by_other;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!have_observed_ || observed_record_ != spec) {
      observed_record_ = spec;
      observed_rv_ = ResourceVersion(lease);
      observed_time_ = clock_->Now();
      have_observed_ = true;
    }
    if (holder != leader_identity_) {
      leader_identity_ = holder;
      new_leader = holder;
    }
    // Held by someone else and not expired by OUR clock since we last saw the record change.
    held_by_other = !holder.empty() && holder != config_.identity &&
                    clock_->Now() < observed_time_ + std::chrono::seconds(record_duration);
  }
  if (!new_leader.empty() && new_leader != config_.identity && config_.on_new_leader) {
    config_.on_new_leader(new_leader);
  }
  return held_by_other;
}

void LeaderElector::AdoptOwnLease(Json& lease) {
  std::lock_guard<std::mutex> l(mu_);
  observed_record_ = lease["spec"];
  observed_rv_ = ResourceVersion(lease);
  have_observed_ = true;
  observed_time_ = clock_->Now();
  leader_identity_ = config_.identity;
}

Status LeaderElector::Release() {
  Json lease;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!have_observed_ || observed_record_.value("holderIdentity", "") != config_.identity) {
      return Status::Ok();
    }
    const std::string now = FormatMicroTime(clock_->WallNow());
    Json spec = {{"holderIdentity", ""},
                 {"leaseDurationSeconds", 1},
                 {"acquireTime", now},
                 {"renewTime", now},
                 {"leaseTransitions", observed_record_.value("leaseTransitions", int64_t{0})}};
    lease = LeaseObject(spec);
    lease["metadata"]["resourceVersion"] = observed_rv_;
  }
  auto updated = client_->Update(kLeases, config_.lease_namespace, lease);
  if (!updated.ok()) return updated.status();
  std::lock_guard<std::mutex> l(mu_);
  observed_record_ = (*updated)["spec"];
  observed_rv_ = ResourceVersion(*updated);
  observed_time_ = clock_->Now();
  leader_identity_.clear();
  return Status::Ok();
}

bool LeaderElector::SleepUnlessStopped(Clock::Duration d, std::stop_token stop) {
  std::stop_callback wake(stop, [this] {
    std::lock_guard<std::mutex> g(sleep_mu_);
    sleep_cv_.notify_all();
  });
  std::unique_lock<std::mutex> l(sleep_mu_);
  clock_->WaitUntil(sleep_cv_, l, clock_->Now() + d, [&] { return stop.stop_requested(); });
  return !stop.stop_requested();
}

Status LeaderElector::Run(std::stop_token stop) {
  NVL72_RETURN_IF_ERROR(ValidateLeaderElectionConfig(config_));
  std::mt19937_64 rng(std::hash<std::string>{}(config_.identity));
  std::uniform_real_distribution<double> jitter(1.0, 1.2);  // client-go JitterFactor 1.2

  // Campaign.
  while (!TryAcquireOrRenew()) {
    auto wait = std::chrono::duration_cast<Clock::Duration>(config_.retry_period * jitter(rng));
    if (!SleepUnlessStopped(wait, stop))
      return Status(StatusCode::kCancelled, "leader election stopped");
  }
  if (stop.stop_requested()) {
    Release().IgnoreError();
    return Status(StatusCode::kCancelled, "leader election stopped");
  }
  is_leader_.store(true);
  if (config_.on_started_leading) config_.on_started_leading();

  // Lead: renew every retry_period; give up when no renewal succeeded for renew_deadline.
  Clock::TimePoint last_renew = clock_->Now();
  while (SleepUnlessStopped(config_.retry_period, stop)) {
    if (TryAcquireOrRenew()) {
      last_renew = clock_->Now();
      continue;
    }
    // Someone else holds it now: step down at once rather than at the renew deadline.
    if (LeaderIdentity() != config_.identity && !LeaderIdentity().empty()) break;
    if (clock_->Now() - last_renew >= config_.renew_deadline) break;
  }
  is_leader_.store(false);
  bool stopped = stop.stop_requested();
  if (stopped && config_.release_on_cancel) Release().IgnoreError();
  if (config_.on_stopped_leading) config_.on_stopped_leading();
  return stopped ? Status(StatusCode::kCancelled, "leader election stopped") : Status::Ok();
}

}  // namespace nvl72::kube
