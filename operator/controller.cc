#include "operator/controller.h"

#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "kube/events.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/object.h"
#include "kube/workqueue.h"
#include "model/cluster_state.h"
#include "model/names.h"
#include "model/slim.h"
#include "operator/job_objects.h"
#include "operator/log.h"
#include "operator/object_store.h"
#include "operator/reconciler.h"

namespace nvl72::op {
namespace {

// Node fields that matter to placement; heartbeats (lastHeartbeatTime) do not trigger admission.
Json NodeDigest(const Json& n) {
  Json ready;
  const Json& conds = kube::AtPath(n, "/status/conditions");
  if (conds.is_array()) {
    for (const auto& c : conds) {
      if (c.value("type", "") == "Ready") ready = c.value("status", "");
    }
  }
  return {{"labels", kube::AtPath(n, "/metadata/labels")},
          {"spec", kube::AtPath(n, "/spec")},
          {"allocatable", kube::AtPath(n, "/status/allocatable")},
          {"ready", ready}};
}

std::string JobKeyOfPod(const Json& pod) {
  auto labels = kube::Labels(pod);
  auto it = labels.find(std::string(model::kJobLabel));
  if (it == labels.end() || it->second.empty()) return "";
  return kube::MakeKey(kube::Namespace(pod), it->second);
}

std::string DefaultIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "_" + std::to_string(getpid());
}

void EnqueueAdmission(kube::WorkQueue* queue) { queue->Add(Reconciler::kAdmissionKey); }

// --- informer options

// The caches keep only what the operator reads (model/slim.h): a cached pod of the API server's
// shape costs ~26 kB of heap, a slim one a few kB.
model::ClusterOptions SlimOptions(const Options& o) {
  model::ClusterOptions slim;
  slim.domain_label = o.domain_label;
  slim.domain_label_fallback = o.domain_label_fallback;
  slim.gpu_resource = o.gpu_resource;
  return slim;
}

// A token revoked or expired while we run, RBAC taken away, the API server gone: the informers
// retry with backoff and keep their caches; say so in the log (the counts are in
// nvl72_operator_watch_errors_total).
static_assert(static_cast<int>(LogLevel::kInfo) ==
                  static_cast<int>(kube::InformerErrorSeverity::kInfo) &&
              static_cast<int>(LogLevel::kWarning) ==
                  static_cast<int>(kube::InformerErrorSeverity::kWarning) &&
              static_cast<int>(LogLevel::kError) ==
                  static_cast<int>(kube::InformerErrorSeverity::kError));
kube::InformerOptions WithErrorLog(kube::InformerOptions o) {
  o.on_error = [r = o.resource](const Status& s, int64_t n) {
    const kube::InformerErrorSeverity sev = kube::InformerErrorSeverityOf(s, n);
    if (sev != kube::InformerErrorSeverity::kNone) {
      LogLine(static_cast<LogLevel>(sev), kube::DescribeInformerError(r, s, n));
    }
  };
  return o;
}

kube::InformerOptions JobsInformerOptions(const Options& o) {
  kube::InformerOptions jobs;
  jobs.resource = Nvl72JobsResource();
  jobs.ns = o.ns;
  jobs.transform = kube::DropManagedFields;
  return WithErrorLog(std::move(jobs));
}

kube::InformerOptions PodsInformerOptions(const Options& o) {
  kube::InformerOptions pods;
  pods.resource = kube::kPods;  // all namespaces: every GPU pod counts
  pods.transform = [slim = SlimOptions(o)](Json& pod) { model::SlimPod(pod, slim); };
  return WithErrorLog(std::move(pods));
}

kube::InformerOptions NodesInformerOptions(const Options& o) {
  kube::InformerOptions nodes;
  nodes.resource = kube::kNodes;
  nodes.transform = [slim = SlimOptions(o)](Json& node) { model::SlimNode(node, slim); };
  return WithErrorLog(std::move(nodes));
}

// --- event handlers: they only enqueue keys

void EnqueueJobEvents(kube::Informer& jobs, kube::WorkQueue* queue) {
  jobs.AddEventHandler({
      .on_add = [queue](const ObjectPtr& o) { queue->Add(kube::KeyOf(*o)); },
      .on_update = [queue](const ObjectPtr&, const ObjectPtr& o) { queue->Add(kube::KeyOf(*o)); },
      .on_delete =
          [queue](const ObjectPtr& o) {
            queue->Add(kube::KeyOf(*o));
            EnqueueAdmission(queue);
          },
  });
}

void EnqueuePodEvents(kube::Informer& pods, kube::WorkQueue* queue, std::string gpu_resource) {
  auto pod_changed = [queue, gpu_resource = std::move(gpu_resource)](
                         const ObjectPtr& old_obj, const ObjectPtr& o, bool deleted) {
    std::string key = JobKeyOfPod(*o);
    if (!key.empty()) queue->Add(key);
    // GPUs freed by a pod that ended or went away: other jobs may fit now.
    const bool ended =
        model::PodTerminated(*o) && (old_obj == nullptr || !model::PodTerminated(*old_obj));
    if ((deleted || ended) && model::PodGpuRequest(*o, gpu_resource) > 0) EnqueueAdmission(queue);
  };
  pods.AddEventHandler({
      .on_add = [pod_changed](const ObjectPtr& o) { pod_changed(nullptr, o, false); },
      .on_update = [pod_changed](const ObjectPtr& old_obj,
                                 const ObjectPtr& o) { pod_changed(old_obj, o, false); },
      .on_delete = [pod_changed](const ObjectPtr& o) { pod_changed(nullptr, o, true); },
  });
}

void EnqueueNodeEvents(kube::Informer& nodes, const kube::Informer* jobs, kube::WorkQueue* queue) {
  // Jobs with a rank on a node whose health changed re-check their recovery (operator/recovery.h).
  auto node_jobs = [jobs, queue](const ObjectPtr& n) {
    for (const auto& key : JobsWithRankOn(jobs->List(), kube::Name(*n))) queue->Add(key);
  };
  nodes.AddEventHandler({
      .on_add = [queue](const ObjectPtr&) { EnqueueAdmission(queue); },
      .on_update =
          [queue, node_jobs](const ObjectPtr& old_obj, const ObjectPtr& o) {
            if (NodeDigest(*old_obj) != NodeDigest(*o)) {
              EnqueueAdmission(queue);
              node_jobs(o);
            }
          },
      .on_delete =
          [queue, node_jobs](const ObjectPtr& o) {
            EnqueueAdmission(queue);
            node_jobs(o);
          },
  });
}

ReconcilerOptions ReconcilerOptionsFrom(const Options& o) {
  ReconcilerOptions ropts;
  ropts.cluster.domain_label = o.domain_label;
  ropts.cluster.domain_label_fallback = o.domain_label_fallback;
  ropts.cluster.gpu_resource = o.gpu_resource;
  ropts.policy = o.policy;
  ropts.spares_per_domain = o.spares_per_domain;
  ropts.spare_reserve = o.spare_reserve;
  ropts.master_port = o.master_port;
  if (o.recovery_wait_seconds >= 0) {
    ropts.recovery.wait_bound = std::chrono::seconds(o.recovery_wait_seconds);
  }
  ropts.recovery.move_cordoned_ranks = o.cordoned_ranks == "move";
  ropts.recovery.stale_pod_grace_seconds = o.defrag_grace_seconds;
  ropts.defrag.enabled = o.defrag;
  ropts.defrag.max_concurrent_moves = o.defrag_max_concurrent_moves;
  ropts.defrag.min_interval = std::chrono::seconds(o.defrag_min_interval_seconds);
  ropts.defrag.cooldown = std::chrono::seconds(o.defrag_cooldown_seconds);
  ropts.defrag.move_timeout = std::chrono::seconds(o.defrag_move_timeout_seconds);
  ropts.safety_net.bound = std::chrono::seconds(o.unschedulable_replan_seconds);
  ropts.stuck_after = std::chrono::seconds(o.stuck_seconds);
  ropts.safety_net.max_replans = o.max_replans;
  ropts.pod_groups = ParsePodGroupsMode(o.pod_groups).value_or(PodGroupsMode::kAuto);
  ropts.compute_domains =
      ParseComputeDomainsMode(o.compute_domains).value_or(ComputeDomainsMode::kAuto);
  return ropts;
}

}  // namespace

