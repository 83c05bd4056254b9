// HttpClient: Client over HTTPS to a real API server (cpp-httplib + OpenSSL).
//
// TLS: the server certificate is verified against the Config's CA, or the system trust store when
// the Config names none, unless insecure_skip_tls_verify; tls_server_name replaces the host in SNI
// and in the host check. Client certificate and/or bearer token auth; the token is re-read from
// token_file (rotation), comes from an exec plugin (kube/exec_credential.h; run again on expiry and
// after a 401, with the request sent once more), and is never logged or put in an error message.
// Connections are pooled and kept alive; each Watch() uses its own connection with a read timeout
// longer than the watch's server-side timeout.
//
// The first Create() sets SIGPIPE to SIG_IGN for the process (broken TLS connections must fail the
// call, not kill the process).
//
// Requests can be observed (for metrics) through SetRequestObserver(); kube does not depend on any
// metrics library.
//
// Thread-safety: all methods may be called concurrently from any thread, except
// SetRequestObserver() (see there).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"

namespace nvl72::kube {

// Kubernetes verbs of the requests an HttpClient observes (RequestObserver's `verb`).
inline constexpr std::array<std::string_view, 6> kRequestVerbs = {"get",    "list",  "create",
                                                                  "update", "patch", "delete"};

// Called once per request sent to the API server (a 401 retried with a re-read token is two
// requests): `verb` is one of kRequestVerbs (Bind and Evict are "create"; a raw Request() maps its
// method GET/POST/PUT/PATCH/DELETE to get/create/update/patch/delete, any other to "other");
// `code` is the HTTP status, or 0 when no response arrived (connection refused, timeout, TLS
// failure); `seconds` is the time from taking a connection to having read the whole response.
// Watches are not observed: they last minutes by design (informers count their restarts). Runs on
// the requesting thread: it must be thread-safe and quick.
using RequestObserver = std::function<void(std::string_view verb, int code, double seconds)>;

class HttpClient : public Client {
 public:
  // Validates the config and loads CA / client certificates. Errors: kInvalidArgument (bad server
  // URL, unreadable or malformed PEM), kNotFound (missing file).
  static StatusOr<std::unique_ptr<HttpClient>> Create(const Config& config);
  ~HttpClient() override;

  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

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

  // Raw request for anything the verbs do not cover (e.g. "/version", "/apis"). `path` includes the
  // query string. Returns the decoded JSON body of a 2xx response.
  StatusOr<Json> Request(std::string_view method, const std::string& path,
                         const Json* body = nullptr,
                         std::string_view content_type = "application/json");

  // Installs the observer of every later request ({} removes it). REQUIRES: no request is in flight
  // (call it right after Create(), before handing the client to other threads).
  void SetRequestObserver(RequestObserver observer);

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  StatusOr<Json> Send(std::string_view verb, std::string_view method, const std::string& path,
                      const Json* body = nullptr,
                      std::string_view content_type = "application/json");
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvl72::kube
