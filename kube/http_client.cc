#include "kube/http_client.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

#include "kube/watch_decoder.h"

namespace nvl72::kube {
namespace {

// Pointing httplib's CA directory at a path that cannot exist keeps it from loading the system
// trust store on its own (its default when no CA file/dir is set): the configured CA is trusted,
// or, when none is configured, the system store that NewConnection loads itself.
constexpr const char* kNoSystemCaDir = "/dev/null/nvl72-no-system-trust";
constexpr size_t kMaxPooledConnections = 8;
constexpr int kDefaultWatchTimeoutSeconds = 300;
constexpr int kWatchTimeoutJitterSeconds = 60;

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

StatusOr<std::string> ReadFileOrData(const std::string& data, const std::string& file,
                                     const std::string& what) {
  if (!data.empty()) return data;
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status(StatusCode::kNotFound, what + " file \"" + file + "\" cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class Query {
 public:
  Query& Add(std::string_view key, std::string_view value) {
    if (value.empty()) return *this;
    q_ += q_.empty() ? '?' : '&';
    q_ += key;
    q_ += '=';
    q_ += UrlEncode(value);
    return *this;
  }
  const std::string& str() const { return q_; }

 private:
  std::string q_;
};

Status CheckScope(const ResourceRef& r, std::string_view ns, bool list) {
  if (r.namespaced && ns.empty() && !list) {
    return InvalidArgumentError(r.DisplayName() + " is namespaced: a namespace is required");
  }
  if (!r.namespaced && !ns.empty()) {
    return InvalidArgumentError(r.DisplayName() + " is cluster-scoped: no namespace allowed");
  }
  return Status::Ok();
}

Json DeleteOptionsJson(const DeleteOptions& o) {
  Json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (o.propagation_policy) body["propagationPolicy"] = *o.propagation_policy;
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (o.precondition_uid) body["preconditions"]["uid"] = *o.precondition_uid;
  if (o.precondition_resource_version) {
    body["preconditions"]["resourceVersion"] = *o.precondition_resource_version;
  }
  return body;
}

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

StatusOr<std::vector<X509Ptr>> ParseCerts(const std::string& pem, const std::string& what) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the loop ends with a "no start line" error
  if (certs.empty()) return InvalidArgumentError(what + " holds no PEM certificate");
  return certs;
}

// A client certificate and its key, loaded from PEM.
struct ClientCert {
  X509Ptr cert;
  PkeyPtr key;
};

StatusOr<std::shared_ptr<const ClientCert>> ParseClientCert(const std::string& cert_pem,
                                                            const std::string& key_pem) {
  auto certs = ParseCerts(cert_pem, "client certificate");
  if (!certs.ok()) return certs.status();
  auto cc = std::make_shared<ClientCert>();
  cc->cert = std::move(certs.value()[0]);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  cc->key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!cc->key) {
    return InvalidArgumentError("client key is not a PEM private key: " + OpenSslError());
  }
  if (X509_check_private_key(cc->cert.get(), cc->key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("client key does not match the client certificate");
  }
  return std::shared_ptr<const ClientCert>(std::move(cc));
}

// `host` as a numeric address (itself if it is one), for connecting to it while TLS names
// tls-server-name.
StatusOr<std::string> NumericAddress(const std::string& host) {
  in6_addr buf6;
  if (inet_pton(AF_INET, host.c_str(), &buf6) == 1 || inet_pton(AF_INET6, host.c_str(), &buf6) == 1)
    return host;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    return UnavailableError("resolving " + host + ": " + gai_strerror(rc));
  }
  char text[INET6_ADDRSTRLEN] = {0};
  const void* addr =
      res->ai_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(res->ai_addr)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr);
  inet_ntop(res->ai_family, addr, text, sizeof(text));
  freeaddrinfo(res);
  return std::string(text);
}

}  // namespace

