// Client: the verbs of the Kubernetes REST API over JSON objects.
//
// `Client` is the abstract interface the operator and the extender program against; `HttpClient`
// (kube/http_client.h) talks to a real API server, `FakeClient` (kube/fake_client.h) is an
// in-memory API server for unit tests.
//
// Objects are nlohmann::json exactly as the API server sends them. Errors follow kube/errors.h
// (IsNotFound, IsConflict, IsGone, ...).
//
// Thread-safety: every implementation is safe to call from many threads concurrently. Watch()
// blocks the calling thread for the life of the watch.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/resource.h"

namespace nvl72::kube {

struct ListOptions {
  std::string label_selector{};    // "app=x,tier!=db"
  std::string field_selector{};    // "spec.nodeName=n1"
  int64_t limit = 0;               // page size; 0 = everything in one response
  std::string continue_token{};    // from a previous page's ListResult::continue_token
  std::string resource_version{};  // "" = most recent (quorum read); "0" = any (cache)
};

struct ListResult {
  std::vector<Json> items{};
  std::string resource_version{};  // of the list: start a Watch from here
  std::string continue_token{};    // non-empty when more pages follow
};

struct WatchOptions {
  std::string label_selector{};
  std::string field_selector{};
  // Start after this version (from a List or the last event seen). "" = start from "now" with
  // synthetic ADDED events for existing objects (avoid: List then Watch instead).
  std::string resource_version{};
  bool allow_bookmarks = true;
  // Server-side timeout of this watch request; 0 = 300 s plus up to 60 s jitter. The watch returns
  // OK when it elapses: the caller resumes from the last resourceVersion it saw.
  int timeout_seconds = 0;
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };
std::string_view WatchEventTypeName(WatchEventType t);

struct WatchEvent {
  WatchEventType type{};
  Json object{};  // the object; for kBookmark only metadata.resourceVersion is meaningful
};

// Called once per event, in order, on the thread that called Watch(). Return false to end the
// watch.
using WatchHandler = std::function<bool(WatchEvent&& event)>;

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kJson,            // application/json-patch+json (RFC 6902); the patch is a JSON array
  kStrategicMerge,  // application/strategic-merge-patch+json (built-in types only)
  kApply,           // server-side apply (application/apply-patch+yaml); needs field_manager
};

struct PatchOptions {
  std::string field_manager{};  // REQUIRED for kApply
  bool force = false;           // kApply only: take ownership of conflicting fields
};

struct WriteOptions {
  std::string field_manager{};  // optional for Create/Update
};

struct DeleteOptions {
  std::optional<std::string> propagation_policy{};  // "Foreground" | "Background" | "Orphan"
  std::optional<int64_t> grace_period_seconds{};
  std::optional<std::string> precondition_uid{};               // 409 if the uid differs
  std::optional<std::string> precondition_resource_version{};  // 409 if the object changed
};

class Client {
 public:
  virtual ~Client() = default;

  // REQUIRES for all verbs: `ns` non-empty iff `resource.namespaced` (except List/Watch, where an
  // empty `ns` on a namespaced resource means all namespaces).

  virtual StatusOr<Json> Get(const ResourceRef& resource, std::string_view ns,
                             std::string_view name) = 0;

  // One page (or everything if options.limit == 0). A 410 on continue_token means the snapshot
  // expired: restart the list without it.
  virtual StatusOr<ListResult> List(const ResourceRef& resource, std::string_view ns,
                                    const ListOptions& options = {}) = 0;

  // Creates `obj` in `ns` (obj's own metadata.namespace, if set, must equal ns). Returns the stored
  // object. apiVersion/kind are filled in from `resource` when missing.
  virtual StatusOr<Json> Create(const ResourceRef& resource, std::string_view ns, const Json& obj,
                                const WriteOptions& options = {}) = 0;

  // PUT of the whole object (name from obj.metadata.name). With metadata.resourceVersion set, a
  // stale version fails with kConflict; without it the write is unconditional.
  virtual StatusOr<Json> Update(const ResourceRef& resource, std::string_view ns, const Json& obj,
                                const WriteOptions& options = {}) = 0;

  // PUT to the /status subresource: only status changes.
  virtual StatusOr<Json> UpdateStatus(const ResourceRef& resource, std::string_view ns,
                                      const Json& obj, const WriteOptions& options = {}) = 0;

  // PATCH; `subresource` "" or "status".
  virtual StatusOr<Json> Patch(const ResourceRef& resource, std::string_view ns,
                               std::string_view name, PatchType type, const Json& patch,
                               const PatchOptions& options = {},
                               std::string_view subresource = "") = 0;

  // OK also when the object only got a deletionTimestamp (finalizers pending).
  virtual Status Delete(const ResourceRef& resource, std::string_view ns, std::string_view name,
                        const DeleteOptions& options = {}) = 0;

  // Streams events to `handler` until: the handler returns false (OK), `stop` is requested
  // (kCancelled), the server ends the stream (OK: resume from the last resourceVersion seen), the
  // server sends an ERROR event (its Status: kGone for 410 "too old resource version" -> relist),
  // or the connection fails (kUnavailable). BOOKMARK events are delivered to the handler.
  virtual Status Watch(const ResourceRef& resource, std::string_view ns,
                       const WatchOptions& options, const WatchHandler& handler,
                       std::stop_token stop = {}) = 0;

  // POST pods/<pod>/binding. `pod_uid` may be "" (no uid precondition). 409 if already bound.
  virtual Status Bind(std::string_view ns, std::string_view pod, std::string_view pod_uid,
                      std::string_view node) = 0;

  // POST pods/<pod>/eviction (policy/v1). kResourceExhausted (429) when a PodDisruptionBudget
  // forbids it now.
  virtual Status Evict(std::string_view ns, std::string_view pod,
                       const DeleteOptions& options = {}) = 0;
};

// Rewrites an object in place before a cache keeps it (e.g. drops fields nobody reads). Must keep
// metadata.name, metadata.namespace and metadata.resourceVersion.
using ObjectTransform = std::function<void(Json&)>;

// Lists every page (following continue tokens) into one result whose resource_version is the
// first page's. Restarts from scratch once if a continue token expires (410). `transform`, when
// set, is applied to each item as its page arrives (so the full objects of only one page are held).
StatusOr<ListResult> ListAll(Client& client, const ResourceRef& resource, std::string_view ns,
                             ListOptions options, const ObjectTransform& transform = nullptr);

// Read-modify-write with optimistic concurrency: Get, apply `mutate` to a copy, Update; on
// kConflict re-read and retry (up to `max_attempts`). `mutate` returns false to skip the write (no
// change). Returns the stored object (or the unchanged read when skipped).
StatusOr<Json> UpdateWithRetry(Client& client, const ResourceRef& resource, std::string_view ns,
                               std::string_view name, const std::function<bool(Json&)>& mutate,
                               int max_attempts = 10, bool status_subresource = false);

}  // namespace nvl72::kube
