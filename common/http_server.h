// HttpServer: one cpp-httplib listener with the limits every HTTP endpoint of ours needs (the
// extender's verbs, the operator's /metrics and health probes).
//
//  - HTTPS when `tls_cert` and `tls_key` are set; with `client_ca`, only clients presenting a
//    certificate signed by it get past the TLS handshake (mTLS).
//  - A pool of `workers` threads, growing to `max_workers` while connections wait for one (threads
//    above `workers` end after 10 s without work); a worker serves one connection at a time
//    (cpp-httplib's model). So that slow or idle clients cannot hold them all: an idle keep-alive
//    connection (also one that never sent a byte) is closed after `keep_alive_timeout`; at
//    `max_workers`, a connection that is idle, or has not sent its whole TLS handshake and request
//    head, for 200 ms gives its worker up when another connection waits (so slow clients that
//    trickle headers delay no other request by more than that); a request must arrive whole (TLS
//    handshake, headers, body) within `request_timeout` and `max_header_bytes + max_body_bytes`,
//    each read within `read_timeout`; a reply write must progress within `write_timeout`. Our own
//    connection loop (GuardedServer in the .cc) does this; httplib still parses and routes.
//  - Request bodies only where a route wants one: a request with a body (Content-Length > 0 or
//    chunked) to a path that does not match `body_paths` gets 413 (GET, HEAD) or 404 (other
//    methods: every route of ours that takes a body is in `body_paths`) before any of the body is
//    read, and its connection is closed (httplib 0.11 would otherwise read a chunked body of any
//    size into memory). Routes that take bodies must bound them themselves (see ReadBodyLimited). A
//    client that sends "Expect: 100-continue" gets that refusal, or 413 when its Content-Length is
//    over `max_body_bytes`, instead of "100 Continue".
//  - A connection closed with request bytes unread (a refused or cut-off body) is closed lingering:
//    FIN after the reply, then what the client still sends is read and dropped for up to 2 s and
//    4 x (`max_header_bytes` + `max_body_bytes`), so that a reset does not destroy the reply before
//    the client reads it.
//  - Replies are never compressed, whatever the request's Accept-Encoding says.
//  - Every error httplib produces itself (400 bad request line, 404, 413) gets a body from
//    `error_body` when the route did not set one.
//
// Thread-safety: Init()/routes/Start()/Stop() from one owning thread; handlers run on the workers.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace httplib {
class Server;
struct Request;
class ContentReader;
}  // namespace httplib

namespace nvl72 {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;          // 0 = any free port (see HttpServer::port())
  std::string tls_cert;  // PEM files; both set = HTTPS
  std::string tls_key;
  std::string client_ca;  // PEM file: require client certificates signed by it
  int workers = 4;
  // Most threads while connections wait for a worker (at least `workers`): slow clients, up to this
  // many, then hold threads of their own instead of the workers other requests need.
  int max_workers = 64;
  // Longest wait for the client's next bytes while a request is read, and for it to take ours.
  std::chrono::milliseconds read_timeout{5000};
  std::chrono::milliseconds write_timeout{5000};
  // Longest time to receive one whole request (TLS handshake, request line, headers, body) from
  // its first byte: a client that trickles bytes just inside the read timeout is cut off here.
  std::chrono::milliseconds request_timeout{10000};
  // An idle keep-alive connection is closed after this, or after 200 ms when another connection
  // waits for a worker.
  std::chrono::seconds keep_alive_timeout{5};
  size_t keep_alive_max_count = 10000;
  // Largest body accepted (routes bound chunked bodies with ReadBodyLimited), and what the request
  // line and headers may add: a request that sends more is cut off and its connection closed.
  size_t max_body_bytes = 1u << 20;
  size_t max_header_bytes = 64u << 10;
  // ECMAScript regex of the paths that accept a request body; "" = none.
  std::string body_paths;
  // What flag names the TLS files in error messages ("--tls-cert" ...).
  std::string tls_flag_prefix = "--tls";
  std::string client_ca_flag = "--client-ca";
  // Body of the error replies httplib makes itself: (status, what) -> (body, content type).
  std::function<std::pair<std::string, std::string>(int, const std::string&)> error_body;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // Stop()s.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Creates the listener (loads the TLS files). kInvalidArgument for bad or half-given TLS files.
  // Routes are added to http() after Init() and before Start().
  Status Init();
  httplib::Server& http() { return *http_; }

  // Binds and serves on a background thread. kUnavailable when the address cannot be bound.
  Status Start();
  int port() const { return port_; }
  bool tls() const { return !options_.tls_cert.empty(); }
  // Stops accepting, finishes in-flight requests, joins. Idempotent.
  void Stop();

 private:
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

// Reads a request body through httplib's ContentReader into `body`, at most `max_bytes`:
// 200 when read; 413 when larger (from Content-Length before reading, or while reading a chunked
// body); 408 when it could not be read completely (the client stalled past the read timeout, or
// left).
// When it is not 200, the connection is closed after the reply (the rest of the body is unread).
int ReadBodyLimited(const httplib::Request& req, const httplib::ContentReader& read_body,
                    size_t max_bytes, std::string* body);

// From a handler: close this connection after the reply instead of keeping it alive.
void CloseConnectionAfterReply();

}  // namespace nvl72
