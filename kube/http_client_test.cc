// HttpClient against an in-process plain-HTTP httplib server: request shapes, error mapping and
// watch streaming. TLS behaviour (CA verification, client certificates) is covered by the
// integration test against the real API server.
#include "kube/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

namespace nvl72::kube {
namespace {

using namespace std::chrono_literals;

class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
  }
  void StartServer() {
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::unique_ptr<HttpClient> Client(const std::string& token = "secret-token") {
    Config c;
    c.server = "http://127.0.0.1:" + std::to_string(port_);
    c.token = token;
    c.request_timeout = 5s;
    auto client = HttpClient::Create(c);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(client).value();
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> seen_;  // "METHOD target content-type body"
};

TEST_F(HttpClientTest, VerbsSendTheRightRequests) {
  auto record = [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu_);
    std::string target = req.target.empty() ? req.path : req.target;
    seen_.push_back(req.method + " " + target + " " + req.get_header_value("Content-Type") + " " +
                    req.body);
    EXPECT_EQ(req.get_header_value("Authorization"), "Bearer secret-token");
    res.set_content(R"({"kind":"X","metadata":{"name":"n","resourceVersion":"5"}})",
                    "application/json");
  };
  server_.Get(".*", record);
  server_.Post(".*", record);
  server_.Put(".*", record);
  server_.Patch(".*", record);
  server_.Delete(".*", record);
  StartServer();
  auto c = Client();
  ResourceRef jobs = ResourceRef::Custom("nvl72.dev", "v1alpha1", "nvl72jobs", "NVL72Job", true);
  ASSERT_TRUE(c->Get(kPods, "ns", "p").ok());
  ASSERT_TRUE(c->Create(kConfigMaps, "ns", {{"metadata", {{"name", "c"}}}}, {"mgr"}).ok());
  ASSERT_TRUE(c->Update(jobs, "ns", {{"metadata", {{"name", "j"}}}}).ok());
  ASSERT_TRUE(c->UpdateStatus(jobs, "ns", {{"metadata", {{"name", "j"}}}}).ok());
  ASSERT_TRUE(c->Patch(kNodes, "", "n1", PatchType::kStrategicMerge, {{"a", 1}}).ok());
  ASSERT_TRUE(c->Patch(kNodes, "", "n1", PatchType::kApply, {{"a", 1}}, {"op", true}).ok());
  ASSERT_TRUE(c->Patch(jobs, "ns", "j", PatchType::kJson, Json::array(), {}, "status").ok());
  DeleteOptions del;
  del.propagation_policy = "Foreground";
  del.precondition_uid = "u";
  ASSERT_TRUE(c->Delete(kPods, "ns", "p", del).ok());
  ASSERT_TRUE(c->Bind("ns", "p", "uid1", "node1").ok());
  ASSERT_TRUE(c->Evict("ns", "p").ok());
  EXPECT_EQ(c->Patch(kNodes, "", "n1", PatchType::kApply, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Get(kPods, "", "p").status().code(), StatusCode::kInvalidArgument);

  std::lock_guard<std::mutex> l(mu_);
  ASSERT_EQ(seen_.size(), 10u);
  EXPECT_EQ(seen_[0], "GET /api/v1/namespaces/ns/pods/p  ");
  EXPECT_EQ(seen_[1],
            "POST /api/v1/namespaces/ns/configmaps?fieldManager=mgr application/json "
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}})");
  EXPECT_EQ(
      seen_[2].rfind("PUT /apis/nvl72.dev/v1alpha1/namespaces/ns/nvl72jobs/j application/json ", 0),
      0u)
      << seen_[2];
  EXPECT_EQ(
      seen_[3].rfind(
          "PUT /apis/nvl72.dev/v1alpha1/namespaces/ns/nvl72jobs/j/status application/json ", 0),
      0u)
      << seen_[3];
  EXPECT_EQ(seen_[4], R"(PATCH /api/v1/nodes/n1 application/strategic-merge-patch+json {"a":1})");
  EXPECT_EQ(seen_[5],
            "PATCH /api/v1/nodes/n1?force=true&fieldManager=op application/apply-patch+yaml "
            R"({"a":1,"apiVersion":"v1","kind":"Node"})");
  EXPECT_EQ(seen_[6],
            "PATCH /apis/nvl72.dev/v1alpha1/namespaces/ns/nvl72jobs/j/status "
            "application/json-patch+json []");
  EXPECT_EQ(seen_[7],
            "DELETE /api/v1/namespaces/ns/pods/p application/json "
            R"({"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"u"},)"
            R"("propagationPolicy":"Foreground"})");
  EXPECT_EQ(
      seen_[8],
      "POST /api/v1/namespaces/ns/pods/p/binding application/json "
      R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","namespace":"ns","uid":"uid1"},)"
      R"("target":{"apiVersion":"v1","kind":"Node","name":"node1"}})");
  EXPECT_EQ(seen_[9].rfind("POST /api/v1/namespaces/ns/pods/p/eviction application/json "
                           R"({"apiVersion":"policy/v1","deleteOptions")",
                           0),
            0u)
      << seen_[9];
}

