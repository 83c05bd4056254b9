#include "scheduler-plugin/cluster_cache.h"

#include <unordered_set>

#include "kube/object.h"
#include "model/slim.h"

namespace nvl72::extender {

// ---- StaticViewSource ----

std::shared_ptr<const ClusterView> StaticViewSource::View() const {
  std::lock_guard<std::mutex> l(mu_);
  return view_;
}
kube::ObjectPtr StaticViewSource::GetPod(std::string_view ns, std::string_view name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = pods_.find(kube::MakeKey(ns, name));
  return it == pods_.end() ? nullptr : it->second;
}
void StaticViewSource::Assume(const std::string& pod_key, const std::string& node) {
  std::lock_guard<std::mutex> l(mu_);
  assumed_[pod_key] = node;
}
void StaticViewSource::SetView(std::shared_ptr<const ClusterView> view) {
  std::lock_guard<std::mutex> l(mu_);
  view_ = std::move(view);
}
void StaticViewSource::AddPod(const Json& pod) {
  std::lock_guard<std::mutex> l(mu_);
  pods_[kube::KeyOf(pod)] = std::make_shared<const Json>(pod);
}
std::map<std::string, std::string> StaticViewSource::assumed() const {
  std::lock_guard<std::mutex> l(mu_);
  return assumed_;
}

// ---- ClusterCache ----

ClusterCache::ClusterCache(kube::Client* client, kube::Clock* clock, ClusterCacheOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {
  // The caches keep only what the extender reads (model/slim.h): at 20,000 pods the objects as the
  // API server sends them would take ~0.5 GB of heap.
  auto make = [&](const kube::ResourceRef& r, kube::ObjectTransform transform) {
    kube::InformerOptions o = options_.informer_template;
    o.resource = r;
    o.ns = "";
    o.transform = std::move(transform);
    if (options_.on_informer_error) {
      o.on_error = [cb = options_.on_informer_error, r](const Status& s, int64_t n) {
        cb(r, s, n);
      };
    }
    auto inf = std::make_unique<kube::Informer>(client_, clock_, o);
    kube::EventHandlers h;
    h.on_add = [this](const kube::ObjectPtr&) { MarkDirty(); };
    h.on_update = [this](const kube::ObjectPtr& a, const kube::ObjectPtr& b) {
      if (a != b) MarkDirty();  // resync (old == new) changes nothing
    };
    h.on_delete = [this](const kube::ObjectPtr&) { MarkDirty(); };
    inf->AddEventHandler(std::move(h));
    return inf;
  };
  const model::ClusterOptions slim = options_.view.cluster;
  nodes_ = make(kube::kNodes, [slim](Json& node) { model::SlimNode(node, slim); });
  pods_ = make(kube::kPods, [slim](Json& pod) { model::SlimPod(pod, slim); });
  if (options_.watch_jobs) jobs_ = make(options_.jobs_resource, kube::DropManagedFields);
  auto empty = std::make_shared<ClusterView>();
  empty->synced = false;
  view_ = std::move(empty);
}

ClusterCache::~ClusterCache() { Stop(); }

void ClusterCache::Start() {
  nodes_->Start();
  pods_->Start();
  if (jobs_) jobs_->Start();
  thread_ = std::jthread([this](std::stop_token st) { Run(st); });
}

void ClusterCache::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    cv_.notify_all();
    thread_.join();
  }
  nodes_->Stop();
  pods_->Stop();
  if (jobs_) jobs_->Stop();
}

std::shared_ptr<const ClusterView> ClusterCache::View() const {
  std::lock_guard<std::mutex> l(mu_);
  return view_;
}

bool ClusterCache::Ready() const { return View()->synced; }

kube::ObjectPtr ClusterCache::GetPod(std::string_view ns, std::string_view name) const {
  return pods_->Get(ns, name);
}

void ClusterCache::Assume(const std::string& pod_key, const std::string& node) {
  {
    std::lock_guard<std::mutex> l(mu_);
    assumed_[pod_key] = Assumed{node, clock_->Now()};
  }
  MarkDirty();
}

std::vector<ClusterCache::InformerReport> ClusterCache::Informers() const {
  std::vector<InformerReport> out;
  for (const auto& [name, inf] :
       {std::pair<const char*, const kube::Informer*>{"nodes", nodes_.get()},
        {"pods", pods_.get()},
        {"nvl72jobs", jobs_.get()}}) {
    if (inf != nullptr) out.push_back({name, inf->Stats(), inf->Size()});
  }
  return out;
}

int64_t ClusterCache::rebuilds() const {
  std::lock_guard<std::mutex> l(mu_);
  return rebuilds_;
}

bool ClusterCache::AllSynced() const {
  return nodes_->HasSynced() && pods_->HasSynced() && (!jobs_ || jobs_->HasSynced());
}

