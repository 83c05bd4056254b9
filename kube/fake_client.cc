#include "kube/fake_client.h"

#include <algorithm>
#include <chrono>

#include "kube/watch_decoder.h"

namespace nvl72::kube {
namespace {

constexpr size_t kMaxHistory = 200000;

Status ApiError(int code, const std::string& reason, const std::string& message) {
  return StatusFromApiStatus(
      Json{{"kind", "Status"}, {"code", code}, {"reason", reason}, {"message", message}});
}

Status NotFound(const ResourceRef& r, std::string_view name) {
  return ApiError(404, "NotFound", r.DisplayName() + " \"" + std::string(name) + "\" not found");
}

Status ConflictError(const ResourceRef& r, std::string_view name, const std::string& why) {
  return ApiError(409, "Conflict",
                  "Operation cannot be fulfilled on " + r.DisplayName() + " \"" +
                      std::string(name) + "\": " + why);
}

Status CheckScope(const ResourceRef& r, std::string_view ns, bool list) {
  if (r.namespaced && ns.empty() && !list) {
    return ApiError(400, "BadRequest", r.DisplayName() + " is namespaced: a namespace is required");
  }
  if (!r.namespaced && !ns.empty()) {
    return ApiError(400, "BadRequest",
                    r.DisplayName() + " is cluster-scoped: no namespace allowed");
  }
  return Status::Ok();
}

std::string NowTime() { return FormatTime(std::chrono::system_clock::now()); }

// Everything but metadata and status: a change there moves metadata.generation.
Json SpecPart(const Json& obj) {
  Json copy = obj;
  if (copy.is_object()) {
    copy.erase("metadata");
    copy.erase("status");
  }
  return copy;
}

struct FieldRequirement {
  std::string pointer;
  std::string value;
  bool negate;
};

StatusOr<std::vector<FieldRequirement>> ParseFieldSelector(std::string_view sel) {
  std::vector<FieldRequirement> reqs;
  size_t start = 0;
  while (start <= sel.size()) {
    size_t comma = sel.find(',', start);
    std::string_view part =
        sel.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? sel.size() + 1 : comma + 1;
    if (part.empty()) continue;
    FieldRequirement r;
    size_t op = part.find("!=");
    size_t vpos;
    if (op != std::string_view::npos) {
      r.negate = true;
      vpos = op + 2;
    } else if ((op = part.find("==")) != std::string_view::npos) {
      r.negate = false;
      vpos = op + 2;
    } else if ((op = part.find('=')) != std::string_view::npos) {
      r.negate = false;
      vpos = op + 1;
    } else {
      return ApiError(400, "BadRequest", "invalid field selector \"" + std::string(part) + "\"");
    }
    std::string field(part.substr(0, op));
    r.pointer = "/" + field;
    std::replace(r.pointer.begin(), r.pointer.end(), '.', '/');
    r.value = std::string(part.substr(vpos));
    reqs.push_back(std::move(r));
  }
  return reqs;
}

bool MatchesFields(const Json& obj, const std::vector<FieldRequirement>& reqs) {
  for (const auto& r : reqs) {
    const Json& v = AtPath(obj, r.pointer);
    std::string s = v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
    if ((s == r.value) == r.negate) return false;
  }
  return true;
}

// The type a replayed history event reaches a watcher as, given whether the object matched the
// watcher's selectors before (`was`, `had_prev`: it had a prior state) and after (`is`) the event;
// nullopt when the watcher does not see it.
std::optional<std::string> ReplayedType(const std::string& type, bool had_prev, bool was, bool is) {
  std::string t = type;
  if (t == "MODIFIED") {
    if (was && !is)
      t = "DELETED";
    else if (!was && is)
      t = "ADDED";
    else if (!was && !is)
      return std::nullopt;
    // An object first seen in this replay with no prior state: treat as a plain modification.
    if (!had_prev && is) t = "MODIFIED";
  } else if (t == "DELETED") {
    if (!is && !was) return std::nullopt;
  } else if (!is) {
    return std::nullopt;
  }
  return t;
}

// The resourceVersion a watch replays history from; 410 when compaction dropped that history.
StatusOr<int64_t> ReplayFrom(const std::string& resource_version, int64_t compacted_rv) {
  int64_t from = 0;
  try {
    from = std::stoll(resource_version);
  } catch (...) {
    return ApiError(400, "BadRequest", "invalid resourceVersion \"" + resource_version + "\"");
  }
  if (from < compacted_rv) {
    return ApiError(410, "Expired",
                    "too old resource version: " + resource_version + " (" +
                        std::to_string(compacted_rv) + ")");
  }
  return from;
}

}  // namespace

std::string_view VerbName(Verb v) {
  switch (v) {
    case Verb::kGet:
      return "get";
    case Verb::kList:
      return "list";
    case Verb::kCreate:
      return "create";
    case Verb::kUpdate:
      return "update";
    case Verb::kUpdateStatus:
      return "update-status";
    case Verb::kPatch:
      return "patch";
    case Verb::kDelete:
      return "delete";
    case Verb::kWatch:
      return "watch";
    case Verb::kBind:
      return "bind";
    case Verb::kEvict:
      return "evict";
  }
  return "unknown";
}

struct FakeClient::Watcher {
  std::string resource_key;
  std::string ns;
  std::string label_selector;
  std::vector<FieldRequirement> fields;
  bool bookmarks = false;
  std::deque<Json> events;  // {"type":..., "object":...}
  std::condition_variable cv;
  bool closed = false;
  Status close_status;
  bool stopped = false;

