#include "operator/reconciler.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string_view>
#include <tuple>

#include "kube/errors.h"
#include "kube/object.h"
#include "model/job_nodes.h"
#include "model/names.h"
#include "operator/job_objects.h"
#include "operator/log.h"
#include "placement/fragmentation.h"

namespace nvl72::op {
namespace {

using Clock = std::chrono::steady_clock;

// The API server refuses the object itself (a bad request, a denial by RBAC, quota or an admission
// plugin, an invalid field): the same create fails again until someone changes something.
bool IsRejection(const Status& s) {
  const int code = kube::HttpCode(s);
  return code == 400 || code == 403 || code == 422 || kube::IsInvalid(s) || kube::IsForbidden(s);
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool HasFinalizer(const Json& obj) { return kube::HasFinalizer(obj, model::kReservationFinalizer); }

std::string CreationTimestamp(const Json& obj) {
  const Json& t = kube::AtPath(obj, "/metadata/creationTimestamp");
  return t.is_string() ? t.get<std::string>() : std::string();
}

// Seconds from the object's creation to `now`; 0 when the timestamp is missing or malformed.
double AgeSeconds(const Json& obj, std::chrono::system_clock::time_point now) {
  auto created = kube::ParseTime(CreationTimestamp(obj));
  if (!created.ok()) return 0;
  return std::max(0.0, std::chrono::duration<double>(now - *created).count());
}

}  // namespace

Reconciler::Reconciler(kube::Client* client, const ObjectStore* store, kube::EventRecorder* events,
                       Metrics* metrics, Enqueue enqueue, ReconcilerOptions options,
                       WallClock wall_clock)
    : client_(client),
      store_(store),
      events_(events),
      metrics_(metrics),
      enqueue_(std::move(enqueue)),
      options_(std::move(options)),
      wall_clock_(wall_clock ? std::move(wall_clock)
                             : [] { return std::chrono::system_clock::now(); }) {
  placement::PolicyOptions po;
  po.spares_per_domain = options_.spares_per_domain;
  po.spare_reserve = options_.spare_reserve;
  policy_ = placement::MakePolicy(options_.policy, po);
  if (policy_ == nullptr) policy_ = placement::MakePolicy("nvl72", po);
  model::PlacementWritten assume = [this](const Json& written, int gpus,
                                          const model::JobPlacement& placement) {
    Assume(written, gpus, placement);
  };
  pod_groups_ = std::make_unique<PodGroupWriter>(
      client_, PodGroupWriter::Options{.mode = options_.pod_groups,
                                       .cluster = options_.cluster,
                                       .field_manager = options_.field_manager});
  compute_domains_ = std::make_unique<ComputeDomainWriter>(
      client_, ComputeDomainWriter::Options{.mode = options_.compute_domains,
                                            .field_manager = options_.field_manager});
  recovery_ =
      std::make_unique<JobRecovery>(client_, events_, policy_.get(), enqueue_,
                                    JobRecovery::Config{.options = options_.recovery,
                                                        .field_manager = options_.field_manager,
                                                        .master_port = options_.master_port,
                                                        .admission_key = kAdmissionKey,
                                                        .metrics = metrics_,
                                                        .assume = assume,
                                                        .pod_groups = pod_groups_.get()});
  options_.defrag.gpu_resource = options_.cluster.gpu_resource;
  defrag_ = std::make_unique<DefragExecutor>(
      client_, events_, policy_.get(), enqueue_,
      DefragExecutor::Config{
          .options = options_.defrag, .field_manager = options_.field_manager, .assume = assume});
}

void Reconciler::SetEnqueueAfter(EnqueueAfter fn) {
  enqueue_after_ = fn;
  recovery_->SetEnqueueAfter(std::move(fn));
}

Status Reconciler::Reconcile(const std::string& key) {
  auto t0 = Clock::now();
  const bool admission = key == kAdmissionKey;
  Status s = admission ? AdmitPending() : ReconcileJob(key);
  if (!admission) CheckStuck(key);
  if (metrics_ != nullptr) {
    metrics_->CountReconcile(admission ? "admission" : "job",
                             s.ok() ? "ok" : (kube::IsConflict(s) ? "requeue" : "error"),
                             SecondsSince(t0));
  }
  if (!s.ok()) {
    // A conflict or a vanished object is routine (a newer version is on its way); anything else is
    // retried with backoff and said once per attempt.
    if (kube::IsConflict(s) || kube::IsNotFound(s)) {
      NVL72_LOG(kDebug).Job(admission ? "" : key) << "reconcile " << key << ": " << s;
    } else {
      NVL72_LOG(kWarning).Job(admission ? "" : key)
          << "reconcile " << key << " failed (retried with backoff): " << s;
    }
  }
  return s;
}

void Reconciler::CheckStuck(const std::string& key) {
  ObjectPtr job = store_->Job(key);
  std::optional<std::chrono::seconds> recheck;
  std::optional<Stuck> stuck;
  if (job != nullptr) stuck = StuckOf(*job, wall_clock_(), options_.stuck_after, &recheck);
  if (recheck && enqueue_after_) {
    enqueue_after_(key, std::chrono::duration_cast<std::chrono::milliseconds>(*recheck) +
                            std::chrono::milliseconds(100));
  }
  std::string marker = stuck ? stuck->reason + "@" + stuck->since : "";
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = stuck_reported_.find(key);
    const bool reported = it != stuck_reported_.end() && it->second == marker;
    if (!stuck) {
      if (it != stuck_reported_.end()) stuck_reported_.erase(it);
      return;
    }
    if (reported) return;
    stuck_reported_[key] = marker;
  }
  const std::string note = "ranks not all running for " + std::to_string(stuck->age.count()) +
                           "s (" + stuck->reason + "): " + stuck->message;
  NVL72_LOG(kWarning).Job(key) << key << " stuck: " << note;
  Event(*job, true, "Stuck", "Check", note);
}

Reconciler::PassStats Reconciler::LastPass() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_pass_;
}