// The credentials one request carries.
struct RequestAuth {
  std::string bearer;                                // "" for none
  ExecAuthenticator::CredentialPtr exec_credential;  // what an exec plugin gave, or null
};

struct HttpClient::Impl {
  Config config;
  bool tls = true;
  std::string host;
  int port = 443;
  // The name TLS checks (SNI and the host check): tls-server-name, else the host.
  std::string tls_name;
  std::vector<X509Ptr> ca_certs;
  bool system_trust = false;  // no CA configured: OpenSSL's default paths
  std::unique_ptr<ExecAuthenticator> exec;

  std::mutex mu;
  std::shared_ptr<const ClientCert> client_cert;  // guarded by mu
  // guarded by mu: the exec credential client_cert was last checked against, and its PEM
  ExecAuthenticator::CredentialPtr exec_cert_source;
  std::string exec_cert_pem;
  std::vector<std::unique_ptr<httplib::ClientImpl>> pool;
  std::string token;
  std::chrono::steady_clock::time_point token_read{};
  bool token_loaded = false;
  std::mt19937 rng{std::random_device{}()};
  RequestObserver observer;  // set before requests (SetRequestObserver)

  Status Init() {
    NVL72_RETURN_IF_ERROR(ParseServer());
    tls_name = config.tls_server_name.empty() ? host : config.tls_server_name;
    if (config.exec) exec = std::make_unique<ExecAuthenticator>(*config.exec);
    if (!tls) return Status::Ok();
    if (!config.insecure_skip_tls_verify) NVL72_RETURN_IF_ERROR(LoadCa());
    bool has_cert = !config.client_cert_data.empty() || !config.client_cert_file.empty();
    if (has_cert) NVL72_RETURN_IF_ERROR(LoadClientCert());
    // Fail early on an unreadable token file.
    if (!config.token_file.empty()) {
      auto t = config.BearerToken();
      if (!t.ok()) return t.status();
    }
    return Status::Ok();
  }

  // Sets tls, host and port from config.server ("https://host[:port]", "http://...", "[v6]").
  Status ParseServer() {
    const std::string& s = config.server;
    std::string rest;
    if (s.rfind("https://", 0) == 0) {
      rest = s.substr(8);
    } else if (s.rfind("http://", 0) == 0) {
      tls = false;
      port = 80;
      rest = s.substr(7);
    } else {
      return InvalidArgumentError("server \"" + s + "\" must start with https://");
    }
    size_t slash = rest.find('/');
    if (slash != std::string::npos) {
      if (rest.substr(slash) != "/") {
        return InvalidArgumentError("server \"" + s + "\": a path prefix is not supported");
      }
      rest = rest.substr(0, slash);
    }
    NVL72_RETURN_IF_ERROR(ParseHostPort(std::move(rest)));
    if (host.empty() || port <= 0 || port > 65535) {
      return InvalidArgumentError("server \"" + s + "\": bad host or port");
    }
    return Status::Ok();
  }

  // Sets host, and port if `rest` ("host", "host:port", "[v6]" or "[v6]:port") names one.
  Status ParseHostPort(std::string rest) {
    if (!rest.empty() && rest[0] == '[') {
      size_t close = rest.find(']');
      if (close == std::string::npos)
        return InvalidArgumentError("server \"" + config.server + "\": bad IPv6 host");
      host = rest.substr(1, close - 1);
      rest = rest.substr(close + 1);
      if (!rest.empty() && rest[0] == ':') port = std::atoi(rest.c_str() + 1);
    } else {
      size_t colon = rest.rfind(':');
      host = rest.substr(0, colon);
      if (colon != std::string::npos) port = std::atoi(rest.c_str() + colon + 1);
    }
    return Status::Ok();
  }

  Status LoadCa() {
    if (config.ca_data.empty() && config.ca_file.empty()) {
      system_trust = true;
      return Status::Ok();
    }
    auto pem = ReadFileOrData(config.ca_data, config.ca_file, "certificate authority");
    if (!pem.ok()) return pem.status();
    auto certs = ParseCerts(*pem, "certificate authority");
    if (!certs.ok()) return certs.status();
    ca_certs = std::move(certs).value();
    return Status::Ok();
  }