  bool Matches(const Json& obj) const {
    if (!ns.empty() && Namespace(obj) != ns) return false;
    auto l = MatchesLabelSelector(obj, label_selector);
    if (!l.ok() || !*l) return false;
    return MatchesFields(obj, fields);
  }

  // Queues an ADDED event for every matching object (a watch from no resourceVersion).
  void QueueSnapshot(const std::map<std::string, Json>& objects) {
    for (auto& [key, obj] : objects) {
      if (Matches(obj)) events.push_back(Json{{"type", "ADDED"}, {"object", obj}});
    }
  }

  // Replays history after `from`, tracking the previous state per object for selector transitions.
  void QueueReplay(const std::deque<StoredEvent>& history, int64_t from) {
    std::map<std::string, Json> last;  // key -> last state seen in history (for transitions)
    for (const auto& ev : history) {
      if (ev.resource_key != resource_key) continue;
      std::string key = KeyOf(ev.object);
      auto prev = last.find(key);
      bool had_prev = prev != last.end();
      bool was = had_prev && Matches(prev->second);
      if (ev.type == "DELETED")
        last.erase(key);
      else
        last[key] = ev.object;
      if (ev.rv <= from) continue;
      auto type = ReplayedType(ev.type, had_prev, was, Matches(ev.object));
      if (type) events.push_back(Json{{"type", *type}, {"object", ev.object}});
    }
  }

  // Hands queued events to `handler` (without holding `l`) until the watch ends; returns how it
  // ended. REQUIRES: `l` holds the client's mutex.
  Status Deliver(std::unique_lock<std::mutex>& l, const WatchHandler& handler) {
    while (true) {
      cv.wait(l, [&] { return stopped || closed || !events.empty(); });
      // A stream the server closed delivers nothing more, even what was queued: like a real
      // apiserver timeout, the client resumes from the last resourceVersion it saw.
      if (closed && !stopped) return close_status;
      if (!events.empty()) {
        Json ev = std::move(events.front());
        events.pop_front();
        l.unlock();
        auto parsed = ParseWatchEvent(std::move(ev));
        Status result;
        bool keep_going = true;
        if (!parsed.ok()) {
          result = parsed.status();
          keep_going = false;
        } else {
          keep_going = handler(std::move(parsed).value());
        }
        l.lock();
        if (!keep_going) return result;
        continue;
      }
      if (stopped) return Status(StatusCode::kCancelled, "watch stopped");
      return close_status;
    }
  }
};

FakeClient::FakeClient() {
  status_resources_.insert(kPods.DisplayName());
  status_resources_.insert(kNodes.DisplayName());
}

FakeClient::~FakeClient() {
  CloseWatches(ApiError(503, "ServiceUnavailable", "fake client destroyed"));
}

Status FakeClient::CheckInjected(Verb verb, const ResourceRef& resource) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = injected_.begin(); it != injected_.end(); ++it) {
    if (it->verb == verb && (it->resource.empty() || it->resource == resource.DisplayName())) {
      Status s = it->status;
      if (--it->times <= 0) injected_.erase(it);
      return s;
    }
  }
  return Status::Ok();
}