void Reconciler::Event(const Json& obj, bool warning, const std::string& reason,
                       const std::string& action, const std::string& note) {
  if (events_ == nullptr) return;
  events_->Record(obj, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                  action, note);
}

bool Reconciler::StoreCaughtUp(const Json& stored, const Assumed& a) {
  if (kube::Uid(stored) != a.uid) return true;
  const std::string rv = kube::ResourceVersion(stored);
  // etcd revisions: a later write has a larger one. Anything else: only the very version counts.
  char* end_a = nullptr;
  char* end_s = nullptr;
  const unsigned long long want = std::strtoull(a.resource_version.c_str(), &end_a, 10);
  const unsigned long long have = std::strtoull(rv.c_str(), &end_s, 10);
  if (!a.resource_version.empty() && *end_a == '\0' && !rv.empty() && *end_s == '\0') {
    return have >= want;
  }
  return rv == a.resource_version;
}

void Reconciler::Assume(const Json& written, int gpus_per_replica,
                        const model::JobPlacement& placement) {
  std::lock_guard<std::mutex> l(mu_);
  assumed_[kube::KeyOf(written)] =
      Assumed{kube::Uid(written), gpus_per_replica, placement, kube::ResourceVersion(written),
              UsesComputeDomains(written)};
}

bool Reconciler::EffectiveComputeDomains(const Json& job) const {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = assumed_.find(kube::KeyOf(job));
    if (it != assumed_.end() && !StoreCaughtUp(job, it->second)) return it->second.compute_domains;
  }
  return UsesComputeDomains(job);
}

std::optional<model::JobPlacement> Reconciler::EffectivePlacement(const Json& job) const {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = assumed_.find(kube::KeyOf(job));
    if (it != assumed_.end() && !StoreCaughtUp(job, it->second)) return it->second.placement;
  }
  auto p = model::PlacementOf(job);
  if (p.ok() && p->has_value()) return **p;
  return std::nullopt;
}

model::ClusterState Reconciler::BuildState(std::vector<ObjectPtr>* jobs_out) const {
  std::vector<ObjectPtr> nodes = store_->Nodes();
  std::vector<ObjectPtr> pods = store_->Pods();
  std::vector<ObjectPtr> jobs = store_->Jobs();
  std::vector<const Json*> node_ptrs, pod_ptrs, job_ptrs;
  node_ptrs.reserve(nodes.size());
  pod_ptrs.reserve(pods.size());
  for (const auto& n : nodes) node_ptrs.push_back(n.get());
  for (const auto& p : pods) pod_ptrs.push_back(p.get());
  for (const auto& j : jobs) job_ptrs.push_back(j.get());
  model::ClusterOptions opts = options_.cluster;
  opts.now = wall_clock_();
  model::ClusterState state = model::ClusterState::Build(node_ptrs, pod_ptrs, job_ptrs, opts);

  // Overlay placements this process committed that the store does not show yet; forget those the
  // store has caught up with (or whose job is gone).
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, const Json*> by_key;
  for (const auto& j : jobs) by_key[kube::KeyOf(*j)] = j.get();
  for (auto it = assumed_.begin(); it != assumed_.end();) {
    auto j = by_key.find(it->first);
    if (j != by_key.end() && StoreCaughtUp(*j->second, it->second)) {
      it = assumed_.erase(it);
      continue;
    }
    state.Release(it->first);  // the store's older placement of the job, if any
    state.Reserve(it->first, it->second.gpus_per_replica, it->second.placement);
    ++it;
  }
  if (jobs_out != nullptr) *jobs_out = std::move(jobs);
  return state;
}

model::ClusterState Reconciler::BuildLocalState(const Json& job,
                                                const model::JobPlacement& placement,
                                                const std::vector<const Json*>& pods) const {
  std::vector<ObjectPtr> nodes;
  std::set<std::string_view> seen;
  for (const auto& r : placement.ranks) {
    if (!seen.insert(r.node).second) continue;
    if (ObjectPtr n = store_->Node(r.node)) nodes.push_back(std::move(n));
  }
  std::vector<const Json*> node_ptrs;
  node_ptrs.reserve(nodes.size());
  for (const auto& n : nodes) node_ptrs.push_back(n.get());
  model::ClusterOptions opts = options_.cluster;
  opts.now = wall_clock_();
  return model::ClusterState::Build(node_ptrs, pods, {&job}, opts);
}

