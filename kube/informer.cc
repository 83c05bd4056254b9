#include "kube/informer.h"

#include <algorithm>

#include "kube/backoff.h"

namespace nvl72::kube {

std::vector<std::string> PodNodeNameIndex(const Json& pod) {
  const Json& n = AtPath(pod, "/spec/nodeName");
  if (n.is_string() && !n.get<std::string>().empty()) return {n.get<std::string>()};
  return {};
}

std::vector<std::string> NamespaceIndex(const Json& obj) {
  std::string ns = Namespace(obj);
  if (ns.empty()) return {};
  return {ns};
}

bool ShouldLogInformerFailure(int64_t n) { return n == 1 || n == 2 || (n > 0 && n % 10 == 0); }

InformerErrorSeverity InformerErrorSeverityOf(const Status& status, int64_t n) {
  if (status.ok()) return InformerErrorSeverity::kInfo;
  if (!ShouldLogInformerFailure(n)) return InformerErrorSeverity::kNone;
  const bool serious = IsUnauthorized(status) || IsForbidden(status) || n >= 10;
  return serious ? InformerErrorSeverity::kError : InformerErrorSeverity::kWarning;
}

std::string DescribeInformerError(const ResourceRef& resource, const Status& status, int64_t n) {
  const std::string what = "list/watch of " + resource.resource;
  if (status.ok())
    return what + " works again after " + std::to_string(n) + " failure" + (n == 1 ? "" : "s");
  std::string msg = what + " failed (" + std::to_string(n) +
                    " in a row; retrying with backoff, the cache keeps " +
                    "its last state): " + status.ToString();
  if (IsUnauthorized(status)) {
    msg += " - the API server no longer accepts our credentials (token expired or revoked?)";
  } else if (IsForbidden(status)) {
    msg += " - RBAC does not allow it (ClusterRole changed?)";
  }
  return msg;
}

Informer::Informer(Client* client, Clock* clock, InformerOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

void Informer::AddIndexer(const std::string& name, IndexFunc func) {
  std::lock_guard<std::mutex> l(mu_);
  indexes_[name].func = std::move(func);
}

void Informer::AddEventHandler(EventHandlers handlers) { handlers_.push_back(std::move(handlers)); }

void Informer::Start() {
  if (started_) return;
  started_ = true;
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
  if (options_.resync_period.count() > 0) {
    resync_thread_ = std::jthread([this](std::stop_token stop) { ResyncLoop(stop); });
  }
}

void Informer::Stop() {
  for (std::jthread* t : {&thread_, &resync_thread_}) {
    if (!t->joinable()) continue;
    t->request_stop();
    { std::lock_guard<std::mutex> l(sleep_mu_); }
    sleep_cv_.notify_all();
    t->join();
  }
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> l(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  return synced_cv_.wait_for(l, timeout, [&] { return synced_; });
}

ObjectPtr Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second;
}

ObjectPtr Informer::Get(std::string_view ns, std::string_view name) const {
  return Get(MakeKey(ns, name));
}

std::vector<ObjectPtr> Informer::List() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(items_.size());
  for (auto& [k, v] : items_) out.push_back(v);
  return out;
}

std::vector<std::string> Informer::ListKeys() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (auto& [k, v] : items_) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<ObjectPtr> Informer::ByIndex(const std::string& index_name,
                                         const std::string& value) const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<ObjectPtr> out;
  auto idx = indexes_.find(index_name);
  if (idx == indexes_.end()) return out;
  auto keys = idx->second.keys_by_value.find(value);
  if (keys == idx->second.keys_by_value.end()) return out;
  for (const std::string& k : keys->second) {
    auto it = items_.find(k);
    if (it != items_.end()) out.push_back(it->second);
  }
  return out;
}

size_t Informer::Size() const {
  std::lock_guard<std::mutex> l(mu_);
  return items_.size();
}

InformerStats Informer::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  InformerStats s = stats_;
  s.last_resource_version = resource_version_;
  return s;
}