TEST_F(HttpClientTest, ListEncodesSelectorsAndFillsTypeMeta) {
  std::string target;
  server_.Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    target = req.target;
    res.set_content(R"({"kind":"PodList","metadata":{"resourceVersion":"42","continue":"tok"},
        "items":[{"metadata":{"name":"a","namespace":"x"}}]})",
                    "application/json");
  });
  StartServer();
  auto c = Client();
  ListOptions o;
  o.label_selector = "app in (a,b),!x";
  o.field_selector = "spec.nodeName=n 1";
  o.limit = 500;
  auto r = c->List(kPods, "", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(
      target,
      "/api/v1/pods?labelSelector=app%20in%20%28a%2Cb%29%2C%21x&fieldSelector=spec.nodeName%3Dn%201"
      "&limit=500");
  EXPECT_EQ(r->resource_version, "42");
  EXPECT_EQ(r->continue_token, "tok");
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(r->items[0]["kind"], "Pod");
  EXPECT_EQ(r->items[0]["apiVersion"], "v1");
}

TEST_F(HttpClientTest, ErrorMapping) {
  server_.Get("/api/v1/namespaces/ns/configmaps/conflict", [](const httplib::Request&,
                                                              httplib::Response& res) {
    res.status = 409;
    res.set_content(R"({"kind":"Status","code":409,"reason":"Conflict","message":"stale"})",
                    "application/json");
  });
  server_.Get("/api/v1/namespaces/ns/configmaps/busy",
              [](const httplib::Request&, httplib::Response& res) {
                res.status = 503;
                res.set_content("upstream overloaded", "text/plain");
              });
  server_.Get("/api/v1/namespaces/ns/configmaps/garbage",
              [](const httplib::Request&, httplib::Response& res) {
                res.set_content("{not json", "application/json");
              });
  server_.Get("/api/v1/namespaces/ns/configmaps/forbidden", [](const httplib::Request&,
                                                               httplib::Response& res) {
    res.status = 403;
    res.set_content(R"({"kind":"Status","code":403,"reason":"Forbidden","message":"no"})",
                    "application/json");
  });
  StartServer();
  auto c = Client();
  Status conflict = c->Get(kConfigMaps, "ns", "conflict").status();
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_EQ(Reason(conflict), "Conflict");
  Status busy = c->Get(kConfigMaps, "ns", "busy").status();
  EXPECT_EQ(busy.code(), StatusCode::kUnavailable);
  EXPECT_NE(busy.message().find("upstream overloaded"), std::string::npos);
  Status garbage = c->Get(kConfigMaps, "ns", "garbage").status();
  EXPECT_EQ(garbage.code(), StatusCode::kInternal);
  EXPECT_NE(garbage.message().find("malformed JSON"), std::string::npos);
  Status forbidden = c->Get(kConfigMaps, "ns", "forbidden").status();
  EXPECT_TRUE(IsForbidden(forbidden));
  EXPECT_FALSE(forbidden.IsRetryable());
  EXPECT_EQ(forbidden.message().find("secret-token"), std::string::npos);
}

