#include "scheduler-plugin/server.h"

#include <httplib.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <regex>

namespace nvl72::extender {
namespace {

constexpr const char* kJson = "application/json";

std::string RegexEscape(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

std::string VerbPattern(const std::string& prefix) {
  return RegexEscape(prefix) + "/(filter|prioritize|bind|preempt)";
}

}  // namespace

Server::Server(ServerOptions options, const Service* service, Metrics* metrics)
    : options_(std::move(options)), service_(service), metrics_(metrics) {}

Server::~Server() { Stop(); }

Status Server::Start() {
  HttpServerOptions o;
  o.host = options_.host;
  o.port = options_.port;
  o.tls_cert = options_.tls_cert;
  o.tls_key = options_.tls_key;
  o.client_ca = options_.client_ca;
  o.workers = options_.workers;
  o.read_timeout = options_.read_timeout;
  o.write_timeout = options_.write_timeout;
  // A whole request (headers and body) must arrive within twice the per-read timeout, at least 10
  // s.
  o.request_timeout = std::max(std::chrono::milliseconds(10000), 2 * options_.read_timeout);
  o.keep_alive_timeout = options_.keep_alive_timeout;
  o.keep_alive_max_count = options_.keep_alive_max_count;
  o.max_body_bytes = options_.max_body_bytes;
  o.body_paths = VerbPattern(options_.prefix);
  // Errors produced by httplib itself (404 no route, 413 too large, 400 bad request line) get a
  // JSON body too, and are counted.
  Metrics* metrics = metrics_;
  o.error_body = [metrics](int status, const std::string& what) {
    if (metrics != nullptr) metrics->ObserveRequest("other", status, 0);
    return std::make_pair(ErrorBody(what), std::string(kJson));
  };
  http_ = std::make_unique<HttpServer>(std::move(o));
  if (Status s = http_->Init(); !s.ok()) return s;
  Routes();
  if (Status s = http_->Start(); !s.ok()) return s;
  port_ = http_->port();
  return Status::Ok();
}

void Server::Stop() {
  if (http_ != nullptr) http_->Stop();
}

void Server::Routes() {
  httplib::Server& http = http_->http();
  const std::string pattern = VerbPattern(options_.prefix);
  // The verbs read their body themselves: httplib 0.11 enforces the payload limit only for bodies
  // with a Content-Length and reads a chunked body of any size into memory.
  http.Post(pattern, [this](const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& read_body) {
    const auto start = std::chrono::steady_clock::now();
    const std::string verb = req.matches[1];
    std::string body;
    Response r;
    switch (ReadBodyLimited(req, read_body, options_.max_body_bytes, &body)) {
      case 200:
        r = service_->Handle(verb, body);
        break;
      case 413:
        r = {413, ErrorBody("request body too large")};
        break;
      default:
        r = {408, ErrorBody("request body incomplete (client too slow or gone)")};
        break;
    }
    res.status = r.code;
    res.set_content(r.body, kJson);
    if (metrics_ != nullptr) {
      metrics_->ObserveRequest(
          verb, r.code,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (service_->Ready()) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("informer caches not synced\n", "text/plain");
    }
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_ != nullptr ? metrics_->Serialize() : std::string(),
                    "text/plain; version=0.0.4");
  });
}

}  // namespace nvl72::extender
