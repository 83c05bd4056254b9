// A start-up check of the credentials a binary talks to the API server with.
//
// Informers retry every failed list/watch with backoff and never report, which is right for an API
// server that is down or restarting but leaves a binary with a wrong, expired or revoked token (or
// missing RBAC) waiting for its caches forever without a word. CheckCredentials lists one object of
// `resource` (a read the caller needs anyway) and returns the error when the API server rejects the
// credentials (401 -> kUnauthenticated) or the permission (403 -> kPermissionDenied): errors that
// no retry fixes. Every other outcome (success, 404 for a CRD not installed yet, an unreachable API
// server) is OK: the informers deal with those. Error messages never contain the token.
//
// Thread-safety: as the client's.
#pragma once

#include "common/status.h"
#include "kube/client.h"
#include "kube/resource.h"

namespace nvl72::kube {

[[nodiscard]] Status CheckCredentials(Client* client, const ResourceRef& resource);

}  // namespace nvl72::kube