void FakeClient::Record(Verb verb, const ResourceRef& resource, std::string_view ns,
                        std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  actions_.push_back(Action{verb, resource.DisplayName(), std::string(ns), std::string(name)});
}

bool FakeClient::HasStatusLocked(const ResourceRef& resource) const {
  return status_resources_.count(resource.DisplayName()) > 0;
}

void FakeClient::EmitLocked(const ResourceRef& resource, const std::string& type, const Json& obj) {
  // History keeps new states only; a replaying watcher reconstructs previous states from it to turn
  // selector transitions into ADDED/DELETED.
  StoredEvent ev{rv_, resource.DisplayName(), type, obj};
  history_.push_back(ev);
  while (history_.size() > kMaxHistory) {
    compacted_rv_ = history_.front().rv;
    history_.pop_front();
  }
}

StatusOr<Json> FakeClient::Get(const ResourceRef& resource, std::string_view ns,
                               std::string_view name) {
  Record(Verb::kGet, resource, ns, name);
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kGet, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  std::lock_guard<std::mutex> l(mu_);
  auto& objs = objects_[resource.DisplayName()];
  auto it = objs.find(MakeKey(resource.namespaced ? ns : "", name));
  if (it == objs.end()) return NotFound(resource, name);
  return it->second;
}

StatusOr<ListResult> FakeClient::List(const ResourceRef& resource, std::string_view ns,
                                      const ListOptions& options) {
  Record(Verb::kList, resource, ns, "");
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kList, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, true));
  auto fields = ParseFieldSelector(options.field_selector);
  if (!fields.ok()) return fields.status();
  if (auto probe = MatchesLabelSelector(Json::object(), options.label_selector); !probe.ok()) {
    return ApiError(400, "BadRequest", probe.status().message());
  }
  std::lock_guard<std::mutex> l(mu_);
  ListResult result;
  // Continue token: "<list rv>:<last key>".
  std::string after;
  int64_t list_rv = rv_;
  if (!options.continue_token.empty()) {
    size_t colon = options.continue_token.find(':');
    if (colon == std::string::npos) return ApiError(400, "BadRequest", "invalid continue token");
    list_rv = std::stoll(options.continue_token.substr(0, colon));
    after = options.continue_token.substr(colon + 1);
    if (list_rv < compacted_rv_) {
      return ApiError(410, "Expired",
                      "The provided continue parameter is too old to display a consistent list "
                      "result. You can start a new list without the continue parameter.");
    }
  }
  result.resource_version = std::to_string(list_rv);
  auto& objs = objects_[resource.DisplayName()];
  auto it = after.empty() ? objs.begin() : objs.upper_bound(after);
  for (; it != objs.end(); ++it) {
    const Json& obj = it->second;
    if (resource.namespaced && !ns.empty() && Namespace(obj) != ns) continue;
    auto m = MatchesLabelSelector(obj, options.label_selector);
    if (!m.ok() || !*m || !MatchesFields(obj, *fields)) continue;
    if (options.limit > 0 && static_cast<int64_t>(result.items.size()) >= options.limit) {
      auto last = std::prev(it);
      result.continue_token = std::to_string(list_rv) + ":" + last->first;
      break;
    }
    result.items.push_back(obj);
  }
  return result;
}