std::optional<int> Reconciler::PriorityClassValue(const std::string& name) {
  if (name.empty()) return std::nullopt;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = priority_classes_.find(name);
    if (it != priority_classes_.end()) return it->second;
  }
  auto pc = client_->Get(kube::kPriorityClasses, "", name);
  if (!pc.ok()) return std::nullopt;
  const Json& v = kube::AtPath(*pc, "/value");
  if (!v.is_number_integer()) return std::nullopt;
  int value = v.get<int>();
  std::lock_guard<std::mutex> l(mu_);
  priority_classes_[name] = value;
  return value;
}

// ---------------------------------------------------------------------------------------------
// Admission

// A job waiting for admission, with what orders the pass.
struct Reconciler::Pending {
  int priority;
  std::string created;
  std::string key;
  const Json* job;
  model::JobSpec spec;
};

// What one admission pass found, for its defragmentation plan, the metrics and LastPass().
struct Reconciler::AdmissionPass {
  PassStats stats;
  Status first_error;
  std::vector<DefragWaitingJob> still_waiting;
  double longest_wait = 0;
  std::vector<placement::JobShape> waiting_shapes;  // what stranded capacity is measured against
};

Status Reconciler::AdmitPending() {
  std::lock_guard<std::mutex> deciding(decide_mu_);
  std::vector<ObjectPtr> jobs;
  model::ClusterState state = BuildState(&jobs);
  std::vector<Pending> pending = PendingJobs(jobs);

  AdmissionPass pass;
  pass.stats.considered = static_cast<int>(pending.size());
  const auto now = wall_clock_();
  for (const Pending& p : pending) Admit(state, p, now, &pass);
  pass.stats.holding = static_cast<int>(state.reservations().size());

  // A Required gang waits although GPUs are free in total: move preemptible jobs, within budget.
  if (!pass.still_waiting.empty() && options_.defrag.enabled) Defragment(state, jobs, now, &pass);
  return FinishPass(state, std::move(pass));
}

// The jobs to admit, in order: priority (desc), then creation time, then key.
std::vector<Reconciler::Pending> Reconciler::PendingJobs(const std::vector<ObjectPtr>& jobs) {
  std::vector<Pending> pending;
  for (const auto& j : jobs) {
    if (kube::IsBeingDeleted(*j) || model::JobFinished(*j) || !HasFinalizer(*j)) continue;
    // An admission pass runs when capacity may have freed: a recovery waiting for a node looks too.
    if (RecoveryWaitsForNode(*j)) enqueue_(kube::KeyOf(*j));
    if (EffectivePlacement(*j).has_value() || ReplanLimitReached(*j)) continue;
    auto spec = model::ParseJobSpec(kube::AtPath(*j, "/spec"));
    if (!spec.ok()) continue;  // the job reconcile reports it
    int prio = model::JobPriority(*j, PriorityClassValue(model::PriorityClassName(*j)));
    pending.push_back(
        {prio, CreationTimestamp(*j), kube::KeyOf(*j), j.get(), std::move(spec).value()});
  }
  std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
    return std::tie(b.priority, a.created, a.key) < std::tie(a.priority, b.created, b.key);
  });
  return pending;
}

// Asks the placement core for an all-or-nothing placement of the job (if its own constraints
// leave it any chance) and commits it, or records why it waits.
void Reconciler::Admit(model::ClusterState& state, const Pending& p,
                       std::chrono::system_clock::time_point now, AdmissionPass* pass) {
  const auto t0 = Clock::now();
  const model::JobVerdict verdict =
      model::JudgeJob(state, *p.job, p.spec, p.key, p.priority, options_.cluster.gpu_resource);
  const std::string error =
      verdict.error.empty() ? compute_domains_->Unavailable(p.spec) : verdict.error;
  placement::GangDecision d;
  if (error.empty()) d = policy_->PlaceGang(state.snapshot(), verdict.request);
  const double secs = SecondsSince(t0);
  pass->stats.decision_seconds.push_back(secs);
  if (metrics_ != nullptr) metrics_->ObserveDecision(secs);

  if (!d.placed) {
    d.reason = error.empty()
                   ? model::WaitingReason(state.snapshot(), verdict.request, verdict.nodes, d)
                   : error;
    KeepWaiting(p, verdict.request, d.reason, now, pass);
    return;
  }
  CommitAdmission(state, p, d.placement, now, pass);
}