TEST_F(HttpClientTest, ObserverSeesVerbAndCodeOfEveryRequest) {
  server_.Get("/api/v1/namespaces/ns/configmaps/a",
              [](const httplib::Request&, httplib::Response& res) {
                res.set_content(R"({"metadata":{"name":"a"}})", "application/json");
              });
  server_.Get(
      "/api/v1/namespaces/ns/configmaps", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"metadata":{"resourceVersion":"1"},"items":[]})", "application/json");
      });
  server_.Post("/api/v1/namespaces/ns/configmaps", [](const httplib::Request&,
                                                      httplib::Response& res) {
    res.status = 409;
    res.set_content(R"({"kind":"Status","code":409,"reason":"AlreadyExists"})", "application/json");
  });
  server_.Delete(
      "/api/v1/namespaces/ns/configmaps/a", [](const httplib::Request&, httplib::Response& res) {
        res.status = 404;
        res.set_content(R"({"kind":"Status","code":404,"reason":"NotFound"})", "application/json");
      });
  StartServer();
  auto c = Client();
  std::mutex mu;
  std::vector<std::string> seen;  // "verb code"
  c->SetRequestObserver([&](std::string_view verb, int code, double seconds) {
    EXPECT_GE(seconds, 0.0);
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(std::string(verb) + " " + std::to_string(code));
  });
  EXPECT_TRUE(c->Get(kConfigMaps, "ns", "a").ok());
  EXPECT_TRUE(c->List(kConfigMaps, "ns").ok());
  EXPECT_FALSE(c->Create(kConfigMaps, "ns", Json{{"metadata", {{"name", "a"}}}}).ok());
  EXPECT_FALSE(c->Delete(kConfigMaps, "ns", "a").ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"get 200", "list 200", "create 409", "delete 404"}));

  c->SetRequestObserver({});
  EXPECT_TRUE(c->Get(kConfigMaps, "ns", "a").ok());
  EXPECT_EQ(seen.size(), 4u);
}

TEST(HttpClientStandaloneTest, ObserverSeesTransportFailureAsCodeZero) {
  Config c;
  c.server = "http://127.0.0.1:1";  // nothing listens on port 1
  c.connect_timeout = 1s;
  auto client = HttpClient::Create(c);
  ASSERT_TRUE(client.ok());
  std::vector<std::pair<std::string, int>> seen;
  (*client)->SetRequestObserver(
      [&](std::string_view verb, int code, double) { seen.emplace_back(std::string(verb), code); });
  EXPECT_FALSE((*client)->Patch(kPods, "ns", "p", PatchType::kMerge, Json::object()).ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::pair<std::string, int>("patch", 0)));
}

TEST(HttpClientStandaloneTest, UnreachableServerIsUnavailable) {
  Config c;
  c.server = "http://127.0.0.1:1";  // nothing listens on port 1
  c.connect_timeout = 1s;
  auto client = HttpClient::Create(c);
  ASSERT_TRUE(client.ok());
  Status s = (*client)->Get(kPods, "ns", "p").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_TRUE(IsTransient(s));
}

TEST(HttpClientStandaloneTest, ConfigErrors) {
  Config c;
  c.server = "https://127.0.0.1:6443";
  EXPECT_TRUE(HttpClient::Create(c).ok());  // no CA: the system trust store
  c.ca_data = "not a pem";
  auto bad_ca = HttpClient::Create(c);
  EXPECT_EQ(bad_ca.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_ca.status().message().find("no PEM certificate"), std::string::npos);
  c.ca_data.clear();
  c.ca_file = "/nonexistent/ca.crt";
  EXPECT_EQ(HttpClient::Create(c).status().code(), StatusCode::kNotFound);
  c.ca_file.clear();
  c.insecure_skip_tls_verify = true;
  EXPECT_TRUE(HttpClient::Create(c).ok());
  c.server = "ftp://x";
  EXPECT_FALSE(HttpClient::Create(c).ok());
  c.server = "https://h:99999";
  EXPECT_FALSE(HttpClient::Create(c).ok());
  c.server = "https://h:1";
  c.token_file = "/nonexistent/token";
  EXPECT_EQ(HttpClient::Create(c).status().code(), StatusCode::kUnauthenticated);
}

const std::string kWatchBody =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"11"}}})"
    "\n"
    R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"13"}}})"
    "\n";

