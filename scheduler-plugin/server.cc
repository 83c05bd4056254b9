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

// Reads the request body into `body`, at most `max_bytes` of it. 200 (empty body) when it was read;
// 413 when it is larger (known from Content-Length before reading, or while reading a chunked
// body); 408 when it could not be read completely (the client stalled past the read timeout or left).
Response ReadBody(const httplib::Request& req, const httplib::ContentReader& read_body,
                  size_t max_bytes, std::string* body) {
  if (req.has_header("Content-Length")) {
    const std::string length = req.get_header_value("Content-Length");
    uint64_t n = 0;
    const std::errc ec = std::from_chars(length.data(), length.data() + length.size(), n).ec;
    if (ec == std::errc::result_out_of_range ||
        (ec == std::errc() && n > static_cast<uint64_t>(max_bytes))) {
      return {413, ErrorBody("request body too large")};
    }
  }
  bool too_large = false;
  const bool read = read_body([&](const char* data, size_t n) {
    if (body->size() + n > max_bytes) {
      too_large = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  if (too_large) return {413, ErrorBody("request body too large")};
  if (!read) return {408, ErrorBody("request body incomplete (client too slow or gone)")};
  return {200, ""};
}

}  // namespace

Server::Server(ServerOptions options, const Service* service, Metrics* metrics)
    : options_(std::move(options)), service_(service), metrics_(metrics) {}

Server::~Server() { Stop(); }

Status Server::Start() {
  if (options_.tls_cert.empty() != options_.tls_key.empty()) {
    return InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options_.client_ca.empty() && options_.tls_cert.empty()) {
    return InvalidArgumentError("--client-ca needs --tls-cert and --tls-key");
  }
  if (!options_.tls_cert.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        options_.tls_cert.c_str(), options_.tls_key.c_str(),
        options_.client_ca.empty() ? nullptr : options_.client_ca.c_str());
    if (!ssl->is_valid()) {
      return InvalidArgumentError("cannot load TLS certificate/key (" + options_.tls_cert + ", " +
                                  options_.tls_key + ")" +
                                  (options_.client_ca.empty() ? "" : " or client CA " + options_.client_ca));
    }
    http_ = std::move(ssl);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  const int workers = std::max(1, options_.workers);
  http_->new_task_queue = [workers] { return new httplib::ThreadPool(static_cast<size_t>(workers)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.read_timeout);
  http_->set_write_timeout(options_.write_timeout);
  http_->set_keep_alive_timeout(static_cast<time_t>(options_.keep_alive_timeout.count()));
  http_->set_keep_alive_max_count(options_.keep_alive_max_count);
  http_->set_tcp_nodelay(true);
  Routes();

  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ <= 0) return UnavailableError("cannot bind " + options_.host + ":0");
  } else {
    if (!http_->bind_to_port(options_.host, options_.port)) {
      return UnavailableError("cannot bind " + options_.host + ":" + std::to_string(options_.port));
    }
    port_ = options_.port;
  }
  auto listening_done = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([this, listening_done] {
    http_->listen_after_bind();
    listening_done->store(true);
  });
  // stop() is a no-op until the accept loop runs: wait for it so that Stop() never hangs.
  while (!http_->is_running() && !listening_done->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

void Server::Stop() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

void Server::Routes() {
  const std::string pattern = RegexEscape(options_.prefix) + "/(filter|prioritize|bind|preempt)";
  // The verbs read their body themselves: httplib 0.11 enforces the payload limit only for bodies
  // with a Content-Length and reads a chunked body of any size into memory.
  http_->Post(pattern, [this](const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader& read_body) {
    const auto start = std::chrono::steady_clock::now();
    const std::string verb = req.matches[1];
    std::string body;
    Response r = ReadBody(req, read_body, options_.max_body_bytes, &body);
    if (r.code == 200) r = service_->Handle(verb, body);
    res.status = r.code;
    res.set_content(std::move(r.body), kJson);
    if (metrics_ != nullptr) {
      metrics_->ObserveRequest(
          verb, r.code,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  });
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (service_->Ready()) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("informer caches not synced\n", "text/plain");
    }
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_ != nullptr ? metrics_->Serialize() : std::string(),
                    "text/plain; version=0.0.4");
  });
  // Errors produced by httplib itself (404 no route, 413 too large, 400 bad request line) and
  // handler exceptions get a JSON body too, and are counted.
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) {
      std::string what = res.status == 413   ? "request body too large"
                         : res.status == 404 ? "no such path " + req.path
                                             : "HTTP " + std::to_string(res.status);
      res.set_content(ErrorBody(what), kJson);
      // Replies of the verb handlers (4xx with a body) are counted by the handler itself.
      if (metrics_ != nullptr && req.method == "POST") metrics_->ObserveRequest("other", res.status, 0);
    }
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what += std::string(": ") + e.what();
        } catch (...) {
        }
        res.status = 500;
        res.set_content(ErrorBody(what), kJson);
      });
}

}  // namespace nvl72::extender