// The job stays waiting: Admitted=False with `reason` (event Waiting the first time).
void Reconciler::KeepWaiting(const Pending& p, const placement::GangRequest& request,
                             const std::string& reason, std::chrono::system_clock::time_point now,
                             AdmissionPass* pass) {
  ++pass->stats.waiting;
  pass->still_waiting.push_back({p.job, &p.spec, p.priority, request});
  pass->longest_wait = std::max(pass->longest_wait, AgeSeconds(*p.job, now));
  pass->waiting_shapes.push_back(
      {.nodes = p.spec.EffectiveSegmentSize(), .gpus_per_node = p.spec.gpus_per_replica});
  Json status = kube::AtPath(*p.job, "/status");
  const bool was_waiting = model::FindCondition(*p.job, model::kConditionAdmitted) != nullptr;
  if (ApplyWaitingStatus(status, reason, kube::Generation(*p.job), now)) {
    Status s = WriteStatus(*p.job, std::move(status));
    if (!s.ok() && !kube::IsConflict(s) && !kube::IsNotFound(s) && pass->first_error.ok()) {
      pass->first_error = s;
    }
    if (s.ok() && !was_waiting) Event(*p.job, false, "Waiting", "Admit", reason);
  }
}

// Commits the placement, then counts it in the pass's snapshot and in the assumed placements.
void Reconciler::CommitAdmission(model::ClusterState& state, const Pending& p,
                                 const placement::GangPlacement& decided,
                                 std::chrono::system_clock::time_point now, AdmissionPass* pass) {
  model::JobPlacement placement =
      model::MakeJobPlacement(state.snapshot(), decided, kube::Name(*p.job), p.spec.segment_size);
  auto committed = Commit(*p.job, placement, compute_domains_->Wanted(p.spec));
  if (!committed.ok()) {
    NVL72_LOG(kWarning).Job(p.key) << "commit of " << p.key << " failed: " << committed.status();
    if (pass->first_error.ok()) pass->first_error = committed.status();
    return;
  }
  if (!committed->has_value()) return;  // job gone or replaced
  const model::JobPlacement& held = (*committed)->placement;
  state.Reserve(p.key, p.spec.gpus_per_replica, held);
  Assume((*committed)->object, p.spec.gpus_per_replica, held);
  if ((*committed)->written) {
    ++pass->stats.admitted;
    if (metrics_ != nullptr) metrics_->CountAdmitted(AgeSeconds(*p.job, now));
    NVL72_LOG(kInfo).Job(p.key) << "admitted " << p.key << " (" << p.spec.replicas << " ranks) in "
                                << JoinDomains(held.domains);
    Event(*p.job, false, "Admitted", "Admit",
          "placed " + std::to_string(p.spec.replicas) + " ranks in " + JoinDomains(held.domains));
  }
  enqueue_(p.key);
}

void Reconciler::Defragment(const model::ClusterState& state, const std::vector<ObjectPtr>& jobs,
                            std::chrono::system_clock::time_point now, AdmissionPass* pass) {
  std::vector<const Json*> job_ptrs;
  job_ptrs.reserve(jobs.size());
  for (const auto& j : jobs) job_ptrs.push_back(j.get());
  auto decision = defrag_->Run(state, pass->still_waiting, job_ptrs, now);
  if (!decision.ok()) {
    if (pass->first_error.ok()) pass->first_error = decision.status();
  } else if (decision->execute) {
    pass->stats.defrag_moves = static_cast<int>(decision->moves.size());
  } else {
    NVL72_LOG(kDebug) << "no defragmentation: " << decision->reason;
    if (decision->retry_after && enqueue_after_) {
      enqueue_after_(kAdmissionKey, *decision->retry_after + std::chrono::milliseconds(100));
    }
  }
}

// Publishes the pass (metrics, LastPass()); returns its first error.
Status Reconciler::FinishPass(const model::ClusterState& state, AdmissionPass pass) {
  if (metrics_ != nullptr) {
    metrics_->SetWaiting(pass.stats.waiting, pass.longest_wait);
    metrics_->SetAdmittedJobs(pass.stats.holding);
    metrics_->SetClusterStats(
        state.snapshot(),
        placement::ComputeStats(state.snapshot(), options_.spares_per_domain, pass.waiting_shapes));
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    last_pass_ = std::move(pass.stats);
  }
  return pass.first_error;
}

StatusOr<std::optional<Reconciler::Committed>> Reconciler::Commit(
    const Json& cached, const model::JobPlacement& placement, bool compute_domains) {
  const std::string ns = kube::Namespace(cached);
  const std::string name = kube::Name(cached);
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto fresh = client_->Get(Nvl72JobsResource(), ns, name);
    if (!fresh.ok()) {
      if (kube::IsNotFound(fresh.status())) return std::optional<Committed>();
      return fresh.status();
    }
    if (kube::Uid(*fresh) != kube::Uid(cached) || kube::IsBeingDeleted(*fresh) ||
        model::JobFinished(*fresh)) {
      return std::optional<Committed>();
    }
    auto existing = model::PlacementOf(*fresh);
    if (existing.ok() && existing->has_value()) {
      model::JobPlacement stored = **existing;  // placed before: never twice
      return std::optional<Committed>(
          Committed{false, std::move(stored), std::move(fresh).value()});
    }
    Json obj = std::move(fresh).value();
    Json status = obj.contains("status") ? obj["status"] : Json::object();
    ApplyAdmittedStatus(status, placement, kube::Generation(obj), wall_clock_());
    // A job keeps the fabric of its first admission (a re-plan admits it again).
    if (!status.contains("fabric")) {
      status["fabric"] = std::string(model::FabricName(
          compute_domains ? model::Fabric::kComputeDomain : model::Fabric::kNone));
    }
    obj["status"] = std::move(status);
    auto written = client_->UpdateStatus(Nvl72JobsResource(), ns, obj,
                                         {.field_manager = options_.field_manager});
    if (written.ok()) {
      CheckFabricKept(*written);
      return std::optional<Committed>(Committed{true, placement, std::move(written).value()});
    }
    if (!kube::IsConflict(written.status())) return written.status();
  }
  return Status(StatusCode::kConflict, "status of " + ns + "/" + name + " kept changing");
}