void Informer::StoreLocked(const std::string& key, const ObjectPtr& obj) {
  auto it = items_.find(key);
  for (auto& [name, index] : indexes_) {
    if (it != items_.end()) {
      for (const std::string& v : index.func(*it->second)) {
        auto kv = index.keys_by_value.find(v);
        if (kv == index.keys_by_value.end()) continue;
        kv->second.erase(key);
        if (kv->second.empty()) index.keys_by_value.erase(kv);
      }
    }
    for (const std::string& v : index.func(*obj)) index.keys_by_value[v].insert(key);
  }
  items_[key] = obj;
}

void Informer::RemoveLocked(const std::string& key) {
  auto it = items_.find(key);
  if (it == items_.end()) return;
  for (auto& [name, index] : indexes_) {
    for (const std::string& v : index.func(*it->second)) {
      auto kv = index.keys_by_value.find(v);
      if (kv == index.keys_by_value.end()) continue;
      kv->second.erase(key);
      if (kv->second.empty()) index.keys_by_value.erase(kv);
    }
  }
  items_.erase(it);
}

bool Informer::SleepUnlessStopped(Clock::Duration d, std::stop_token stop) {
  // Registered before taking the lock: it runs inline if stop was already requested.
  std::stop_callback wake(stop, [this] {
    std::lock_guard<std::mutex> g(sleep_mu_);
    sleep_cv_.notify_all();
  });
  std::unique_lock<std::mutex> l(sleep_mu_);
  clock_->WaitUntil(sleep_cv_, l, clock_->Now() + d, [&] { return stop.stop_requested(); });
  return !stop.stop_requested();
}

Status Informer::ListAndReplace() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  auto listed = ListAll(*client_, options_.resource, options_.ns, lo, options_.transform);
  if (!listed.ok()) return listed.status();

  struct Delivery {
    int kind;  // 0 add, 1 update, 2 delete
    ObjectPtr old_obj, new_obj;
  };
  std::vector<Delivery> deliveries;
  {
    std::lock_guard<std::mutex> l(mu_);
    std::unordered_map<std::string, ObjectPtr> fresh;
    std::vector<std::pair<std::string, ObjectPtr>> in_order;  // handlers see list order
    fresh.reserve(listed->items.size());
    in_order.reserve(listed->items.size());
    for (Json& item : listed->items) {
      std::string key = KeyOf(item);
      ObjectPtr obj = std::make_shared<const Json>(std::move(item));
      fresh.emplace(key, obj);
      in_order.emplace_back(std::move(key), std::move(obj));
    }
    for (auto& [key, obj] : in_order) {
      auto it = items_.find(key);
      if (it == items_.end()) {
        deliveries.push_back({0, nullptr, obj});
      } else if (ResourceVersion(*it->second) != ResourceVersion(*obj)) {
        deliveries.push_back({1, it->second, obj});
      }
    }
    for (auto& [key, obj] : items_) {
      if (!fresh.count(key)) deliveries.push_back({2, obj, nullptr});
    }
    for (auto& [name, index] : indexes_) index.keys_by_value.clear();
    items_.clear();
    for (auto& [key, obj] : fresh) StoreLocked(key, obj);
    resource_version_ = listed->resource_version;
    if (stats_.lists > 0) ++stats_.relists;
    ++stats_.lists;
  }
  {
    std::lock_guard<std::mutex> hl(handler_mu_);
    for (const Delivery& d : deliveries) {
      for (const EventHandlers& h : handlers_) {
        if (d.kind == 0 && h.on_add) h.on_add(d.new_obj);
        if (d.kind == 1 && h.on_update) h.on_update(d.old_obj, d.new_obj);
        if (d.kind == 2 && h.on_delete) h.on_delete(d.old_obj);
      }
    }
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    synced_ = true;
  }
  synced_cv_.notify_all();
  return Status::Ok();
}

