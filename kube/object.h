// Small typed helpers over Kubernetes objects held as nlohmann::json.
//
// All accessors tolerate missing or mistyped fields and return an empty value instead of throwing.
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace nvl72::kube {

using Json = nlohmann::json;

std::string Name(const Json& obj);
std::string Namespace(const Json& obj);
std::string Uid(const Json& obj);
std::string ResourceVersion(const Json& obj);
int64_t Generation(const Json& obj);
bool IsBeingDeleted(const Json& obj);  // metadata.deletionTimestamp is set
// Removes metadata.managedFields (server-side apply bookkeeping, often ~40% of an object). No-op on
// objects without it. A kube::ObjectTransform for informers. An object written back with Update
// keeps its managedFields on the server (omitted = unchanged); annotations are left alone, so an
// update never loses kubectl's last-applied-configuration.
void DropManagedFields(Json& obj);
// True when metadata.finalizers lists `finalizer`.
bool HasFinalizer(const Json& obj, std::string_view finalizer);
// The API server's finalizer of a deletion with propagationPolicy Orphan: the garbage collector
// removes the dependents' ownerReferences, then this finalizer.
inline constexpr std::string_view kOrphanFinalizer = "orphan";
// uid of the ownerReference with controller: true, or "" when nothing controls the object.
std::string ControllerUid(const Json& obj);
std::map<std::string, std::string> Labels(const Json& obj);
std::map<std::string, std::string> Annotations(const Json& obj);
// Returns obj at a "/a/b/c" JSON pointer, or nullptr json if absent (never throws).
const Json& AtPath(const Json& obj, std::string_view json_pointer);

// Cache key: "namespace/name", or "name" for cluster-scoped objects (client-go's
// MetaNamespaceKeyFunc).
std::string KeyOf(const Json& obj);
std::string MakeKey(std::string_view ns, std::string_view name);
// Splits a key made by MakeKey: {"", name} for a cluster-scoped key.
std::pair<std::string, std::string> SplitKey(std::string_view key);

// True if the object's labels match a label selector in the string form
// ("a=b,c!=d,e,!f,g in (x,y),h notin (z)"). An empty selector matches everything.
// Returns InvalidArgument on a malformed selector.
StatusOr<bool> MatchesLabelSelector(const Json& obj, std::string_view selector);

// metav1.MicroTime "2006-01-02T15:04:05.000000Z" and metav1.Time "2006-01-02T15:04:05Z" (UTC).
std::string FormatMicroTime(std::chrono::system_clock::time_point t);
std::string FormatTime(std::chrono::system_clock::time_point t);
// Parses either form (fraction optional, 'Z' or "+00:00" offsets accepted).
StatusOr<std::chrono::system_clock::time_point> ParseTime(std::string_view s);

// An ObjectReference (apiVersion, kind, namespace, name, uid, resourceVersion) for `obj`.
Json ObjectReferenceFor(const Json& obj);

}  // namespace nvl72::kube