// An NVL72Job CRD older than this operator prunes status.fabric (Helm never upgrades CRDs): the job
// then runs without the ComputeDomains it was admitted with. Said once, loudly.
void Reconciler::CheckFabricKept(const Json& written) {
  if (!kube::AtPath(written, "/status/fabric").is_null() || stale_crd_logged_.exchange(true))
    return;
  NVL72_LOG(kError).Job(kube::KeyOf(written))
      << "the API server dropped status.fabric of " << kube::KeyOf(written)
      << ": the NVL72Job CRD is older than this operator, so jobs run without ComputeDomains; "
         "apply crds/nvl72jobs.nvl72.dev.yaml of this release (docs/helm.md)";
}

// ---------------------------------------------------------------------------------------------
// Per-job reconcile

Status Reconciler::WriteStatus(const Json& job, Json status) {
  Json obj = job;
  obj["status"] = std::move(status);
  auto written = client_->UpdateStatus(Nvl72JobsResource(), kube::Namespace(job), obj,
                                       {.field_manager = options_.field_manager});
  return written.ok() ? Status::Ok() : written.status();
}

Status Reconciler::EnsureFinalizer(const Json& job) {
  auto r = kube::UpdateWithRetry(
      *client_, Nvl72JobsResource(), kube::Namespace(job), kube::Name(job), [&](Json& obj) {
        if (kube::Uid(obj) != kube::Uid(job) || kube::IsBeingDeleted(obj) || HasFinalizer(obj)) {
          return false;
        }
        Json& f = obj["metadata"]["finalizers"];
        if (!f.is_array()) f = Json::array();
        f.push_back(std::string(model::kReservationFinalizer));
        return true;
      });
  if (!r.ok() && kube::IsNotFound(r.status())) return Status::Ok();
  return r.ok() ? Status::Ok() : r.status();
}

