// Informer: list + watch of one resource into a thread-safe, read-only cache (client-go
// SharedIndexInformer for the parts we use).
//
// Behaviour:
//  - Start() spawns one thread that Lists (paged) and then Watches from the list's resourceVersion,
//    keeping the cache and delivering OnAdd/OnUpdate/OnDelete to the registered handlers in order.
//  - A watch that ends normally (server timeout) is resumed from the last resourceVersion seen
//    (events or bookmarks), no relist. A watch that fails (connection error) is retried with
//    exponential backoff (initial_backoff .. max_backoff, jittered), also resuming from the last
//    resourceVersion. A 410 Gone (HTTP or ERROR event) relists and replaces the cache; the
//    differences between the old cache and the new list are delivered as Add/Update/Delete.
//  - HasSynced() becomes true after the first complete list has been stored and its handlers
//  called.
//  - Every resync_period (if > 0) OnUpdate(obj, obj) is delivered for every cached object.
//  - Objects in the cache are shared_ptr<const Json>: never modify them; copy first.
//
// Handlers run on the informer thread, one at a time, without the cache lock held (they may read
// the cache). A slow handler delays the cache: handlers should just enqueue keys into a WorkQueue.
//
// Thread-safety: AddIndexer/AddEventHandler REQUIRE: before Start(). Everything else is safe from
// any thread. Stop() (or the destructor) joins the thread; do not call it from a handler.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kube/client.h"
#include "kube/clock.h"

namespace nvl72::kube {

using ObjectPtr = std::shared_ptr<const Json>;

// Returns the index values of an object (zero or more).
using IndexFunc = std::function<std::vector<std::string>(const Json& obj)>;
// Index pods by spec.nodeName (no value for unscheduled pods).
std::vector<std::string> PodNodeNameIndex(const Json& pod);
// Index by metadata.namespace.
std::vector<std::string> NamespaceIndex(const Json& obj);

struct EventHandlers {
  std::function<void(const ObjectPtr& obj)> on_add;
  // Also called on resync with old == new.
  std::function<void(const ObjectPtr& old_obj, const ObjectPtr& new_obj)> on_update;
  // `obj` is the last state known to the cache (after a relist it may be older than the deletion).
  std::function<void(const ObjectPtr& obj)> on_delete;
};

struct InformerOptions {
  ResourceRef resource{};
  std::string ns{};  // "" = all namespaces (or cluster-scoped)
  std::string label_selector{};
  std::string field_selector{};
  int64_t page_size = 500;
  std::chrono::milliseconds resync_period{0};  // 0 = no periodic resync
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{30000};
  int watch_timeout_seconds = 0;  // 0 = Client default (300 s + jitter)
  // Applied to every listed and watched object before it is stored or handed to handlers (e.g.
  // kube::DropManagedFields, model::SlimPod); empty = objects kept as the API server sent them.
  ObjectTransform transform{};
  // Called on the informer thread after every failed list or watch (a 410 Gone is a relist, not a
  // failure) with the error and the number of failures in a row, and once with an OK status and
  // the number of failures before it when a list or watch succeeds again. The cache keeps its last
  // state meanwhile. Empty = failures are only counted in Stats(). Must not block.
  std::function<void(const Status& status, int64_t failures_in_a_row)> on_error{};
};

// For on_error handlers: whether the n-th failure in a row is worth a log line (the 1st, 2nd, then
// every 10th: with the default 30 s maximum backoff about one line per 5 minutes of an outage).
bool ShouldLogInformerFailure(int64_t failures_in_a_row);
// How loud an on_error report should be, numbered like the operator's and the extender's log
// levels: kNone when ShouldLogInformerFailure says no line; kInfo for "works again"; kWarning for a
// failure (a dropped watch is routine); kError when credentials are refused (401), RBAC forbids
// (403), or from the 10th failure in a row on.
enum class InformerErrorSeverity { kNone = -1, kInfo = 1, kWarning = 2, kError = 3 };
InformerErrorSeverity InformerErrorSeverityOf(const Status& status, int64_t failures_in_a_row);
// A one-line description for on_error handlers: "list/watch of pods failed (2 in a row, ...)",
// naming what a 401 or 403 means, or "list/watch of pods works again after 7 failures".
std::string DescribeInformerError(const ResourceRef& resource, const Status& status,
                                  int64_t failures_in_a_row);

struct InformerStats {
  int64_t lists = 0;           // successful lists (the first one included)
  int64_t relists = 0;         // lists after the first (410 Gone or resync of state)
  int64_t watch_restarts = 0;  // watches started after the first (normal end or failure)
  int64_t watch_errors = 0;    // list/watch calls that failed (not counting 410)
  int64_t gone = 0;            // 410s seen
  int64_t events = 0;          // watch events applied (bookmarks excluded)
  std::string last_resource_version{};
};

class Informer {
 public:
  // `client` and `clock` must outlive the informer.
  Informer(Client* client, Clock* clock, InformerOptions options);
  ~Informer();  // Stop()s.

  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // REQUIRES: before Start(); `name` unique.
  void AddIndexer(const std::string& name, IndexFunc func);
  // REQUIRES: before Start().
  void AddEventHandler(EventHandlers handlers);

  void Start();
  // Ends the thread (cancels a running watch) and joins it. Idempotent.
  void Stop();

  bool HasSynced() const;
  // Blocks until HasSynced() or `timeout` of real time elapses. Returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  // Cache reads. Keys are MakeKey(ns, name).
  ObjectPtr Get(const std::string& key) const;
  ObjectPtr Get(std::string_view ns, std::string_view name) const;
  std::vector<ObjectPtr> List() const;
  std::vector<std::string> ListKeys() const;
  // Objects whose index `index_name` contains `value`. Unknown index -> empty.
  std::vector<ObjectPtr> ByIndex(const std::string& index_name, const std::string& value) const;
  size_t Size() const;

  InformerStats Stats() const;

 private:
  struct Index {
    IndexFunc func;
    std::unordered_map<std::string, std::set<std::string>> keys_by_value;
  };

  void Run(std::stop_token stop);
  void ResyncLoop(std::stop_token stop);
  // Sleeps `d` of clock_ time; returns false if stopped meanwhile.
  bool SleepUnlessStopped(Clock::Duration d, std::stop_token stop);
  Status ListAndReplace();
  Status WatchOnce(std::stop_token stop, int64_t* events);
  // After a successful list or watch event: reports the end of a run of failures to on_error.
  void Worked();
  void StoreLocked(const std::string& key, const ObjectPtr& obj);
  void RemoveLocked(const std::string& key);

  Client* client_;
  Clock* clock_;
  InformerOptions options_;
  std::vector<EventHandlers> handlers_;

  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;
  std::unordered_map<std::string, ObjectPtr> items_;
  std::map<std::string, Index> indexes_;
  bool synced_ = false;
  InformerStats stats_;
  std::string resource_version_;  // guarded by mu_
  int64_t failures_in_a_row_ =
      0;  // list/watch failures since the last success; informer thread only

  // Serialises handler calls between the list/watch thread and the resync thread.
  std::mutex handler_mu_;
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;

  std::jthread thread_;
  std::jthread resync_thread_;
  bool started_ = false;
};

}  // namespace nvl72::kube