  Status LoadClientCert() {
    auto cert_pem =
        ReadFileOrData(config.client_cert_data, config.client_cert_file, "client certificate");
    if (!cert_pem.ok()) return cert_pem.status();
    auto key_pem = ReadFileOrData(config.client_key_data, config.client_key_file, "client key");
    if (!key_pem.ok()) return key_pem.status();
    auto cc = ParseClientCert(*cert_pem, *key_pem);
    if (!cc.ok()) return cc.status();
    client_cert = std::move(cc).value();
    return Status::Ok();
  }

  // The server-side timeout of a watch: the requested one, else the default plus jitter (so that
  // the watches of many clients do not all restart together).
  int WatchTimeoutSeconds(int requested) {
    if (requested > 0) return requested;
    std::lock_guard<std::mutex> l(mu);
    return kDefaultWatchTimeoutSeconds +
           std::uniform_int_distribution<int>(0, kWatchTimeoutJitterSeconds - 1)(rng);
  }

  // An SSLClient that trusts the configured CA (or the system store) and presents the client
  // certificate; it names tls-server-name in SNI and in the host check when one is set.
  StatusOr<std::unique_ptr<httplib::ClientImpl>> NewTlsConnection() {
    auto ssl = std::make_unique<httplib::SSLClient>(tls_name, port);
    if (tls_name != host) {
      auto addr = NumericAddress(host);
      if (!addr.ok()) return addr.status();
      ssl->set_hostname_addr_map({{tls_name, *addr}});
    }
    SSL_CTX* ctx = ssl->ssl_context();
    if (ctx == nullptr) return InternalError("TLS context creation failed: " + OpenSslError());
    ssl->enable_server_certificate_verification(!config.insecure_skip_tls_verify);
    if (!config.insecure_skip_tls_verify) {
      X509_STORE* store = SSL_CTX_get_cert_store(ctx);
      for (const X509Ptr& ca : ca_certs) {
        if (X509_STORE_add_cert(store, ca.get()) != 1) {
          ERR_clear_error();  // duplicate certificates are harmless
        }
      }
      if (system_trust && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        return InternalError("loading the system trust store failed: " + OpenSslError());
      }
      ssl->set_ca_cert_path("", kNoSystemCaDir);
    }
    std::shared_ptr<const ClientCert> cc;
    {
      std::lock_guard<std::mutex> l(mu);
      cc = client_cert;
    }
    if (cc && (SSL_CTX_use_certificate(ctx, cc->cert.get()) != 1 ||
               SSL_CTX_use_PrivateKey(ctx, cc->key.get()) != 1)) {
      return InternalError("loading the client certificate into TLS failed: " + OpenSslError());
    }
    return std::unique_ptr<httplib::ClientImpl>(std::move(ssl));
  }

