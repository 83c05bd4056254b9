// Server: the extender's HTTP(S) listener (cpp-httplib).
//
//   POST <prefix>/filter | /prioritize | /bind | /preempt   the verbs (scheduler-plugin/service.h)
//   GET  /healthz   200 while the process serves
//   GET  /readyz    200 once the informer caches have synced and a view is published, else 503
//   GET  /metrics   Prometheus text format (scheduler-plugin/metrics.h)
//
// Limits (common/http_server.h): request bodies above `max_body_bytes` get 413, and so does any
// body sent to a path other than the verbs; socket read/write timeouts per request;
// keep-alive connections (the scheduler reuses one connection) up to `keep_alive_max_count`
// requests or `keep_alive_timeout` idle; `workers` threads serve connections (httplib's thread
// pool: a keep-alive connection holds its worker while it is open). Every error reply has a JSON
// body
// {"Error": "..."}; a handler exception becomes a 500, never a crash.
// HTTPS when tls_cert/tls_key are set; with client_ca the client must present a certificate signed
// by it (mTLS).
//
// Thread-safety: Start()/Stop() from one owning thread; handlers run on the worker threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/http_server.h"
#include "common/status.h"
#include "scheduler-plugin/metrics.h"
#include "scheduler-plugin/service.h"

namespace nvl72::extender {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8888;       // 0 = any free port (see Server::port())
  std::string prefix;    // URL path prefix of the verbs, "" or "/something" (no trailing slash)
  std::string tls_cert;  // PEM files; both set = HTTPS
  std::string tls_key;
  std::string client_ca;              // PEM file: require client certificates signed by it
  size_t max_body_bytes = 32u << 20;  // 5,000 full Node objects fit comfortably
  int workers = 8;
  std::chrono::milliseconds read_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  std::chrono::seconds keep_alive_timeout{60};
  size_t keep_alive_max_count = 100000;
};

class Server {
 public:
  // `service` and `metrics` must outlive the server; `metrics` may be null.
  Server(ServerOptions options, const Service* service, Metrics* metrics);
  ~Server();  // Stop()s.

  // Binds and starts serving on a background thread. Errors: bad TLS files, address in use.
  Status Start();
  // The bound port (after Start()).
  int port() const { return port_; }
  bool tls() const { return !options_.tls_cert.empty(); }
  // Stops accepting, finishes in-flight requests, joins. Idempotent.
  void Stop();

 private:
  void Routes();

  ServerOptions options_;
  const Service* service_;
  Metrics* metrics_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
};

}  // namespace nvl72::extender