StatusOr<Json> FakeClient::Create(const ResourceRef& resource, std::string_view ns, const Json& in,
                                  const WriteOptions&) {
  Record(Verb::kCreate, resource, ns, Name(in));
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kCreate, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  if (!in.is_object()) return ApiError(400, "BadRequest", "object is not a JSON object");
  Json obj = in;
  Json& meta = obj["metadata"];
  if (!meta.is_object()) meta = Json::object();
  std::lock_guard<std::mutex> l(mu_);
  std::string name = Name(obj);
  if (name.empty()) {
    std::string gen = meta.value("generateName", "");
    if (gen.empty()) return ApiError(422, "Invalid", "metadata.name: Required value");
    name = gen + std::to_string(100000 + uid_counter_ + 1);
    meta["name"] = name;
  }
  if (!Namespace(obj).empty() && Namespace(obj) != ns) {
    return ApiError(400, "BadRequest", "the namespace of the object does not match the request");
  }
  if (resource.namespaced)
    meta["namespace"] = std::string(ns);
  else
    meta.erase("namespace");
  auto& objs = objects_[resource.DisplayName()];
  std::string key = MakeKey(resource.namespaced ? ns : "", name);
  if (objs.count(key)) {
    return ApiError(409, "AlreadyExists",
                    resource.DisplayName() + " \"" + name + "\" already exists");
  }
  if (!obj.contains("apiVersion")) obj["apiVersion"] = resource.ApiVersion();
  if (!obj.contains("kind")) obj["kind"] = resource.kind;
  meta["uid"] = "fake-uid-" + std::to_string(++uid_counter_);
  meta["resourceVersion"] = std::to_string(++rv_);
  meta["creationTimestamp"] = NowTime();
  meta["generation"] = 1;
  meta.erase("deletionTimestamp");
  if (HasStatusLocked(resource) && resource.DisplayName() != kNodes.DisplayName()) {
    obj.erase("status");
    if (resource.DisplayName() == kPods.DisplayName()) obj["status"] = Json{{"phase", "Pending"}};
  }
  objs[key] = obj;
  EmitLocked(resource, "ADDED", obj);
  for (auto& w : watchers_) {
    if (w->resource_key == resource.DisplayName() && w->Matches(obj)) {
      w->events.push_back(Json{{"type", "ADDED"}, {"object", obj}});
      w->cv.notify_all();
    }
  }
  return obj;
}

// Stores `obj` as the new state of an existing object at `key`, emitting MODIFIED (or DELETED when
// the last finalizer of an object being deleted went away).
StatusOr<Json> FakeClient::StoreExistingLocked(const ResourceRef& resource, const std::string& key,
                                               Json obj) {
  auto& objs = objects_[resource.DisplayName()];
  Json old = objs[key];
  Json& meta = obj["metadata"];
  const Json& old_meta = old["metadata"];
  for (const char* keep : {"uid", "creationTimestamp", "deletionTimestamp", "namespace", "name"}) {
    if (old_meta.contains(keep)) meta[keep] = old_meta[keep];
  }
  int64_t gen = Generation(old);
  if (SpecPart(obj) != SpecPart(old)) ++gen;
  meta["generation"] = gen;
  meta["resourceVersion"] = std::to_string(++rv_);
  std::string type = "MODIFIED";
  bool gone = IsBeingDeleted(obj) && (!meta.contains("finalizers") ||
                                      !meta["finalizers"].is_array() || meta["finalizers"].empty());
  if (gone) {
    type = "DELETED";
    objs.erase(key);
  } else {
    objs[key] = obj;
  }
  EmitLocked(resource, type, obj);
  for (auto& w : watchers_) {
    if (w->resource_key != resource.DisplayName()) continue;
    bool was = w->Matches(old);
    bool is = w->Matches(obj);
    std::string t = type;
    if (type == "MODIFIED") {
      if (was && !is)
        t = "DELETED";
      else if (!was && is)
        t = "ADDED";
      else if (!was && !is)
        continue;
    } else if (!was) {
      continue;
    }
    w->events.push_back(Json{{"type", t}, {"object", obj}});
    w->cv.notify_all();
  }
  return obj;
}