  StatusOr<std::unique_ptr<httplib::ClientImpl>> NewConnection(
      std::chrono::milliseconds read_timeout) {
    std::unique_ptr<httplib::ClientImpl> cli;
    if (tls) {
      auto ssl = NewTlsConnection();
      if (!ssl.ok()) return ssl.status();
      cli = std::move(ssl).value();
    } else {
      cli = std::make_unique<httplib::ClientImpl>(host, port);
    }
    auto secs = [](std::chrono::milliseconds d) {
      return std::pair<time_t, time_t>(d.count() / 1000, (d.count() % 1000) * 1000);
    };
    auto [cs, cus] = secs(config.connect_timeout);
    cli->set_connection_timeout(cs, cus);
    auto [rs, rus] = secs(read_timeout);
    cli->set_read_timeout(rs, rus);
    cli->set_write_timeout(rs, rus);
    cli->set_keep_alive(true);
    // httplib writes headers and body separately: without TCP_NODELAY, Nagle holds the body until
    // the server's delayed ACK (40 ms on Linux) on every write request.
    cli->set_tcp_nodelay(true);
    cli->set_url_encode(false);
    httplib::Headers headers{{"User-Agent", config.user_agent}, {"Accept", "application/json"}};
    // With tls-server-name the client was built for that name: the Host header still names the
    // server.
    if (tls && tls_name != host) {
      headers.emplace("Host", (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                                  ":" + std::to_string(port));
    }
    cli->set_default_headers(std::move(headers));
    return cli;
  }

  // A pooled (kept-alive) connection if there is one (`*pooled` true), else a new one.
  StatusOr<std::unique_ptr<httplib::ClientImpl>> Acquire(bool* pooled) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (!pool.empty()) {
        auto c = std::move(pool.back());
        pool.pop_back();
        *pooled = true;
        return c;
      }
    }
    *pooled = false;
    return NewConnection(config.request_timeout);
  }

  void Release(std::unique_ptr<httplib::ClientImpl> c) {
    std::lock_guard<std::mutex> l(mu);
    if (pool.size() < kMaxPooledConnections) pool.push_back(std::move(c));
  }

  // The bearer token to send; re-read from the file when stale or when `force`.
  StatusOr<std::string> Token(bool force) {
    if (config.token_file.empty()) return config.token;
    std::lock_guard<std::mutex> l(mu);
    auto now = std::chrono::steady_clock::now();
    if (force || !token_loaded || now - token_read >= config.token_reread_interval) {
      auto t = config.BearerToken();
      if (!t.ok()) return t.status();
      token = *t;
      token_read = now;
      token_loaded = true;
    }
    return token;
  }

  // The exec plugin's credential; a new client certificate replaces the old one and empties the
  // pool (its connections present the old one).
  StatusOr<ExecAuthenticator::CredentialPtr> ExecCredentialNow() {
    auto cred = exec->Get();
    if (!cred.ok()) return cred.status();
    const ExecCredential& c = **cred;
    std::lock_guard<std::mutex> l(mu);
    if (*cred == exec_cert_source) return cred;  // the usual case: nothing new
    exec_cert_source = *cred;
    if (c.client_cert_pem != exec_cert_pem) {
      std::shared_ptr<const ClientCert> cc;
      if (!c.client_cert_pem.empty()) {
        auto parsed = ParseClientCert(c.client_cert_pem, c.client_key_pem);
        if (!parsed.ok()) {
          return Status(StatusCode::kUnauthenticated,
                        exec->config().Describe() + ": " + parsed.status().message());
        }
        cc = std::move(parsed).value();
      }
      client_cert = std::move(cc);
      exec_cert_pem = c.client_cert_pem;
      pool.clear();
    }
    return cred;
  }

  StatusOr<RequestAuth> Auth() {
    RequestAuth auth;
    if (exec) {
      auto cred = ExecCredentialNow();
      if (!cred.ok()) return cred.status();
      auth.exec_credential = *cred;
      auth.bearer = auth.exec_credential->token;
      return auth;
    }
    auto token = Token(false);
    if (!token.ok()) return token.status();
    auth.bearer = *token;
    return auth;
  }

  static void AddAuth(const RequestAuth& auth, httplib::Headers& headers) {
    if (!auth.bearer.empty()) headers.emplace("Authorization", "Bearer " + auth.bearer);
  }

  // After a 401 with `auth`: gets fresh credentials (the token file read again, or the exec plugin
  // run again) and says whether the request is worth sending once more with them.
  bool RefreshAfter401(const RequestAuth& auth, Status* refresh_error) {
    if (exec) {
      *refresh_error = exec->Refresh(auth.exec_credential);
      return refresh_error->ok();
    }
    if (config.token_file.empty()) return false;
    *refresh_error = Token(true).status();
    return refresh_error->ok();
  }

  Status TransportFailure(httplib::ClientImpl* cli, httplib::Error err, const std::string& what) {
    std::string m = what + " " + config.server + ": " + httplib::to_string(err);
    if (err == httplib::Error::SSLServerVerification) {
      long v = X509_V_OK;
      if (auto* ssl = dynamic_cast<httplib::SSLClient*>(cli)) v = ssl->get_openssl_verify_result();
      if (v == X509_V_OK) {  // the chain is trusted: the host check failed
        m += ": the server certificate does not name \"" + tls_name +
             "\" (check the server address or tls-server-name)";
      } else {
        m += " (" + std::string(X509_verify_cert_error_string(v)) + ")";
        m += ": the server certificate is not signed by the " +
             std::string(system_trust ? "system trust store" : "configured certificate authority");
      }
    }
    if (err == httplib::Error::ConnectionTimeout) {
      return Status(StatusCode::kDeadlineExceeded, "transport: " + m);
    }
    return Status(StatusCode::kUnavailable, "transport: " + m);
  }

  StatusOr<Json> Do(std::string_view verb, std::string_view method, const std::string& path,
                    const std::string* body, std::string_view content_type) {
    bool retried_auth = false;
    bool retried_stale = false;
    while (true) {
      const auto t0 = std::chrono::steady_clock::now();
      auto observe = [&](int code) {
        if (observer) {
          observer(verb, code,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
      };
      auto auth = Auth();
      if (!auth.ok()) return auth.status();
      bool pooled = false;
      auto cli = retried_stale ? NewConnection(config.request_timeout) : Acquire(&pooled);
      if (!cli.ok()) return cli.status();
      httplib::Request req;
      req.method = std::string(method);
      req.path = path;
      AddAuth(*auth, req.headers);
      if (body != nullptr) {
        req.body = *body;
        req.headers.emplace("Content-Type", std::string(content_type));
      }
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      bool ok = (*cli)->send(req, res, err);
      observe(ok ? res.status : 0);
      if (!ok) {
        // A kept-alive connection the API server closed meanwhile (its idle timeout; over TLS the
        // close_notify it sends first makes the socket look alive to httplib) fails the request
        // before any answer: once more on a new connection, when that cannot do anything twice: the
        // request was not written, or it is a GET. (Seen in the soak: binds failed this way.)
        if (pooled && !retried_stale &&
            (err == httplib::Error::Write || (err == httplib::Error::Read && method == "GET"))) {
          retried_stale = true;
          continue;
        }
        return TransportFailure(cli->get(), err, std::string(method) + " " + path);
      }
      Release(std::move(cli).value());
      Status refresh_error;
      if (res.status == 401 && !retried_auth) {
        retried_auth = true;  // maybe the token rotated or expired early: once more with a new one
        if (RefreshAfter401(*auth, &refresh_error)) continue;
      }
      return Decode(res, std::string(method) + " " + path, refresh_error);
    }
  }

  // The JSON of a 2xx response, else its status (with why new credentials could not be had).
  static StatusOr<Json> Decode(const httplib::Response& res, const std::string& request,
                               const Status& refresh_error) {
    if (res.status < 200 || res.status >= 300) {
      Status s = StatusFromHttp(res.status, res.body);
      std::string m = s.message() + " (" + request + ")";
      if (!refresh_error.ok()) m += "; getting new credentials failed: " + refresh_error.message();
      return Status(s.code(), m);
    }
    if (res.body.empty()) return Json();
    Json parsed = Json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      return InternalError("malformed JSON in the response to " + request + ": \"" +
                           res.body.substr(0, 128) + "\"");
    }
    return parsed;
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const Config& config) {
  // OpenSSL writes with write(2): a peer that closed (or a watch we cancelled by shutting the
  // socket down) would otherwise kill the process with SIGPIPE instead of failing the call.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  Status s = impl->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

void HttpClient::SetRequestObserver(RequestObserver observer) {
  impl_->observer = std::move(observer);
}

namespace {
std::string_view VerbOfMethod(std::string_view method) {
  if (method == "GET") return "get";
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return "delete";
  return "other";
}
}  // namespace

StatusOr<Json> HttpClient::Request(std::string_view method, const std::string& path,
                                   const Json* body, std::string_view content_type) {
  return Send(VerbOfMethod(method), method, path, body, content_type);
}

StatusOr<Json> HttpClient::Send(std::string_view verb, std::string_view method,
                                const std::string& path, const Json* body,
                                std::string_view content_type) {
  if (body == nullptr) return impl_->Do(verb, method, path, nullptr, content_type);
  std::string text = body->dump();
  return impl_->Do(verb, method, path, &text, content_type);
}

StatusOr<Json> HttpClient::Get(const ResourceRef& resource, std::string_view ns,
                               std::string_view name) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  if (name.empty()) return InvalidArgumentError("Get: empty name");
  return Request("GET", resource.ObjectPath(ns, name));
}

StatusOr<ListResult> HttpClient::List(const ResourceRef& resource, std::string_view ns,
                                      const ListOptions& options) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, true));
  Query q;
  q.Add("labelSelector", options.label_selector)
      .Add("fieldSelector", options.field_selector)
      .Add("limit", options.limit > 0 ? std::to_string(options.limit) : "")
      .Add("continue", options.continue_token)
      .Add("resourceVersion", options.resource_version);
  auto body = Send("list", "GET", resource.CollectionPath(ns) + q.str());
  if (!body.ok()) return body.status();
  if (!body->is_object() || !body->contains("items")) {
    return InternalError("list of " + resource.DisplayName() + ": response has no items");
  }
  ListResult result;
  Json& items = (*body)["items"];
  if (items.is_array()) {
    result.items.reserve(items.size());
    // List items carry no apiVersion/kind: fill them so objects look like those from Get/Watch.
    for (Json& item : items) {
      if (item.is_object()) {
        if (!item.contains("apiVersion")) item["apiVersion"] = resource.ApiVersion();
        if (!item.contains("kind")) item["kind"] = resource.kind;
      }
      result.items.push_back(std::move(item));
    }
  }
  const Json& meta = (*body)["metadata"];
  if (meta.is_object()) {
    result.resource_version = meta.value("resourceVersion", "");
    result.continue_token = meta.value("continue", "");
  }
  return result;
}