// The informers: NVL72Jobs in --namespace, all Pods indexed by nvl72.dev/job, Nodes.
struct Controller::Caches {
  Caches(kube::Client* client, kube::Clock* clock, const Options& o)
      : jobs(client, clock, JobsInformerOptions(o)),
        pods(client, clock, PodsInformerOptions(o)),
        nodes(client, clock, NodesInformerOptions(o)) {
    pods.AddIndexer(InformerStore::kJobIndex, &InformerStore::IndexPodByJob);
  }

  void EnqueueChanges(kube::WorkQueue* queue, const Options& o) {
    EnqueueJobEvents(jobs, queue);
    EnqueuePodEvents(pods, queue, o.gpu_resource);
    EnqueueNodeEvents(nodes, &jobs, queue);
  }

  void Start() {
    jobs.Start();
    pods.Start();
    nodes.Start();
  }

  // True once all three synced; false if `stop` was requested first.
  bool WaitForSync(std::stop_token stop) const {
    while (!stop.stop_requested()) {
      if (jobs.WaitForSync(std::chrono::milliseconds(200)) &&
          pods.WaitForSync(std::chrono::milliseconds(200)) &&
          nodes.WaitForSync(std::chrono::milliseconds(200))) {
        break;
      }
    }
    return !stop.stop_requested();
  }

