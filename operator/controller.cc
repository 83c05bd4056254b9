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

}  // namespace

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
  const std::string job_ns = options_.ns;

  // The caches keep only what the operator reads (model/slim.h): a cached pod of the API server's
  // shape costs ~26 kB of heap, a slim one a few kB.
  kube::InformerOptions jobs_opts;
  jobs_opts.resource = Nvl72JobsResource();
  jobs_opts.ns = job_ns;
  jobs_opts.transform = kube::DropManagedFields;
  model::ClusterOptions slim;
  slim.domain_label = options_.domain_label;
  slim.domain_label_fallback = options_.domain_label_fallback;
  slim.gpu_resource = options_.gpu_resource;
  kube::InformerOptions pods_opts;
  pods_opts.resource = kube::kPods;  // all namespaces: every GPU pod counts
  pods_opts.transform = [slim](Json& pod) { model::SlimPod(pod, slim); };
  kube::InformerOptions nodes_opts;
  nodes_opts.resource = kube::kNodes;
  nodes_opts.transform = [slim](Json& node) { model::SlimNode(node, slim); };
  // A token revoked or expired while we run, RBAC taken away, the API server gone: the informers
  // retry with backoff and keep their caches; say so in the log (the counts are in
  // nvl72_operator_watch_errors_total).
  static_assert(
      static_cast<int>(LogLevel::kInfo) == static_cast<int>(kube::InformerErrorSeverity::kInfo) &&
      static_cast<int>(LogLevel::kWarning) ==
          static_cast<int>(kube::InformerErrorSeverity::kWarning) &&
      static_cast<int>(LogLevel::kError) == static_cast<int>(kube::InformerErrorSeverity::kError));
  for (kube::InformerOptions* o : {&jobs_opts, &pods_opts, &nodes_opts}) {
    o->on_error = [r = o->resource](const Status& s, int64_t n) {
      const kube::InformerErrorSeverity sev = kube::InformerErrorSeverityOf(s, n);
      if (sev != kube::InformerErrorSeverity::kNone) {
        LogLine(static_cast<LogLevel>(sev), kube::DescribeInformerError(r, s, n));
      }
    };
  }
  kube::Informer jobs(client_, clock, jobs_opts);
  kube::Informer pods(client_, clock, pods_opts);
  kube::Informer nodes(client_, clock, nodes_opts);
  pods.AddIndexer(InformerStore::kJobIndex, &InformerStore::IndexPodByJob);

  const std::string admission = Reconciler::kAdmissionKey;
  jobs.AddEventHandler({
      .on_add = [&](const ObjectPtr& o) { queue.Add(kube::KeyOf(*o)); },
      .on_update = [&](const ObjectPtr&, const ObjectPtr& o) { queue.Add(kube::KeyOf(*o)); },
      .on_delete =
          [&](const ObjectPtr& o) {
            queue.Add(kube::KeyOf(*o));
            queue.Add(admission);
          },
  });
  auto pod_changed = [&](const ObjectPtr& old_obj, const ObjectPtr& o, bool deleted) {
    std::string key = JobKeyOfPod(*o);
    if (!key.empty()) queue.Add(key);
    // GPUs freed by a pod that ended or went away: other jobs may fit now.
    const bool ended =
        model::PodTerminated(*o) && (old_obj == nullptr || !model::PodTerminated(*old_obj));
    if ((deleted || ended) && model::PodGpuRequest(*o, options_.gpu_resource) > 0)
      queue.Add(admission);
  };
  pods.AddEventHandler({
      .on_add = [&](const ObjectPtr& o) { pod_changed(nullptr, o, false); },
      .on_update = [&](const ObjectPtr& old_obj,
                       const ObjectPtr& o) { pod_changed(old_obj, o, false); },
      .on_delete = [&](const ObjectPtr& o) { pod_changed(nullptr, o, true); },
  });
  // Jobs with a rank on a node whose health changed re-check their recovery (operator/recovery.h).
  auto node_jobs = [&](const ObjectPtr& n) {
    for (const auto& key : JobsWithRankOn(jobs.List(), kube::Name(*n))) queue.Add(key);
  };
  nodes.AddEventHandler({
      .on_add = [&](const ObjectPtr&) { queue.Add(admission); },
      .on_update =
          [&](const ObjectPtr& old_obj, const ObjectPtr& o) {
            if (NodeDigest(*old_obj) != NodeDigest(*o)) {
              queue.Add(admission);
              node_jobs(o);
            }
          },
      .on_delete =
          [&](const ObjectPtr& o) {
            queue.Add(admission);
            node_jobs(o);
          },
  });

  const std::string identity = options_.identity.empty() ? DefaultIdentity() : options_.identity;
  kube::EventRecorder recorder(
      client_, clock,
      {.reporting_controller = "nvl72.dev/operator", .reporting_instance = identity});
  InformerStore store(&jobs, &pods, &nodes);
  ReconcilerOptions ropts;
  ropts.cluster.domain_label = options_.domain_label;
  ropts.cluster.domain_label_fallback = options_.domain_label_fallback;
  ropts.cluster.gpu_resource = options_.gpu_resource;
  ropts.policy = options_.policy;
  ropts.spares_per_domain = options_.spares_per_domain;
  ropts.spare_reserve = options_.spare_reserve;
  ropts.master_port = options_.master_port;
  if (options_.recovery_wait_seconds >= 0) {
    ropts.recovery.wait_bound = std::chrono::seconds(options_.recovery_wait_seconds);
  }
  ropts.recovery.move_cordoned_ranks = options_.cordoned_ranks == "move";
  ropts.recovery.stale_pod_grace_seconds = options_.defrag_grace_seconds;
  ropts.defrag.enabled = options_.defrag;
  ropts.defrag.max_concurrent_moves = options_.defrag_max_concurrent_moves;
  ropts.defrag.min_interval = std::chrono::seconds(options_.defrag_min_interval_seconds);
  ropts.defrag.cooldown = std::chrono::seconds(options_.defrag_cooldown_seconds);
  ropts.defrag.move_timeout = std::chrono::seconds(options_.defrag_move_timeout_seconds);
  ropts.safety_net.bound = std::chrono::seconds(options_.unschedulable_replan_seconds);
  ropts.stuck_after = std::chrono::seconds(options_.stuck_seconds);
  ropts.safety_net.max_replans = options_.max_replans;
  Reconciler reconciler(
      client_, &store, &recorder, metrics_, [&](const std::string& key) { queue.Add(key); }, ropts);
  reconciler.SetEnqueueAfter(
      [&](const std::string& key, std::chrono::milliseconds d) { queue.AddAfter(key, d); });
  // Defragmentation moves ("started" / "completed" / "failed") reach the metrics here only.
  reconciler.defrag()->SetMoveHook([this](std::string_view result) {
    if (metrics_ != nullptr) metrics_->CountDefragMove(result);
  });

  // Scrape-time metrics and the liveness probe read the queue and the informers while Run() runs;
  // the guard detaches both before they go out of scope.
  {
    std::lock_guard<std::mutex> l(queue_mu_);
    ready_keys_ = [&queue] { return queue.Len(); };
  }
  if (metrics_ != nullptr) {
    metrics_->SetCollectHook([&] {
      metrics_->SetWorkQueue(queue.Len(), queue.NumWaiting());
      metrics_->SetLeader(leader_.load());
      metrics_->SetInformer("nvl72jobs", jobs.Stats(), jobs.Size());
      metrics_->SetInformer("pods", pods.Stats(), pods.Size());
      metrics_->SetInformer("nodes", nodes.Stats(), nodes.Size());
      const auto job_list = jobs.List();
      metrics_->SetJobStates(CountJobStates(job_list));
      metrics_->SetStuckJobs(CountStuckJobs(job_list, std::chrono::system_clock::now(),
                                            std::chrono::seconds(options_.stuck_seconds)));
    });
  }
  struct Detach {
    Controller* c;
    ~Detach() {
      if (c->metrics_ != nullptr) {
        c->metrics_->SetCollectHook({});
        c->metrics_->SetLeader(false);
      }
      std::lock_guard<std::mutex> l(c->queue_mu_);
      c->ready_keys_ = nullptr;
    }
  } detach{this};

  jobs.Start();
  pods.Start();
  nodes.Start();
  NVL72_LOG(kInfo) << "waiting for caches to sync";
  while (!stop.stop_requested()) {
    if (jobs.WaitForSync(std::chrono::milliseconds(200)) &&
        pods.WaitForSync(std::chrono::milliseconds(200)) &&
        nodes.WaitForSync(std::chrono::milliseconds(200))) {
      break;
    }
  }
  if (stop.stop_requested()) return Status::Ok();
  NVL72_LOG(kInfo) << "caches synced: " << jobs.Size() << " jobs, " << pods.Size() << " pods, "
                   << nodes.Size() << " nodes";
  ready_ = true;

  std::vector<std::jthread> workers;
  std::mutex mu;
  std::condition_variable cv;
  auto start_workers = [&] {
    MarkProgress();
    leader_ = true;
    NVL72_LOG(kInfo) << "starting " << options_.workers << " workers as " << identity;
    queue.Add(admission);
    for (const auto& key : jobs.ListKeys()) queue.Add(key);
    for (int i = 0; i < options_.workers; ++i) {
      workers.emplace_back([&] {
        while (auto key = queue.Get()) {
          Status s = reconciler.Reconcile(*key);
          if (s.ok()) {
            queue.Forget(*key);
          } else {
            queue.AddRateLimited(*key);
            if (metrics_ != nullptr) metrics_->CountRetry();
          }
          queue.Done(*key);
          MarkProgress();
        }
      });
    }
    // Safety net: an admission pass every admission_resync_seconds.
    if (options_.admission_resync_seconds > 0) {
      workers.emplace_back([&](std::stop_token st) {
        std::unique_lock<std::mutex> l(mu);
        while (!st.stop_requested() && !stop.stop_requested()) {
          cv.wait_for(l, std::chrono::seconds(options_.admission_resync_seconds));
          queue.Add(admission);
        }
      });
    }
  };
  auto stop_workers = [&] {
    leader_ = false;
    queue.ShutDown();
    for (auto& w : workers) w.request_stop();
    cv.notify_all();
    workers.clear();  // joins
  };

  Status result;
  if (options_.leader_elect) {
    kube::LeaderElectionConfig lec;
    lec.lease_namespace = options_.lease_namespace;
    lec.lease_name = options_.lease_name;
    lec.identity = identity;
    lec.on_started_leading = start_workers;
    lec.on_stopped_leading = [&] { NVL72_LOG(kInfo) << "stopped leading"; };
    lec.on_new_leader = [&](const std::string& id) {
      if (id != identity) NVL72_LOG(kInfo) << "leader is " << id;
    };
    kube::LeaderElector elector(client_, clock, lec);
    result = elector.Run(stop);
    if (result.code() == StatusCode::kCancelled) result = Status::Ok();
    stop_workers();
  } else {
    start_workers();
    std::mutex wait_mu;
    std::condition_variable_any wait_cv;
    std::unique_lock<std::mutex> l(wait_mu);
    wait_cv.wait(l, stop, [] { return false; });
    stop_workers();
  }
  ready_ = false;
  recorder.Flush(std::chrono::milliseconds(1000));
  jobs.Stop();
  pods.Stop();
  nodes.Stop();
  return result;
}

}  // namespace nvl72::op