namespace {
Json WithTypeMeta(const ResourceRef& resource, const Json& obj) {
  Json out = obj;
  if (out.is_object()) {
    if (!out.contains("apiVersion")) out["apiVersion"] = resource.ApiVersion();
    if (!out.contains("kind")) out["kind"] = resource.kind;
  }
  return out;
}
}  // namespace

StatusOr<Json> HttpClient::Create(const ResourceRef& resource, std::string_view ns, const Json& obj,
                                  const WriteOptions& options) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  if (!obj.is_object()) return InvalidArgumentError("Create: object is not a JSON object");
  Json body = WithTypeMeta(resource, obj);
  return Request(
      "POST",
      resource.CollectionPath(ns) + Query().Add("fieldManager", options.field_manager).str(),
      &body);
}

StatusOr<Json> HttpClient::Update(const ResourceRef& resource, std::string_view ns, const Json& obj,
                                  const WriteOptions& options) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  std::string name = Name(obj);
  if (name.empty()) return InvalidArgumentError("Update: object has no metadata.name");
  Json body = WithTypeMeta(resource, obj);
  return Request(
      "PUT",
      resource.ObjectPath(ns, name) + Query().Add("fieldManager", options.field_manager).str(),
      &body);
}

StatusOr<Json> HttpClient::UpdateStatus(const ResourceRef& resource, std::string_view ns,
                                        const Json& obj, const WriteOptions& options) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  std::string name = Name(obj);
  if (name.empty()) return InvalidArgumentError("UpdateStatus: object has no metadata.name");
  Json body = WithTypeMeta(resource, obj);
  return Request("PUT",
                 resource.ObjectPath(ns, name, "status") +
                     Query().Add("fieldManager", options.field_manager).str(),
                 &body);
}