  void Stop() {
    jobs.Stop();
    pods.Stop();
    nodes.Stop();
  }

  kube::Informer jobs;
  kube::Informer pods;
  kube::Informer nodes;
};

// The reconcile workers and the periodic admission pass: started when leading (or at once without
// leader election), stopped when leadership ends or on stop.
class Controller::Workers {
 public:
  Workers(Controller* c, kube::WorkQueue* queue, Reconciler* reconciler, const kube::Informer* jobs,
          std::string identity, std::stop_token stop)
      : c_(c),
        queue_(queue),
        reconciler_(reconciler),
        jobs_(jobs),
        identity_(std::move(identity)),
        stop_(std::move(stop)) {}

  void Start() {
    c_->MarkProgress();
    c_->leader_ = true;
    NVL72_LOG(kInfo) << "starting " << c_->options_.workers << " workers as " << identity_;
    EnqueueAdmission(queue_);
    for (const auto& key : jobs_->ListKeys()) queue_->Add(key);
    for (int i = 0; i < c_->options_.workers; ++i) {
      threads_.emplace_back([this] { ReconcileKeys(); });
    }
    // Safety net: an admission pass every admission_resync_seconds.
    if (c_->options_.admission_resync_seconds > 0) {
      threads_.emplace_back([this](std::stop_token st) { ResyncAdmission(st); });
    }
  }

  void Stop() {
    c_->leader_ = false;
    queue_->ShutDown();
    for (auto& w : threads_) w.request_stop();
    cv_.notify_all();
    threads_.clear();  // joins
  }

 private:
  // One worker: reconciles keys until the queue shuts down; failed keys are retried with backoff.
  void ReconcileKeys() {
    while (auto key = queue_->Get()) {
      Status s = reconciler_->Reconcile(*key);
      if (s.ok()) {
        queue_->Forget(*key);
      } else {
        queue_->AddRateLimited(*key);
        if (c_->metrics_ != nullptr) c_->metrics_->CountRetry();
      }
      queue_->Done(*key);
      c_->MarkProgress();
    }
  }

  void ResyncAdmission(std::stop_token st) {
    std::unique_lock<std::mutex> l(mu_);
    while (!st.stop_requested() && !stop_.stop_requested()) {
      cv_.wait_for(l, std::chrono::seconds(c_->options_.admission_resync_seconds));
      EnqueueAdmission(queue_);
    }
  }

  Controller* c_;
  kube::WorkQueue* queue_;
  Reconciler* reconciler_;
  const kube::Informer* jobs_;
  const std::string identity_;
  const std::stop_token stop_;
  std::vector<std::jthread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
};

bool WorkersStalled(bool leading, size_t ready_keys,
                    std::chrono::steady_clock::duration since_progress,
                    std::chrono::seconds limit) {
  return limit.count() > 0 && leading && ready_keys > 0 && since_progress > limit;
}

Controller::Controller(kube::Client* client, Options options, Metrics* metrics)
    : client_(client), options_(std::move(options)), metrics_(metrics) {}

Controller::~Controller() = default;

void Controller::MarkProgress() {
  progress_ns_ = std::chrono::steady_clock::now().time_since_epoch().count();
}

bool Controller::Healthy() const {
  size_t ready = 0;
  {
    std::lock_guard<std::mutex> l(queue_mu_);
    if (ready_keys_) ready = ready_keys_();
  }
  const auto since = std::chrono::steady_clock::now().time_since_epoch() -
                     std::chrono::steady_clock::duration(progress_ns_.load());
  return !WorkersStalled(leader_.load(), ready, since,
                         std::chrono::seconds(options_.health_stall_seconds));
}