// Deletion: the job's reservation is released once its pods are asked to go. A deletion with
// propagationPolicy Orphan keeps them (the garbage collector takes the job's ownerReferences off
// the pods and the Service; the pods keep using their GPUs as ordinary pods), and a pod the garbage
// collector has already orphaned is no longer the job's. Background and Foreground deletions delete
// the pods here as well as in the garbage collector, so a control plane without one loses nothing.
Status Reconciler::Finalize(const Json& job) {
  const std::string ns = kube::Namespace(job);
  const std::string name = kube::Name(job);
  const bool orphan = kube::HasFinalizer(job, kube::kOrphanFinalizer);
  Status first_error;
  if (!orphan) {
    // From the API server, not the cache: a rank pod created just before the delete may not be in
    // the cache yet, and would be left running on its GPUs.
    auto listed = client_->List(kube::kPods, ns,
                                {.label_selector = std::string(model::kJobLabel) + "=" + name});
    NVL72_RETURN_IF_ERROR(listed.status());
    for (const Json& pod : listed->items) {
      if (kube::IsBeingDeleted(pod) || kube::ControllerUid(pod) != kube::Uid(job)) continue;
      Status s = client_->Delete(kube::kPods, ns, kube::Name(pod));
      if (!s.ok() && !kube::IsNotFound(s) && first_error.ok()) first_error = s;
    }
  }
  if (!orphan) {
    Status s = client_->Delete(kube::kServices, ns, name);
    if (!s.ok() && !kube::IsNotFound(s) && first_error.ok()) first_error = s;
    s = pod_groups_->Delete(job);
    if (!s.ok() && first_error.ok()) first_error = s;
    s = compute_domains_->Delete(job);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  NVL72_RETURN_IF_ERROR(first_error);

  auto r = kube::UpdateWithRetry(*client_, Nvl72JobsResource(), ns, name, [&](Json& obj) {
    if (kube::Uid(obj) != kube::Uid(job) || !HasFinalizer(obj)) return false;
    Json kept = Json::array();
    for (const auto& f : obj["metadata"]["finalizers"]) {
      if (!(f.is_string() && f.get_ref<const std::string&>() == model::kReservationFinalizer)) {
        kept.push_back(f);
      }
    }
    obj["metadata"]["finalizers"] = std::move(kept);
    return true;
  });
  if (!r.ok() && !kube::IsNotFound(r.status())) return r.status();
  {
    std::lock_guard<std::mutex> l(mu_);
    assumed_.erase(kube::KeyOf(job));
  }
  NVL72_LOG(kInfo).Job(kube::KeyOf(job)) << "released " << kube::KeyOf(job);
  Event(job, false, "Released", "Delete",
        orphan ? "reservation released; pods orphaned (kept running)"
               : "reservation released; pods deleted");
  enqueue_(kAdmissionKey);
  return Status::Ok();
}

Status Reconciler::EnsureObjects(const Json& job, const model::JobSpec& spec,
                                 const model::JobPlacement& placement,
                                 const std::vector<ObjectPtr>& pods,
                                 const std::vector<SegmentDomain>* domains, std::string* rejected) {
  const std::string ns = kube::Namespace(job);
  std::map<std::string, const Json*> existing;
  for (const auto& p : pods) existing[kube::Name(*p)] = p.get();

  if (auto fresh = FreshRejection(job)) {
    *rejected = std::move(*fresh);
    return Status::Ok();
  }
  Status first_error;
  int created = 0;
  std::set<int> groups;
  if (existing.size() < placement.ranks.size() || pods.empty()) {
    auto svc =
        client_->Create(kube::kServices, ns,
                        BuildHeadlessService(job, spec.EffectiveMasterPort(options_.master_port)),
                        {.field_manager = options_.field_manager});
    if (!svc.ok() && !kube::IsAlreadyExists(svc.status())) first_error = svc.status();
    auto ensured = pod_groups_->Ensure(job, spec);
    NVL72_RETURN_IF_ERROR(ensured.status());
    groups = std::move(*ensured);
  }
  std::vector<const Json*> pod_ptrs;
  pod_ptrs.reserve(pods.size());
  for (const auto& p : pods) pod_ptrs.push_back(p.get());
  for (const auto& rank : placement.ranks) {
    if (existing.count(rank.pod) != 0) continue;
    const int segment = SegmentOfRank(spec, rank.rank);
    if (domains != nullptr && !(*domains)[static_cast<size_t>(segment)].template_ready) continue;
    Json pod = BuildRankPod(job, spec, rank, options_.master_port, options_.cluster.gpu_resource);
    JoinPodGroup(pod, PodGroupToJoin(kube::Name(job), spec, rank.rank, pod_ptrs, groups));
    if (domains != nullptr) AddChannelClaim(pod, ChannelTemplateName(kube::Name(job), segment));
    auto r = client_->Create(kube::kPods, ns, pod, {.field_manager = options_.field_manager});
    if (r.ok()) {
      ++created;
    } else if (IsRejection(r.status())) {
      if (rejected->empty()) rejected->assign("rank pod " + rank.pod + ": " + r.status().message());
    } else if (!kube::IsAlreadyExists(r.status()) && first_error.ok()) {
      first_error = r.status();
    }
  }
  RememberRejection(job, *rejected);
  if (!rejected->empty()) {
    NVL72_LOG(kWarning).Job(kube::KeyOf(job))
        << kube::KeyOf(job) << ": the API server rejects " << *rejected;
    Event(job, true, "PodRejected", "Create", "the API server rejects " + *rejected);
    if (enqueue_after_) enqueue_after_(kube::KeyOf(job), options_.rejected_retry);
  }
  if (created > 0) {
    NVL72_LOG(kDebug).Job(kube::KeyOf(job))
        << "created " << created << " pods of " << kube::KeyOf(job);
    Event(job, false, "PodsCreated", "Create",
          "created " + std::to_string(created) + " rank pods on their planned nodes");
  }
  return first_error;
}

std::optional<std::string> Reconciler::FreshRejection(const Json& job) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = rejections_.find(kube::KeyOf(job));
  if (it == rejections_.end() || it->second.uid != kube::Uid(job) ||
      wall_clock_() - it->second.at >= options_.rejected_retry) {
    return std::nullopt;
  }
  return it->second.message;
}

void Reconciler::RememberRejection(const Json& job, const std::string& rejected) {
  std::lock_guard<std::mutex> l(mu_);
  if (rejected.empty()) {
    rejections_.erase(kube::KeyOf(job));
  } else {
    rejections_[kube::KeyOf(job)] = {kube::Uid(job), rejected, wall_clock_()};
  }
}

StatusOr<bool> Reconciler::CheckRefusedRanks(const Json& job, const model::JobPlacement& placement,
                                             const std::vector<ObjectPtr>& pods) {
  std::vector<const Json*> pod_ptrs;
  pod_ptrs.reserve(pods.size());
  for (const auto& p : pods) pod_ptrs.push_back(p.get());
  SafetyNetDecision d =
      DecideSafetyNet(job, placement, pod_ptrs, options_.safety_net, wall_clock_());
  if (d.recheck_after && enqueue_after_) {
    enqueue_after_(kube::KeyOf(job), *d.recheck_after + std::chrono::milliseconds(100));
  }
  if (!d.replan) return false;
  NVL72_RETURN_IF_ERROR(WriteStatus(job, std::move(d.status)));
  {
    std::lock_guard<std::mutex> l(mu_);
    assumed_.erase(kube::KeyOf(job));
  }
  NVL72_LOG(kWarning).Job(kube::KeyOf(job)) << kube::KeyOf(job) << ": " << d.message;
  Event(job, true, "RankUnschedulable", "Replan", d.message);
  if (metrics_ != nullptr) metrics_->CountReplan();
  NVL72_RETURN_IF_ERROR(DeleteLeftoverRanks(job, pods));
  enqueue_(kAdmissionKey);
  return true;
}