StatusOr<Json> HttpClient::Patch(const ResourceRef& resource, std::string_view ns,
                                 std::string_view name, PatchType type, const Json& patch,
                                 const PatchOptions& options, std::string_view subresource) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  if (name.empty()) return InvalidArgumentError("Patch: empty name");
  std::string_view content_type;
  Query q;
  switch (type) {
    case PatchType::kMerge:
      content_type = "application/merge-patch+json";
      break;
    case PatchType::kJson:
      if (!patch.is_array())
        return InvalidArgumentError("JSON patch must be an array of operations");
      content_type = "application/json-patch+json";
      break;
    case PatchType::kStrategicMerge:
      content_type = "application/strategic-merge-patch+json";
      break;
    case PatchType::kApply:
      if (options.field_manager.empty()) {
        return InvalidArgumentError("server-side apply needs PatchOptions.field_manager");
      }
      content_type = "application/apply-patch+yaml";  // JSON is valid YAML
      if (options.force) q.Add("force", "true");
      break;
  }
  q.Add("fieldManager", options.field_manager);
  Json body = type == PatchType::kApply ? WithTypeMeta(resource, patch) : patch;
  return Request("PATCH", resource.ObjectPath(ns, name, subresource) + q.str(), &body,
                 content_type);
}

Status HttpClient::Delete(const ResourceRef& resource, std::string_view ns, std::string_view name,
                          const DeleteOptions& options) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, false));
  if (name.empty()) return InvalidArgumentError("Delete: empty name");
  Json body = DeleteOptionsJson(options);
  return Request("DELETE", resource.ObjectPath(ns, name), &body).status();
}