Status Controller::Run(std::stop_token stop) {
  kube::Clock* clock = kube::RealClock();
  kube::WorkQueue queue(clock);
  Caches caches(client_, clock, options_);
  caches.EnqueueChanges(&queue, options_);

  const std::string identity = options_.identity.empty() ? DefaultIdentity() : options_.identity;
  kube::EventRecorder recorder(
      client_, clock,
      {.reporting_controller = "nvl72.dev/operator", .reporting_instance = identity});
  InformerStore store(&caches.jobs, &caches.pods, &caches.nodes);
  Reconciler reconciler(
      client_, &store, &recorder, metrics_, [&](const std::string& key) { queue.Add(key); },
      ReconcilerOptionsFrom(options_));
  WireReconciler(&reconciler, &queue);
  NVL72_RETURN_IF_ERROR(reconciler.pod_groups()->Start());
  NVL72_RETURN_IF_ERROR(reconciler.compute_domains()->Start());

  AttachProbes(&queue, &caches);
  // Detaches them before the queue and the informers go out of scope.
  struct Detach {
    Controller* c;
    ~Detach() { c->DetachProbes(); }
  } detach{this};

  if (!SyncCaches(stop, &caches)) return Status::Ok();

  Workers workers(this, &queue, &reconciler, &caches.jobs, identity, stop);
  Status result;
  if (options_.leader_elect) {
    result = RunLeaderElection(stop, clock, identity, &workers);
  } else {
    RunWithoutLeaderElection(stop, &workers);
  }
  ready_ = false;
  recorder.Flush(std::chrono::milliseconds(1000));
  caches.Stop();
  return result;
}

void Controller::WireReconciler(Reconciler* reconciler, kube::WorkQueue* queue) {
  reconciler->SetEnqueueAfter(
      [queue](const std::string& key, std::chrono::milliseconds d) { queue->AddAfter(key, d); });
  // Defragmentation moves ("started" / "completed" / "failed") reach the metrics here only.
  reconciler->defrag()->SetMoveHook([this](std::string_view result) {
    if (metrics_ != nullptr) metrics_->CountDefragMove(result);
  });
}

// Scrape-time metrics and the liveness probe read the queue and the informers while Run() runs;
// DetachProbes() detaches both before they go out of scope.
void Controller::AttachProbes(kube::WorkQueue* queue, const Caches* caches) {
  {
    std::lock_guard<std::mutex> l(queue_mu_);
    ready_keys_ = [queue] { return queue->Len(); };
  }
  if (metrics_ != nullptr) {
    metrics_->SetCollectHook([this, queue, caches] {
      metrics_->SetWorkQueue(queue->Len(), queue->NumWaiting());
      metrics_->SetLeader(leader_.load());
      metrics_->SetInformer("nvl72jobs", caches->jobs.Stats(), caches->jobs.Size());
      metrics_->SetInformer("pods", caches->pods.Stats(), caches->pods.Size());
      metrics_->SetInformer("nodes", caches->nodes.Stats(), caches->nodes.Size());
      const auto job_list = caches->jobs.List();
      metrics_->SetJobStates(CountJobStates(job_list));
      metrics_->SetStuckJobs(CountStuckJobs(job_list, std::chrono::system_clock::now(),
                                            std::chrono::seconds(options_.stuck_seconds)));
    });
  }
}

void Controller::DetachProbes() {
  if (metrics_ != nullptr) {
    metrics_->SetCollectHook({});
    metrics_->SetLeader(false);
  }
  std::lock_guard<std::mutex> l(queue_mu_);
  ready_keys_ = nullptr;
}

// Starts the informers and waits for their caches; false if `stop` came first.
bool Controller::SyncCaches(std::stop_token stop, Caches* caches) {
  caches->Start();
  NVL72_LOG(kInfo) << "waiting for caches to sync";
  if (!caches->WaitForSync(stop)) return false;
  NVL72_LOG(kInfo) << "caches synced: " << caches->jobs.Size() << " jobs, " << caches->pods.Size()
                   << " pods, " << caches->nodes.Size() << " nodes";
  ready_ = true;
  return true;
}

// The workers run while this replica holds the lease; a lost lease ends Run().
Status Controller::RunLeaderElection(std::stop_token stop, kube::Clock* clock,
                                     const std::string& identity, Workers* workers) {
  kube::LeaderElectionConfig lec;
  lec.lease_namespace = options_.lease_namespace;
  lec.lease_name = options_.lease_name;
  lec.identity = identity;
  lec.on_started_leading = [workers] { workers->Start(); };
  lec.on_stopped_leading = [] { NVL72_LOG(kInfo) << "stopped leading"; };
  lec.on_new_leader = [identity](const std::string& id) {
    if (id != identity) NVL72_LOG(kInfo) << "leader is " << id;
  };
  kube::LeaderElector elector(client_, clock, lec);
  Status result = elector.Run(stop);
  if (result.code() == StatusCode::kCancelled) result = Status::Ok();
  workers->Stop();
  return result;
}

// Without leader election the workers run from the start until `stop`.
void Controller::RunWithoutLeaderElection(std::stop_token stop, Workers* workers) {
  workers->Start();
  std::mutex wait_mu;
  std::condition_variable_any wait_cv;
  std::unique_lock<std::mutex> l(wait_mu);
  wait_cv.wait(l, stop, [] { return false; });
  workers->Stop();
}

}  // namespace nvl72::op
