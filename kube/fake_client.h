// FakeClient: an in-memory API server implementing Client, for unit tests of anything built on
// kube/.
//
// Faithful where controllers depend on it:
//  - one global, increasing resourceVersion; every write bumps it; uid and creationTimestamp are
//  set
//    on create; metadata.generation starts at 1 and moves only when something outside
//    status/metadata changes;
//  - Update/UpdateStatus/Patch with a metadata.resourceVersion that is not the current one -> 409
//    kConflict; Create of an existing name -> 409 kAlreadyExists; missing object -> 404;
//  - for resources registered with EnableStatusSubresource() (all CRDs in real life, and pods,
//    nodes), Create drops status (pods get phase Pending; nodes keep theirs, as kwok setups rely
//    on), Update ignores status and UpdateStatus changes only status;
//  - Delete honours preconditions, and with finalizers only sets deletionTimestamp (the object goes
//    when an update empties metadata.finalizers);
//  - List supports label selectors (full set-based syntax), field selectors of the form
//    "a.b.c=value" / "a.b.c!=value" (comma-separated), limit/continue paging, and returns the
//    current resourceVersion;
//  - Watch fans events out to every watcher, filtered by namespace and selectors, in
//  resourceVersion
//    order; it replays history after the requested resourceVersion, and answers with an ERROR 410
//    event when that version is older than the retained history (see Compact()); bookmarks on
//    request via SendBookmark();
//  - Bind sets spec.nodeName (409 if already set); Evict deletes the pod.
// Simplifications: strategic-merge and apply patches are applied as JSON merge patches; no
// admission, defaulting, validation or ownerReference garbage collection.
//
// Test controls: InjectError() makes the next N matching calls fail; Compact() forgets history so
// old resourceVersions get 410; ExpireWatches() ends every open watch with an ERROR 410 event;
// CloseWatches() ends them as a server timeout would (OK) or as a dropped connection (error).
//
// Thread-safety: all methods are safe to call concurrently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kube/client.h"

namespace nvl72::kube {

enum class Verb {
  kGet,
  kList,
  kCreate,
  kUpdate,
  kUpdateStatus,
  kPatch,
  kDelete,
  kWatch,
  kBind,
  kEvict
};
std::string_view VerbName(Verb v);

// One recorded call, for assertions in tests.
struct Action {
  Verb verb{};
  std::string resource{};  // ResourceRef::DisplayName()
  std::string ns{};
  std::string name{};  // "" for List/Watch
};

class FakeClient : public Client {
 public:
  FakeClient();
  ~FakeClient() override;

  StatusOr<Json> Get(const ResourceRef& resource, std::string_view ns,
                     std::string_view name) override;
  StatusOr<ListResult> List(const ResourceRef& resource, std::string_view ns,
                            const ListOptions& options = {}) override;
  StatusOr<Json> Create(const ResourceRef& resource, std::string_view ns, const Json& obj,
                        const WriteOptions& options = {}) override;
  StatusOr<Json> Update(const ResourceRef& resource, std::string_view ns, const Json& obj,
                        const WriteOptions& options = {}) override;
  StatusOr<Json> UpdateStatus(const ResourceRef& resource, std::string_view ns, const Json& obj,
                              const WriteOptions& options = {}) override;
  StatusOr<Json> Patch(const ResourceRef& resource, std::string_view ns, std::string_view name,
                       PatchType type, const Json& patch, const PatchOptions& options = {},
                       std::string_view subresource = "") override;
  Status Delete(const ResourceRef& resource, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {}) override;
  Status Watch(const ResourceRef& resource, std::string_view ns, const WatchOptions& options,
               const WatchHandler& handler, std::stop_token stop = {}) override;
  Status Bind(std::string_view ns, std::string_view pod, std::string_view pod_uid,
              std::string_view node) override;
  Status Evict(std::string_view ns, std::string_view pod,
               const DeleteOptions& options = {}) override;

  // --- test controls ---

  // Treat `resource` as having a /status subresource (pods and nodes are by default).
  void EnableStatusSubresource(const ResourceRef& resource);
  // The next `times` calls of `verb` on `resource` (any resource if resource.resource is empty)
  // fail with `status` before doing anything.
  void InjectError(Verb verb, const ResourceRef& resource, Status status, int times = 1);
  // Forgets watch history up to the current resourceVersion: watching from an older version gets an
  // ERROR 410 event (as after etcd compaction).
  void Compact();
  // Sends an ERROR 410 event to every open watch (they return kGone).
  void ExpireWatches();
  // Ends every open watch: `status` OK acts like a server-side timeout, an error like a broken
  // connection (Watch returns it).
  void CloseWatches(const Status& status = Status::Ok());
  // Sends a BOOKMARK with the current resourceVersion to every open watch that asked for bookmarks.
  void SendBookmark();
  // Number of Watch() calls currently blocked delivering events.
  int NumWatches() const;
  // Current global resourceVersion.
  int64_t CurrentResourceVersion() const;
  std::vector<Action> Actions() const;
  void ClearActions();
  // Puts an object in place without any checks or events (seeding); sets rv/uid if missing.
  void Seed(const ResourceRef& resource, const Json& obj);

 private:
  struct Watcher;
  struct StoredEvent {
    int64_t rv;
    std::string resource_key;  // DisplayName()
    std::string type;          // ADDED, MODIFIED, DELETED
    Json object;
  };

  Status CheckInjected(Verb verb, const ResourceRef& resource);
  void Record(Verb verb, const ResourceRef& resource, std::string_view ns, std::string_view name);
  StatusOr<Json> WriteLocked(const ResourceRef& resource, std::string_view ns, Json obj,
                             bool status_only);
  StatusOr<Json> StoreExistingLocked(const ResourceRef& resource, const std::string& key, Json obj);
  void EmitLocked(const ResourceRef& resource, const std::string& type, const Json& obj);
  bool HasStatusLocked(const ResourceRef& resource) const;

  mutable std::mutex mu_;
  int64_t rv_ = 0;
  int64_t uid_counter_ = 0;
  // resource DisplayName -> object key -> object
  std::map<std::string, std::map<std::string, Json>> objects_;
  std::set<std::string> status_resources_;
  std::deque<StoredEvent> history_;
  int64_t compacted_rv_ = 0;  // watching from below this -> 410
  std::vector<std::shared_ptr<Watcher>> watchers_;
  struct Injected {
    Verb verb;
    std::string resource;
    Status status;
    int times;
  };
  std::vector<Injected> injected_;
  std::vector<Action> actions_;
};

}  // namespace nvl72::kube