Status HttpClient::Bind(std::string_view ns, std::string_view pod, std::string_view pod_uid,
                        std::string_view node) {
  if (ns.empty() || pod.empty() || node.empty())
    return InvalidArgumentError("Bind: empty ns/pod/node");
  Json body = {{"apiVersion", "v1"},
               {"kind", "Binding"},
               {"metadata", {{"name", pod}, {"namespace", ns}}},
               {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!pod_uid.empty()) body["metadata"]["uid"] = pod_uid;
  return Request("POST", kPods.ObjectPath(ns, pod, "binding"), &body).status();
}

Status HttpClient::Evict(std::string_view ns, std::string_view pod, const DeleteOptions& options) {
  if (ns.empty() || pod.empty()) return InvalidArgumentError("Evict: empty ns/pod");
  Json body = {{"apiVersion", "policy/v1"},
               {"kind", "Eviction"},
               {"metadata", {{"name", pod}, {"namespace", ns}}},
               {"deleteOptions", DeleteOptionsJson(options)}};
  return Request("POST", kPods.ObjectPath(ns, pod, "eviction"), &body).status();
}

namespace {

std::string WatchPath(const ResourceRef& resource, std::string_view ns, const WatchOptions& options,
                      int timeout) {
  Query q;
  q.Add("watch", "1")
      .Add("resourceVersion", options.resource_version)
      .Add("allowWatchBookmarks", options.allow_bookmarks ? "true" : "")
      .Add("timeoutSeconds", std::to_string(timeout))
      .Add("labelSelector", options.label_selector)
      .Add("fieldSelector", options.field_selector);
  return resource.CollectionPath(ns) + q.str();
}

// One watch response as httplib delivers it: the status line, then body chunks, decoded into
// events for `handler` (a non-200 body is kept, bounded, for the error message).
class WatchStream {
 public:
  WatchStream(const WatchHandler& handler, const std::stop_token& stop)
      : handler_(handler), stop_(stop) {}

  bool OnResponse(const httplib::Response& res) {
    http_status_ = res.status;
    return !stop_.stop_requested();
  }

  bool OnData(const char* data, size_t len) {
    if (stop_.stop_requested()) return false;
    if (http_status_ != 200) {
      if (error_body_.size() < size_t{64} * 1024) error_body_.append(data, len);
      return true;
    }
    Status s = decoder_.Feed(std::string_view(data, len),
                             [this](Json&& value) { return Deliver(std::move(value)); });
    if (!s.ok()) {
      if (!handler_stopped_) stream_status_ = s;
      return false;
    }
    return true;
  }

  bool handler_stopped() const { return handler_stopped_; }
  const Status& stream_status() const { return stream_status_; }

  // How a stream that httplib read to its end (no transport failure) ended.
  Status Result(const ResourceRef& resource, const std::string& path) const {
    if (http_status_ != 200) {
      Status s = StatusFromHttp(http_status_, error_body_);
      return Status(s.code(), s.message() + " (watch " + path + ")");
    }
    if (decoder_.HasPartialValue()) {
      return Status(StatusCode::kUnavailable, "watch stream of " + resource.DisplayName() +
                                                  " ended inside an event (connection cut)");
    }
    return Status::Ok();
  }

 private:
  Status Deliver(Json&& value) {
    auto ev = ParseWatchEvent(std::move(value));
    if (!ev.ok()) return ev.status();
    if (!handler_(std::move(ev).value())) {
      handler_stopped_ = true;
      return Status(StatusCode::kCancelled, "handler ended the watch");
    }
    return Status::Ok();
  }

  const WatchHandler& handler_;
  const std::stop_token& stop_;
  int http_status_ = 0;
  std::string error_body_;
  JsonStreamDecoder decoder_;
  Status stream_status_;  // decoder error or an ERROR event
  bool handler_stopped_ = false;
};

}  // namespace

Status HttpClient::Watch(const ResourceRef& resource, std::string_view ns,
                         const WatchOptions& options, const WatchHandler& handler,
                         std::stop_token stop) {
  NVL72_RETURN_IF_ERROR(CheckScope(resource, ns, true));
  const int timeout = impl_->WatchTimeoutSeconds(options.timeout_seconds);
  const std::string path = WatchPath(resource, ns, options, timeout);

  // A dedicated connection: the stream occupies it; reads may be silent for up to `timeout`.
  auto auth = impl_->Auth();
  if (!auth.ok()) return auth.status();
  auto cli_or = impl_->NewConnection(std::chrono::seconds(timeout + 30));
  if (!cli_or.ok()) return cli_or.status();
  std::unique_ptr<httplib::ClientImpl> cli = std::move(cli_or).value();
  httplib::Headers headers;
  Impl::AddAuth(*auth, headers);

  std::stop_callback cancel(stop, [&cli] { cli->stop(); });

  WatchStream stream(handler, stop);
  auto result = cli->Get(
      path, headers, [&](const httplib::Response& res) { return stream.OnResponse(res); },
      [&](const char* data, size_t len) { return stream.OnData(data, len); });

  if (stream.handler_stopped()) return Status::Ok();
  if (!stream.stream_status().ok()) return stream.stream_status();
  if (stop.stop_requested()) return Status(StatusCode::kCancelled, "watch stopped");
  if (!result) {
    return impl_->TransportFailure(cli.get(), result.error(), "watch " + resource.DisplayName());
  }
  Status s = stream.Result(resource, path);
  if (s.code() == StatusCode::kUnauthenticated) {
    // The next watch (the informer restarts it) carries a fresh credential.
    Status refresh_error;
    if (!impl_->RefreshAfter401(*auth, &refresh_error) && !refresh_error.ok()) {
      return Status(s.code(),
                    s.message() + "; getting new credentials failed: " + refresh_error.message());
    }
  }
  return s;
}

}  // namespace nvl72::kube