TEST_F(HttpClientTest, WatchStreamsEventsAcrossOddChunks) {
  std::string target;
  server_.Get(
      "/api/v1/namespaces/ns/pods", [&](const httplib::Request& req, httplib::Response& res) {
        target = req.target;
        res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
          // 7-byte chunks: events split mid-token.
          for (size_t i = 0; i < kWatchBody.size(); i += 7) {
            std::string piece = kWatchBody.substr(i, 7);
            sink.write(piece.data(), piece.size());
          }
          sink.done();
          return true;
        });
      });
  StartServer();
  auto c = Client();
  std::vector<std::string> got;
  WatchOptions o;
  o.resource_version = "10";
  o.timeout_seconds = 30;
  Status s = c->Watch(kPods, "ns", o, [&](WatchEvent&& ev) {
    got.push_back(std::string(WatchEventTypeName(ev.type)) + "@" + ResourceVersion(ev.object));
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, (std::vector<std::string>{"ADDED@11", "BOOKMARK@12", "MODIFIED@13"}));
  EXPECT_EQ(target,
            "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=10&allowWatchBookmarks=true"
            "&timeoutSeconds=30");
}

TEST_F(HttpClientTest, WatchErrorEventIsGoneAndHandlerCanStop) {
  server_.Get("/api/v1/configmaps", [&](const httplib::Request& req, httplib::Response& res) {
    bool expired = req.get_param_value("resourceVersion") == "1";
    res.set_chunked_content_provider("application/json", [expired](size_t,
                                                                   httplib::DataSink& sink) {
      std::string body =
          expired ? R"j({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",)j"
                    R"j("message":"too old resource version: 1 (99)"}})j"
                  : kWatchBody;
      sink.write(body.data(), body.size());
      sink.done();
      return true;
    });
  });
  server_.Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
    res.status = 410;
    res.set_content(R"({"kind":"Status","code":410,"reason":"Gone","message":"gone"})",
                    "application/json");
  });
  StartServer();
  auto c = Client();
  WatchOptions o;
  o.resource_version = "1";
  Status gone = c->Watch(kConfigMaps, "", o, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(IsGone(gone)) << gone;
  EXPECT_NE(gone.message().find("too old"), std::string::npos);
  Status http_gone = c->Watch(kNodes, "", o, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(IsGone(http_gone)) << http_gone;
  o.resource_version = "5";
  int n = 0;
  Status stopped = c->Watch(kConfigMaps, "", o, [&](WatchEvent&&) { return ++n < 2; });
  EXPECT_TRUE(stopped.ok()) << stopped;
  EXPECT_EQ(n, 2);
}

TEST_F(HttpClientTest, WatchCancelledByStopToken) {
  // Shared, not a local captured by reference: the server may call the provider again after the
  // test body returned (it ran forever on a dangling flag once: the suite hung in TearDown).
  auto release = std::make_shared<std::atomic<bool>>(false);
  server_.Get("/api/v1/pods", [release](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "application/json", [release](size_t, httplib::DataSink& sink) {
          std::string ev =
              R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}})";
          sink.write(ev.data(), ev.size());
          // Then stay silent, like an idle watch.
          while (!*release) std::this_thread::sleep_for(5ms);
          sink.done();
          return true;
        });
  });
  StartServer();
  auto c = Client();
  std::stop_source stop;
  std::atomic<int> events{0};
  Status s;
  std::thread t([&] {
    s = c->Watch(
        kPods, "", WatchOptions{.timeout_seconds = 60},
        [&](WatchEvent&&) {
          ++events;
          return true;
        },
        stop.get_token());
  });
  while (events == 0) std::this_thread::sleep_for(1ms);
  auto begin = std::chrono::steady_clock::now();
  stop.request_stop();
  t.join();
  *release = true;
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
}

TEST_F(HttpClientTest, TokenFileReReadAfter401) {
  char path[] = "/tmp/nvl72-token-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto write_token = [&](const std::string& t) {
    FILE* f = fopen(path, "w");
    fputs(t.c_str(), f);
    fclose(f);
  };
  write_token("old\n");
  server_.Get(
      "/api/v1/namespaces/ns/pods/p", [](const httplib::Request& req, httplib::Response& res) {
        if (req.get_header_value("Authorization") != "Bearer new") {
          res.status = 401;
          res.set_content(
              R"({"kind":"Status","code":401,"reason":"Unauthorized","message":"Unauthorized"})",
              "application/json");
          return;
        }
        res.set_content(R"({"metadata":{"name":"p"}})", "application/json");
      });
  StartServer();
  Config cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port_);
  cfg.token_file = path;
  auto c = HttpClient::Create(cfg);
  ASSERT_TRUE(c.ok());
  Status s = (*c)->Get(kPods, "ns", "p").status();
  EXPECT_TRUE(IsUnauthorized(s)) << s;
  EXPECT_EQ(s.message().find("old"), std::string::npos);  // never echo the token
  write_token("new\n");                                   // rotated
  EXPECT_TRUE((*c)->Get(kPods, "ns", "p").ok());
  unlink(path);
}