StatusOr<Json> FakeClient::WriteLocked(const ResourceRef& resource, std::string_view ns, Json obj,
                                       bool status_only) {
  if (!obj.is_object()) return ApiError(400, "BadRequest", "object is not a JSON object");
  std::string name = Name(obj);
  if (name.empty()) return ApiError(422, "Invalid", "metadata.name: Required value");
  if (!Namespace(obj).empty() && Namespace(obj) != ns) {
    return ApiError(400, "BadRequest", "the namespace of the object does not match the request");
  }
  auto& objs = objects_[resource.DisplayName()];
  std::string key = MakeKey(resource.namespaced ? ns : "", name);
  auto it = objs.find(key);
  if (it == objs.end()) return NotFound(resource, name);
  std::string rv = ResourceVersion(obj);
  if (!rv.empty() && rv != ResourceVersion(it->second)) {
    return ConflictError(resource, name,
                         "the object has been modified; please apply your changes to the latest "
                         "version and try again");
  }
  Json next;
  if (status_only) {
    next = it->second;
    if (obj.contains("status"))
      next["status"] = obj["status"];
    else
      next.erase("status");
  } else {
    next = std::move(obj);
    if (HasStatusLocked(resource)) {
      if (it->second.contains("status"))
        next["status"] = it->second["status"];
      else
        next.erase("status");
    }
    if (!next.contains("apiVersion")) next["apiVersion"] = resource.ApiVersion();
    if (!next.contains("kind")) next["kind"] = resource.kind;
    // deletionTimestamp is set by Delete only.
    if (!IsBeingDeleted(it->second) && next.contains("metadata")) {
      next["metadata"].erase("deletionTimestamp");
    }
  }
  return StoreExistingLocked(resource, key, std::move(next));
}

StatusOr<Json> FakeClient::Update(const ResourceRef& resource, std::string_view ns, const Json& obj,
                                  const WriteOptions&) {
  Record(Verb::kUpdate, resource, ns, Name(obj));
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kUpdate, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  std::lock_guard<std::mutex> l(mu_);
  return WriteLocked(resource, ns, obj, false);
}

StatusOr<Json> FakeClient::UpdateStatus(const ResourceRef& resource, std::string_view ns,
                                        const Json& obj, const WriteOptions&) {
  Record(Verb::kUpdateStatus, resource, ns, Name(obj));
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kUpdateStatus, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  std::lock_guard<std::mutex> l(mu_);
  if (!HasStatusLocked(resource)) {
    return ApiError(404, "NotFound", resource.DisplayName() + " has no status subresource");
  }
  return WriteLocked(resource, ns, obj, true);
}

StatusOr<Json> FakeClient::Patch(const ResourceRef& resource, std::string_view ns,
                                 std::string_view name, PatchType type, const Json& patch,
                                 const PatchOptions& options, std::string_view subresource) {
  Record(Verb::kPatch, resource, ns, name);
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kPatch, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  if (type == PatchType::kApply && options.field_manager.empty()) {
    return ApiError(400, "BadRequest", "PatchOptions.fieldManager is required for apply requests");
  }
  if (!subresource.empty() && subresource != "status") {
    return ApiError(404, "NotFound", "unknown subresource " + std::string(subresource));
  }
  std::unique_lock<std::mutex> l(mu_);
  bool status_only = subresource == "status";
  if (status_only && !HasStatusLocked(resource)) {
    return ApiError(404, "NotFound", resource.DisplayName() + " has no status subresource");
  }
  auto& objs = objects_[resource.DisplayName()];
  std::string key = MakeKey(resource.namespaced ? ns : "", name);
  auto it = objs.find(key);
  if (it == objs.end()) {
    if (type != PatchType::kApply || status_only) return NotFound(resource, name);
    l.unlock();
    Json obj = patch;
    obj["metadata"]["name"] = std::string(name);
    return Create(resource, ns, obj);
  }
  Json patched = it->second;
  try {
    if (type == PatchType::kJson) {
      if (!patch.is_array()) return ApiError(400, "BadRequest", "JSON patch must be an array");
      patched = patched.patch(patch);
    } else {
      if (!patch.is_object()) return ApiError(400, "BadRequest", "merge patch must be an object");
      patched.merge_patch(patch);
    }
  } catch (const nlohmann::json::exception& e) {
    return ApiError(422, "Invalid", std::string("patch failed: ") + e.what());
  }
  // A resourceVersion in the patch is a precondition.
  const Json& prv = AtPath(patch, "/metadata/resourceVersion");
  if (prv.is_string() && prv.get<std::string>() != ResourceVersion(it->second)) {
    return ConflictError(resource, name, "the object has been modified");
  }
  patched["metadata"]["resourceVersion"] = ResourceVersion(it->second);
  return WriteLocked(resource, ns, std::move(patched), status_only);
}