Status Reconciler::DeleteLeftoverRanks(const Json& job, const std::vector<ObjectPtr>& pods) {
  Status first_error;
  for (const auto& p : pods) {
    if (kube::IsBeingDeleted(*p) || model::PodTerminated(*p)) continue;
    if (!model::GangRankOf(*p, nullptr, nullptr) || kube::ControllerUid(*p) != kube::Uid(job)) {
      continue;
    }
    Status s = client_->Delete(kube::kPods, kube::Namespace(*p), kube::Name(*p));
    if (!s.ok() && !kube::IsNotFound(s) && first_error.ok()) first_error = s;
  }
  return first_error;
}

Status Reconciler::ReconcileJob(const std::string& key) {
  ObjectPtr job = store_->Job(key);
  if (job == nullptr) return ForgetJob(key);
  if (kube::IsBeingDeleted(*job)) {
    if (!HasFinalizer(*job)) return Status::Ok();
    return Finalize(*job);
  }
  const auto now = wall_clock_();
  auto spec = model::ParseJobSpec(kube::AtPath(*job, "/spec"));
  if (!spec.ok()) return ReportInvalidSpec(*job, spec.status().message(), now);
  if (!HasFinalizer(*job)) {
    if (model::JobFinished(*job)) return Status::Ok();
    NVL72_RETURN_IF_ERROR(EnsureFinalizer(*job));
    enqueue_(kAdmissionKey);
    return Status::Ok();
  }
  std::optional<model::JobPlacement> placement = EffectivePlacement(*job);
  std::vector<ObjectPtr> pods = store_->PodsOfJob(kube::Namespace(*job), kube::Name(*job));
  if (!placement.has_value()) {
    enqueue_(kAdmissionKey);
    return DeleteLeftoverRanks(*job, pods);
  }
  if (model::JobFinished(*job)) return StopFailedRanks(*job, pods);
  if (auto ended = CheckRecovery(*job, *spec, pods, now); !ended.ok() || *ended) {
    return ended.ok() ? Status::Ok() : ended.status();
  }
  if (auto released = CheckRefusedRanks(*job, *placement, pods); !released.ok() || *released) {
    return released.ok() ? Status::Ok() : released.status();
  }
  auto domains = EnsureComputeDomains(*job, *spec);
  NVL72_RETURN_IF_ERROR(domains.status());
  const std::vector<SegmentDomain>* in_use = domains->has_value() ? &**domains : nullptr;
  std::string rejected;
  NVL72_RETURN_IF_ERROR(EnsureObjects(*job, *spec, *placement, pods, in_use, &rejected));
  return UpdatePodStatus(key, *job, *placement, pods, in_use, rejected, now);
}

StatusOr<std::optional<std::vector<SegmentDomain>>> Reconciler::EnsureComputeDomains(
    const Json& job, const model::JobSpec& spec) {
  if (!EffectiveComputeDomains(job)) return std::optional<std::vector<SegmentDomain>>();
  auto domains = compute_domains_->Ensure(job, spec);
  if (!domains.ok()) return domains.status();
  return std::optional<std::vector<SegmentDomain>>(std::move(domains).value());
}

// The job is gone: forget what this process remembers of it; its GPUs may be free.
Status Reconciler::ForgetJob(const std::string& key) {
  {
    std::lock_guard<std::mutex> l(mu_);
    assumed_.erase(key);
    rejections_.erase(key);
  }
  enqueue_(kAdmissionKey);
  return Status::Ok();
}

Status Reconciler::ReportInvalidSpec(const Json& job, const std::string& message,
                                     std::chrono::system_clock::time_point now) {
  Json status = kube::AtPath(job, "/status");
  if (ApplyInvalidStatus(status, message, kube::Generation(job), now)) {
    Event(job, true, "InvalidSpec", "Validate", message);
    return WriteStatus(job, std::move(status));
  }
  return Status::Ok();  // no retry until the spec changes
}

// A finished job holds nothing; a failed one gives its GPUs back: stop the ranks that still run.
Status Reconciler::StopFailedRanks(const Json& job, const std::vector<ObjectPtr>& pods) {
  if (!model::ConditionIsTrue(job, model::kConditionFailed)) return Status::Ok();
  for (const auto& p : pods) {
    if (model::PodTerminated(*p) || kube::IsBeingDeleted(*p)) continue;
    Status s = client_->Delete(kube::kPods, kube::Namespace(*p), kube::Name(*p));
    if (!s.ok() && !kube::IsNotFound(s)) return s;
  }
  return Status::Ok();
}