void ClusterCache::MarkDirty() {
  {
    std::lock_guard<std::mutex> l(mu_);
    dirty_ = true;
  }
  cv_.notify_all();
}

const ClusterCache::PodMemo& ClusterCache::MemoOf(const kube::ObjectPtr& obj,
                                                  std::unordered_map<const Json*, PodMemo>& memo) {
  auto old = pod_memo_.find(obj.get());
  const auto it =
      old != pod_memo_.end()
          ? memo.emplace(obj.get(), std::move(old->second)).first
          : memo.emplace(obj.get(),
                         PodMemo{obj, kube::KeyOf(*obj),
                                 model::PodFactsOf(*obj, options_.view.cluster.gpu_resource)})
                .first;
  return it->second;
}

std::vector<const model::PodFacts*> ClusterCache::PodFactsWithAssumed(
    const std::vector<kube::ObjectPtr>& pods, const std::map<std::string, Assumed>& assumed,
    std::vector<model::PodFacts>* overridden, std::vector<std::string>* settled) {
  std::unordered_map<const Json*, PodMemo> memo;
  memo.reserve(pods.size());
  std::vector<const model::PodFacts*> p;
  p.reserve(pods.size());
  size_t assumed_seen = 0;
  const auto now = clock_->Now();
  for (const kube::ObjectPtr& obj : pods) {
    const PodMemo& m = MemoOf(obj, memo);
    const model::PodFacts* facts = &m.facts;
    if (!assumed.empty()) {
      if (auto a = assumed.find(m.key); a != assumed.end()) {
        ++assumed_seen;
        if (now - a->second.at > options_.assume_ttl || !m.facts.node_name.empty()) {
          settled->push_back(m.key);
        } else {
          overridden->push_back(m.facts);
          overridden->back().node_name = a->second.node;
          facts = &overridden->back();
        }
      }
    }
    p.push_back(facts);
  }
  if (assumed_seen < assumed.size()) {  // assumed pods no longer in the cache
    std::unordered_set<std::string_view> listed;
    for (const auto& [obj, m] : memo) listed.insert(m.key);
    for (const auto& [key, a] : assumed) {
      if (!listed.contains(key)) settled->push_back(key);
    }
  }
  pod_memo_ = std::move(memo);  // entries of objects gone or replaced are dropped
  return p;
}

void ClusterCache::RebuildNow() {
  std::lock_guard<std::mutex> rl(rebuild_mu_);
  const bool synced = AllSynced();
  std::map<std::string, Assumed> assumed;
  {
    std::lock_guard<std::mutex> l(mu_);
    dirty_ = false;
    assumed = assumed_;
  }
  const std::vector<kube::ObjectPtr> nodes = nodes_->List();
  const std::vector<kube::ObjectPtr> pods = pods_->List();
  const std::vector<kube::ObjectPtr> jobs = jobs_ ? jobs_->List() : std::vector<kube::ObjectPtr>();

  // Pod facts from the memo (the JSON is read only for objects new since the last rebuild), with
  // the assumed bindings: a pod this extender bound that the cache still shows unbound counts on
  // its node; one the cache shows bound (or gone), or older than the TTL, is forgotten.
  std::vector<model::PodFacts> overridden;
  overridden.reserve(assumed.size());  // never reallocates: pointers into it are taken below
  std::vector<std::string> settled;
  const std::vector<const model::PodFacts*> p =
      PodFactsWithAssumed(pods, assumed, &overridden, &settled);

  std::vector<const Json*> n, j;
  n.reserve(nodes.size());
  j.reserve(jobs.size());
  for (const auto& o : nodes) n.push_back(o.get());
  for (const auto& o : jobs) j.push_back(o.get());
  ViewOptions vo = options_.view;
  vo.cluster.now = clock_->WallNow();
  auto view = BuildViewFromFacts(n, p, j, vo, synced);

  std::lock_guard<std::mutex> l(mu_);
  for (const auto& key : settled) {
    auto it = assumed_.find(key);
    // Only forget the entry we looked at, not a newer Assume() of the same pod.
    if (it != assumed_.end() && it->second.at == assumed[key].at) assumed_.erase(it);
  }
  view_ = std::move(view);
  ++rebuilds_;
}

void ClusterCache::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    const bool synced = AllSynced();
    {
      std::unique_lock<std::mutex> l(mu_);
      if (!synced) {  // nothing to publish before the first complete lists
        cv_.wait_for(l, std::chrono::milliseconds(20), [&] { return stop.stop_requested(); });
        continue;
      }
      cv_.wait_for(l, std::chrono::seconds(1),
                   [&] { return dirty_ || !view_->synced || stop.stop_requested(); });
      if (stop.stop_requested()) return;
      if (!dirty_ && view_->synced) continue;
    }
    RebuildNow();
    // Debounce: events of the next interval are folded into one rebuild.
    clock_->SleepFor(options_.min_rebuild_interval);
  }
}

}  // namespace nvl72::extender
