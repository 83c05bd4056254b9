#include "kube/client.h"

namespace nvl72::kube {

std::string_view WatchEventTypeName(WatchEventType t) {
  switch (t) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
  }
  return "UNKNOWN";
}

StatusOr<ListResult> ListAll(Client& client, const ResourceRef& resource, std::string_view ns,
                             ListOptions options, const ObjectTransform& transform) {
  const std::string initial_rv = options.resource_version;
  for (int attempt = 0; attempt < 2; ++attempt) {
    ListResult all;
    options.continue_token.clear();
    options.resource_version = initial_rv;
    bool expired = false;
    while (true) {
      auto page = client.List(resource, ns, options);
      if (!page.ok()) {
        if (IsGone(page.status()) && !options.continue_token.empty()) {
          expired = true;
          break;
        }
        return page.status();
      }
      if (all.resource_version.empty()) all.resource_version = page->resource_version;
      for (auto& item : page->items) {
        if (transform) transform(item);
        all.items.push_back(std::move(item));
      }
      if (page->continue_token.empty()) return all;
      options.continue_token = page->continue_token;
      // resourceVersion must not be combined with continue.
      options.resource_version.clear();
    }
    if (!expired) break;
  }
  return Status(StatusCode::kGone,
                "list of " + resource.DisplayName() + ": continue token expired twice");
}

StatusOr<Json> UpdateWithRetry(Client& client, const ResourceRef& resource, std::string_view ns,
                               std::string_view name, const std::function<bool(Json&)>& mutate,
                               int max_attempts, bool status_subresource) {
  Status last;
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    auto current = client.Get(resource, ns, name);
    if (!current.ok()) return current.status();
    Json desired = *current;
    if (!mutate(desired)) return current;
    auto written = status_subresource ? client.UpdateStatus(resource, ns, desired)
                                      : client.Update(resource, ns, desired);
    if (written.ok() || !IsConflict(written.status())) return written;
    last = written.status();
  }
  return Status(StatusCode::kConflict, "update of " + resource.DisplayName() + " " +
                                           MakeKey(ns, name) + " still conflicting after " +
                                           std::to_string(max_attempts) +
                                           " attempts: " + last.message());
}

}  // namespace nvl72::kube