// An exec plugin's token: sent as the bearer; after a 401 the plugin runs again and the request
// goes once more; a watch refused with 401 makes the next one carry a new token.
TEST_F(HttpClientTest, ExecPluginRunsAgainAfter401) {
  char dir[] = "/tmp/nvl72-exec-http-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string plugin = std::string(dir) + "/plugin";
  FILE* f = fopen(plugin.c_str(), "w");
  fputs(R"(#!/bin/sh
n=$(($(cat "$0.runs" 2>/dev/null || echo 0) + 1)); echo $n > "$0.runs"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t%s"}}' $n
)",
        f);
  fclose(f);
  chmod(plugin.c_str(), 0755);
  std::atomic<int> accept{2};  // the token number the server takes
  auto handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer t" + std::to_string(accept.load())) {
      res.status = 401;
      res.set_content(R"({"kind":"Status","code":401,"reason":"Unauthorized"})",
                      "application/json");
      return;
    }
    res.set_content(req.has_param("watch") ? kWatchBody : R"({"metadata":{"name":"p"}})",
                    "application/json");
  };
  server_.Get(".*", handler);
  StartServer();
  Config cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port_);
  cfg.exec = ExecConfig{};
  cfg.exec->api_version = "client.authentication.k8s.io/v1";
  cfg.exec->command = plugin;
  cfg.exec->interactive_mode = "Never";
  cfg.exec->user = "u";
  auto c = HttpClient::Create(cfg);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Get(kPods, "ns", "p").ok());  // t1 refused, t2 taken
  EXPECT_TRUE((*c)->Get(kPods, "ns", "p").ok());  // t2 cached
  accept = 3;                                     // revoked
  auto handler_ok = [](const WatchEvent&) { return true; };
  Status w = (*c)->Watch(kPods, "ns", {}, handler_ok);
  EXPECT_TRUE(IsUnauthorized(w)) << w;
  EXPECT_TRUE((*c)->Watch(kPods, "ns", {}, handler_ok).ok());  // with t3
  std::ifstream runs(plugin + ".runs");
  int n = 0;
  runs >> n;
  EXPECT_EQ(n, 3);
  std::filesystem::remove_all(dir);
}

// A kept-alive connection that the server closes after a reply, sending a stray byte first (as a
// TLS server's close_notify does, so the socket still looks alive): the next request must not
// fail. The soak saw the extender's binds fail exactly so (a transport Read/Write error).
TEST(HttpClientStaleConnectionTest, APooledConnectionTheServerClosedIsRetriedOnANewOne) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(lfd, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::atomic<int> connections{0};
  std::thread server([&] {
    for (int i = 0; i < 2; ++i) {  // each connection answers one request
      const int c = accept(lfd, nullptr, nullptr);
      if (c < 0) return;
      ++connections;
      timeval tv{5, 0};
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string request;
      char buf[1024];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      const std::string reply =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
      EXPECT_EQ(write(c, reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
      std::this_thread::sleep_for(100ms);
      EXPECT_EQ(write(c, "\x15", 1), 1);  // the stray byte, then the close
      close(c);
    }
  });
  Config config;
  config.server = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  config.token = "t";
  config.request_timeout = 5s;
  auto client = HttpClient::Create(config);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Request("GET", "/api/v1/namespaces/a", nullptr, "").ok());
  std::this_thread::sleep_for(300ms);  // the server has sent its stray byte and closed
  auto second = (*client)->Request("GET", "/api/v1/namespaces/b", nullptr, "");
  EXPECT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(connections.load(), 2);
  shutdown(lfd, SHUT_RDWR);
  close(lfd);
  server.join();
}

}  // namespace
}  // namespace nvl72::kube