Status Informer::WatchOnce(std::stop_token stop, int64_t* events) {
  WatchOptions wo;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.allow_bookmarks = true;
  wo.timeout_seconds = options_.watch_timeout_seconds;
  {
    std::lock_guard<std::mutex> l(mu_);
    wo.resource_version = resource_version_;
  }
  return client_->Watch(
      options_.resource, options_.ns, wo,
      [&](WatchEvent&& ev) {
        Worked();  // the first event (or bookmark) after failures shows the watch works again
        std::string rv = ResourceVersion(ev.object);
        if (ev.type == WatchEventType::kBookmark) {
          std::lock_guard<std::mutex> l(mu_);
          if (!rv.empty()) resource_version_ = rv;
          return !stop.stop_requested();
        }
        if (options_.transform) options_.transform(ev.object);
        ObjectPtr obj = std::make_shared<const Json>(std::move(ev.object));
        std::string key = KeyOf(*obj);
        ObjectPtr old;
        {
          std::lock_guard<std::mutex> l(mu_);
          auto it = items_.find(key);
          if (it != items_.end()) old = it->second;
          if (ev.type == WatchEventType::kDeleted)
            RemoveLocked(key);
          else
            StoreLocked(key, obj);
          if (!rv.empty()) resource_version_ = rv;
          ++stats_.events;
        }
        ++*events;
        std::lock_guard<std::mutex> hl(handler_mu_);
        for (const EventHandlers& h : handlers_) {
          if (ev.type == WatchEventType::kDeleted) {
            if (h.on_delete) h.on_delete(old ? old : obj);
          } else if (old) {
            if (h.on_update) h.on_update(old, obj);
          } else if (h.on_add) {
            h.on_add(obj);
          }
        }
        return !stop.stop_requested();
      },
      stop);
}

void Informer::Worked() {
  if (failures_in_a_row_ > 0 && options_.on_error)
    options_.on_error(Status::Ok(), failures_in_a_row_);
  failures_in_a_row_ = 0;
}

void Informer::Run(std::stop_token stop) {
  Backoff backoff(options_.initial_backoff, options_.max_backoff, 0.2);
  bool need_list = true;
  bool first_watch = true;
  int empty_ok_streak = 0;
  auto failed = [&](const Status& s) {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.watch_errors;
    }
    ++failures_in_a_row_;
    if (options_.on_error) options_.on_error(s, failures_in_a_row_);
  };
  while (!stop.stop_requested()) {
    if (need_list) {
      Status s = ListAndReplace();
      if (!s.ok()) {
        failed(s);
        if (!SleepUnlessStopped(backoff.Next(), stop)) break;
        continue;
      }
      Worked();
      need_list = false;
      backoff.Reset();
    }
    if (!first_watch) {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.watch_restarts;
    }
    first_watch = false;
    int64_t events = 0;
    Status s = WatchOnce(stop, &events);
    if (stop.stop_requested()) break;
    if (IsGone(s)) {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.gone;
      need_list = true;
      continue;
    }
    if (s.ok()) Worked();  // a watch the server ended normally, even without events
    if (s.ok()) {
      // A server-side timeout: resume at once. Repeated empty watches mean something is wrong:
      // back off rather than spin.
      empty_ok_streak = events == 0 ? empty_ok_streak + 1 : 0;
      if (empty_ok_streak >= 2 && !SleepUnlessStopped(backoff.Next(), stop)) break;
      if (events > 0) backoff.Reset();
      continue;
    }
    failed(s);
    if (events > 0) backoff.Reset();
    if (!SleepUnlessStopped(backoff.Next(), stop)) break;
  }
}

void Informer::ResyncLoop(std::stop_token stop) {
  while (SleepUnlessStopped(options_.resync_period, stop)) {
    if (!HasSynced()) continue;
    std::vector<ObjectPtr> all = List();
    std::lock_guard<std::mutex> hl(handler_mu_);
    for (const ObjectPtr& obj : all) {
      for (const EventHandlers& h : handlers_) {
        if (h.on_update) h.on_update(obj, obj);
      }
    }
  }
}

}  // namespace nvl72::kube