Status FakeClient::Delete(const ResourceRef& resource, std::string_view ns, std::string_view name,
                          const DeleteOptions& options) {
  Record(Verb::kDelete, resource, ns, name);
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kDelete, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  std::lock_guard<std::mutex> l(mu_);
  auto& objs = objects_[resource.DisplayName()];
  std::string key = MakeKey(resource.namespaced ? ns : "", name);
  auto it = objs.find(key);
  if (it == objs.end()) return NotFound(resource, name);
  if (options.precondition_uid && *options.precondition_uid != Uid(it->second)) {
    return ConflictError(resource, name,
                         "Precondition failed: UID in precondition: " + *options.precondition_uid +
                             ", UID in object meta: " + Uid(it->second));
  }
  if (options.precondition_resource_version &&
      *options.precondition_resource_version != ResourceVersion(it->second)) {
    return ConflictError(resource, name,
                         "Precondition failed: ResourceVersion in precondition: " +
                             *options.precondition_resource_version +
                             ", ResourceVersion in object meta: " + ResourceVersion(it->second));
  }
  Json obj = it->second;
  const Json& finalizers = AtPath(obj, "/metadata/finalizers");
  if (finalizers.is_array() && !finalizers.empty()) {
    // As kube-apiserver: deletionTimestamp is the end of the grace period; a second delete may
    // only shorten it.
    const int64_t grace = options.grace_period_seconds.value_or(0);
    const Json& old_grace = AtPath(obj, "/metadata/deletionGracePeriodSeconds");
    if (!IsBeingDeleted(obj) ||
        (old_grace.is_number_integer() && grace < old_grace.get<int64_t>())) {
      obj["metadata"]["deletionTimestamp"] =
          FormatTime(std::chrono::system_clock::now() + std::chrono::seconds(grace));
      obj["metadata"]["deletionGracePeriodSeconds"] = grace;
      auto stored = StoreExistingLocked(resource, key, std::move(obj));
      if (!stored.ok()) return stored.status();
    }
    return Status::Ok();
  }
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  objs.erase(it);
  EmitLocked(resource, "DELETED", obj);
  for (auto& w : watchers_) {
    if (w->resource_key == resource.DisplayName() && w->Matches(obj)) {
      w->events.push_back(Json{{"type", "DELETED"}, {"object", obj}});
      w->cv.notify_all();
    }
  }
  return Status::Ok();
}

Status FakeClient::Watch(const ResourceRef& resource, std::string_view ns,
                         const WatchOptions& options, const WatchHandler& handler,
                         std::stop_token stop) {
  Record(Verb::kWatch, resource, ns, "");
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kWatch, resource));
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, true));
  auto fields = ParseFieldSelector(options.field_selector);
  if (!fields.ok()) return fields.status();
  auto w = std::make_shared<Watcher>();
  w->resource_key = resource.DisplayName();
  w->ns = resource.namespaced ? std::string(ns) : "";
  w->label_selector = options.label_selector;
  w->fields = *fields;
  w->bookmarks = options.allow_bookmarks;

  std::unique_lock<std::mutex> l(mu_);
  if (options.resource_version.empty() || options.resource_version == "0") {
    w->QueueSnapshot(objects_[w->resource_key]);
  } else {
    auto from = ReplayFrom(options.resource_version, compacted_rv_);
    if (!from.ok()) return from.status();
    w->QueueReplay(history_, *from);
  }
  watchers_.push_back(w);
  l.unlock();

  std::stop_callback on_stop(stop, [this, w] {
    std::lock_guard<std::mutex> g(mu_);
    w->stopped = true;
    w->cv.notify_all();
  });

  l.lock();
  Status result = w->Deliver(l, handler);
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), w), watchers_.end());
  return result;
}