StatusOr<bool> Reconciler::CheckRecovery(const Json& job, const model::JobSpec& spec,
                                         const std::vector<ObjectPtr>& pods,
                                         std::chrono::system_clock::time_point now) {
  auto stored = model::PlacementOf(job);
  if (!stored.ok() || !stored->has_value()) return false;
  // Node health and recovery (operator/recovery.h) on the stored reservation. First on a
  // snapshot of the job's own rank nodes (O(ranks)); only a job with something to recover pays
  // for the snapshot of the whole cluster (O(nodes + pods)).
  RecoveryInput in{
      .job = &job, .spec = &spec, .now = now, .gpu_resource = options_.cluster.gpu_resource};
  for (const auto& p : pods) in.pods.push_back(p.get());
  model::ClusterState local = BuildLocalState(job, **stored, in.pods);
  in.state = &local;
  if (recovery_->Quiet(in)) return false;
  std::lock_guard<std::mutex> deciding(decide_mu_);
  model::ClusterState state = BuildState(nullptr);
  std::vector<ObjectPtr> all_pods = store_->Pods();
  in.state = &state;
  for (const auto& p : all_pods) in.all_pods.push_back(p.get());
  return recovery_->Reconcile(in);
}

// Status from the pods, written only when the store shows our placement (else the write would be
// based on a stale object and fail the optimistic-concurrency check anyway).
Status Reconciler::UpdatePodStatus(const std::string& key, const Json& job,
                                   const model::JobPlacement& placement,
                                   const std::vector<ObjectPtr>& pods,
                                   const std::vector<SegmentDomain>* domains,
                                   const std::string& rejected,
                                   std::chrono::system_clock::time_point now) {
  auto stored = model::PlacementOf(job);
  if (!stored.ok() || !stored->has_value()) return Status::Ok();
  std::vector<const Json*> pod_ptrs;
  pod_ptrs.reserve(pods.size());
  for (const auto& p : pods) pod_ptrs.push_back(p.get());
  PodSummary summary = SummarizePods(placement, pod_ptrs);
  summary.rejected = rejected;
  if (domains != nullptr && summary.claim_pending.empty()) {
    summary.claim_pending = TemplateWait(*domains);
  }
  Json status = kube::AtPath(job, "/status");
  const std::string state_before = status.value("state", "");
  bool changed = ApplyPlacedStatus(status, placement, summary, kube::Generation(job), now);
  if (domains != nullptr) {
    const DomainCondition c = ComputeDomainCondition(
        *domains, static_cast<int>(placement.ranks.size() / std::max<size_t>(1, domains->size())));
    changed |= SetCondition(status, model::kConditionComputeDomainReady, c.status, c.reason,
                            c.message, kube::Generation(job), now);
    if (c.status != "True" && enqueue_after_) {
      enqueue_after_(key, ComputeDomainRecheck(status, now, options_.compute_domain_recheck));
    }
  }
  const std::string state_after = status.value("state", "");
  const std::string_view moved = FinishDefragMove(key, job, status, summary, state_after, now);
  changed |= !moved.empty();
  if (!changed) return Status::Ok();
  NVL72_RETURN_IF_ERROR(WriteStatus(job, std::move(status)));
  defrag_->MoveFinished(job, moved);
  ReportProgress(key, job, state_before, state_after, summary.misplaced);
  return Status::Ok();
}

// A job moved by defragmentation: its move ends when every rank runs again (or it ends). Returns
// the move's result written to `status`, "" when none.
std::string_view Reconciler::FinishDefragMove(const std::string& key, const Json& job, Json& status,
                                              const PodSummary& summary,
                                              const std::string& state_after,
                                              std::chrono::system_clock::time_point now) {
  const std::string_view moved = defrag_->FinishMove(
      job, status,
      state_after == "Succeeded" ||
          (summary.running == summary.ranks && summary.bound == summary.ranks && summary.ranks > 0),
      state_after == "Failed", now);
  if (moved.empty() && enqueue_after_) {
    // Still being moved: look again when the move times out (nothing else may wake the job).
    if (auto left = defrag_->MoveTimeoutIn(job, now)) {
      enqueue_after_(key, *left + std::chrono::milliseconds(100));
    }
  }
  return moved;
}

// Events (and requeues) for a status just written: the job's new state, misplaced ranks.
void Reconciler::ReportProgress(const std::string& key, const Json& job,
                                const std::string& state_before, const std::string& state_after,
                                int misplaced) {
  if (state_after != state_before) {
    if (state_after == "Succeeded" || state_after == "Failed") {
      NVL72_LOG(kInfo).Job(key) << key << " " << state_after;
      Event(job, state_after == "Failed", state_after, "Complete", "job " + state_after);
      enqueue_(kAdmissionKey);                     // its GPUs are free again
      if (state_after == "Failed") enqueue_(key);  // stop the remaining ranks
    } else if (state_after == "Running") {
      Event(job, false, "Running", "Run", "all ranks running");
    }
  }
  if (misplaced > 0) {
    Event(job, true, "Misplaced", "Check",
          std::to_string(misplaced) + " rank pods bound to a node other than the planned one");
  }
}

}  // namespace nvl72::op
