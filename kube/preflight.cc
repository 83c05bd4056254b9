#include "kube/preflight.h"

#include "kube/errors.h"

namespace nvl72::kube {

Status CheckCredentials(Client* client, const ResourceRef& resource) {
  ListOptions one;
  one.limit = 1;
  StatusOr<ListResult> list = client->List(resource, "", one);
  if (list.ok() || !(IsUnauthorized(list.status()) || IsForbidden(list.status())))
    return Status::Ok();
  return list.status();
}

}  // namespace nvl72::kube