Status FakeClient::Bind(std::string_view ns, std::string_view pod, std::string_view pod_uid,
                        std::string_view node) {
  Record(Verb::kBind, kPods, ns, pod);
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kBind, kPods));
  std::lock_guard<std::mutex> l(mu_);
  auto& objs = objects_[kPods.DisplayName()];
  std::string key = MakeKey(ns, pod);
  auto it = objs.find(key);
  if (it == objs.end()) return NotFound(kPods, pod);
  Json obj = it->second;
  if (!pod_uid.empty() && Uid(obj) != pod_uid) {
    return ConflictError(kPods, pod,
                         "Precondition failed: UID in precondition: " + std::string(pod_uid));
  }
  const Json& node_name = AtPath(obj, "/spec/nodeName");
  if (node_name.is_string() && !node_name.get<std::string>().empty()) {
    return ConflictError(kPods, pod,
                         "pod " + std::string(pod) + " is already assigned to node \"" +
                             node_name.get<std::string>() + "\"");
  }
  if (IsBeingDeleted(obj)) return ConflictError(kPods, pod, "pod is being deleted");
  const Json& gates = AtPath(obj, "/spec/schedulingGates");
  if (gates.is_array() && !gates.empty()) {
    return ConflictError(kPods, pod, "pod has scheduling gates");
  }
  obj["spec"]["nodeName"] = std::string(node);
  auto stored = StoreExistingLocked(kPods, key, std::move(obj));
  return stored.status();
}

Status FakeClient::Evict(std::string_view ns, std::string_view pod, const DeleteOptions& options) {
  Record(Verb::kEvict, kPods, ns, pod);
  NVL72_RETURN_IF_ERROR(CheckInjected(Verb::kEvict, kPods));
  return Delete(kPods, ns, pod, options);
}

void FakeClient::EnableStatusSubresource(const ResourceRef& resource) {
  std::lock_guard<std::mutex> l(mu_);
  status_resources_.insert(resource.DisplayName());
}

void FakeClient::InjectError(Verb verb, const ResourceRef& resource, Status status, int times) {
  std::lock_guard<std::mutex> l(mu_);
  injected_.push_back(Injected{verb, resource.resource.empty() ? "" : resource.DisplayName(),
                               std::move(status), times});
}

void FakeClient::Compact() {
  std::lock_guard<std::mutex> l(mu_);
  history_.clear();
  compacted_rv_ = rv_;
}

void FakeClient::ExpireWatches() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& w : watchers_) {
    w->events.push_back(Json{{"type", "ERROR"},
                             {"object",
                              {{"kind", "Status"},
                               {"apiVersion", "v1"},
                               {"status", "Failure"},
                               {"code", 410},
                               {"reason", "Expired"},
                               {"message", "too old resource version"}}}});
    w->cv.notify_all();
  }
}

void FakeClient::CloseWatches(const Status& status) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& w : watchers_) {
    w->closed = true;
    w->close_status = status;
    w->cv.notify_all();
  }
}

void FakeClient::SendBookmark() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& w : watchers_) {
    if (!w->bookmarks) continue;
    w->events.push_back(
        Json{{"type", "BOOKMARK"},
             {"object", {{"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}});
    w->cv.notify_all();
  }
}

int FakeClient::NumWatches() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(watchers_.size());
}

int64_t FakeClient::CurrentResourceVersion() const {
  std::lock_guard<std::mutex> l(mu_);
  return rv_;
}

std::vector<Action> FakeClient::Actions() const {
  std::lock_guard<std::mutex> l(mu_);
  return actions_;
}

void FakeClient::ClearActions() {
  std::lock_guard<std::mutex> l(mu_);
  actions_.clear();
}

void FakeClient::Seed(const ResourceRef& resource, const Json& in) {
  std::lock_guard<std::mutex> l(mu_);
  Json obj = in;
  Json& meta = obj["metadata"];
  if (!obj.contains("apiVersion")) obj["apiVersion"] = resource.ApiVersion();
  if (!obj.contains("kind")) obj["kind"] = resource.kind;
  if (!meta.contains("uid")) meta["uid"] = "fake-uid-" + std::to_string(++uid_counter_);
  meta["resourceVersion"] = std::to_string(++rv_);
  if (!meta.contains("generation")) meta["generation"] = 1;
  objects_[resource.DisplayName()][KeyOf(obj)] = obj;
  // Seeding is invisible to watches, so history from before now can no longer be replayed.
  compacted_rv_ = rv_;
  history_.clear();
}

}  // namespace nvl72::kube
