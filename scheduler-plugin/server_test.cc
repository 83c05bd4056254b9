// HTTP-level tests: the real server on 127.0.0.1 port 0, httplib clients, a fixed view.
#include "scheduler-plugin/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "common/eventually_for_test.h"
#include "kube/clock.h"
#include "kube/fake_client.h"
#include "scheduler-plugin/cluster_cache.h"
#include "scheduler-plugin/fixtures_for_test.h"

namespace nvl72::extender {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::MakePod;
using testing::MakeRacks;
using testing::Ptrs;
using testutil::Eventually;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_ = MakeRacks(2, 4);
    pods_ = {MakePod("ml", "g-0", 4, "r000-n00", "g", 0, "r000-n00"),
             MakePod("ml", "g-1", 4, "r000-n01", "g", 1, "r000-n01"),
             MakePod("ml", "half", 2, "r001-n00")};
    jobs_ = {MakeJob("ml", "g", 4, {"r000-n00", "r000-n01"}, "rack-0")};
    ViewOptions vo;
    vo.spares_per_domain = 1;
    views_ =
        std::make_unique<StaticViewSource>(BuildView(Ptrs(nodes_), Ptrs(pods_), Ptrs(jobs_), vo));
    ExtenderOptions eo;
    eo.spares_per_domain = 1;
    auto e = Extender::Create(eo);
    ASSERT_TRUE(e.ok());
    ext_ = std::move(*e);
    service_ = std::make_unique<Service>(ext_.get(), views_.get(), &client_, &metrics_);
  }

  void StartServer(ServerOptions o = {}) {
    o.host = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<Server>(o, service_.get(), &metrics_);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
  }

  std::string FilterBody(const Json& pod, const std::vector<std::string>& names) {
    return Json{{"Pod", pod}, {"NodeNames", names}}.dump();
  }

  std::vector<Json> nodes_, pods_, jobs_;
  std::unique_ptr<StaticViewSource> views_;
  std::unique_ptr<Extender> ext_;
  kube::FakeClient client_;
  Metrics metrics_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, FilterAndPrioritizeOverOneKeepAliveConnection) {
  StartServer();
  httplib::Client cli("127.0.0.1", server_->port());
  cli.set_keep_alive(true);
  const std::vector<std::string> names = {"r000-n00", "r000-n02", "r001-n00", "r001-n03"};
  for (int round = 0; round < 3; ++round) {
    auto res = cli.Post("/filter", FilterBody(MakePod("ml", "p", 1), names), "application/json");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    const Json j = Json::parse(res->body);
    EXPECT_EQ(j.at("NodeNames"), Json({"r000-n02", "r001-n00"}));
    EXPECT_EQ(j.at("FailedNodes").size(), 2u);  // reserved r000-n00, spare r001-n03
    EXPECT_TRUE(j.at("Nodes").is_null());
    EXPECT_EQ(j.at("Error"), "");

    auto pr = cli.Post("/prioritize", FilterBody(MakePod("ml", "p", 1), {"r000-n02", "r001-n00"}),
                       "application/json");
    ASSERT_TRUE(pr);
    EXPECT_EQ(pr->status, 200);
    const Json s = Json::parse(pr->body);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].at("Host"), "r000-n02");
    EXPECT_EQ(s[1].at("Host"), "r001-n00");
    EXPECT_EQ(s[1].at("Score"), 10);  // the partly used node
  }
  const std::string m = metrics_.Serialize();
  EXPECT_NE(m.find("nvl72_extender_requests_total{code=\"200\",verb=\"filter\"} 3"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("nvl72_extender_request_duration_seconds_count{verb=\"prioritize\"} 3"),
            std::string::npos);
}

// kube-scheduler's prioritize request carries the nodes the filter passed, in the filter's order:
// that array is remembered by the filter, so it is neither scanned nor resolved again, and the
// reply is the same as a fresh parse gives.
TEST_F(ServerTest, PrioritizeOfTheFilteredNodesReusesTheFiltersWork) {
  const std::vector<std::string> names = {"r001-n03", "r000-n02", "r000-n00", "r001-n00",
                                          "r001-n01"};
  const Json pod = MakePod("ml", "p", 1);
  const Response f = service_->Filter(FilterBody(pod, names));
  ASSERT_EQ(f.code, 200);
  const Json passed = Json::parse(f.body).at("NodeNames");
  ASSERT_EQ(passed, Json({"r000-n02", "r001-n00", "r001-n01"}));  // filter order kept
  const std::string prioritize = Json{{"Pod", pod}, {"NodeNames", passed}}.dump();
  const int64_t hits = service_->NodeNamesCacheHits();
  const Response p = service_->Prioritize(prioritize);
  EXPECT_EQ(service_->NodeNamesCacheHits(), hits + 1);
  Service fresh(ext_.get(), views_.get(), &client_, nullptr);  // its own, empty cache
  const Response q = fresh.Prioritize(prioritize);
  EXPECT_EQ(fresh.NodeNamesCacheHits(), 0);
  ASSERT_EQ(p.code, 200);
  EXPECT_EQ(p.body, q.body);
  EXPECT_EQ(Json::parse(p.body).size(), 3u);
  // The same filter again: nothing new to remember, still a hit for the prioritize.
  ASSERT_EQ(service_->Filter(FilterBody(pod, names)).body, f.body);
  EXPECT_EQ(service_->Prioritize(prioritize).body, p.body);
  const std::string m = metrics_.Serialize();
  EXPECT_NE(m.find("nvl72_extender_node_names_total{cache=\"hit\",verb=\"prioritize\"} 2"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("nvl72_extender_node_names_total{cache=\"miss\",verb=\"filter\"} 1"),
            std::string::npos);
  EXPECT_NE(m.find("nvl72_extender_node_names_total{cache=\"hit\",verb=\"filter\"} 1"),
            std::string::npos);
}

TEST_F(ServerTest, FullNodesModeReturnsNodeObjects) {
  StartServer();
  httplib::Client cli("127.0.0.1", server_->port());
  Json req = {
      {"Pod", MakePod("ml", "p", 1)},
      {"Nodes", {{"items", {MakeNode("r000-n00", "rack-0"), MakeNode("r000-n02", "rack-0")}}}}};
  auto res = cli.Post("/filter", req.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const Json j = Json::parse(res->body);
  ASSERT_EQ(j.at("Nodes").at("items").size(), 1u);
  EXPECT_EQ(j["Nodes"]["items"][0]["metadata"]["name"], "r000-n02");
  EXPECT_TRUE(j.at("NodeNames").is_null());
  EXPECT_EQ(j.at("FailedNodes").size(), 1u);
}

TEST_F(ServerTest, MalformedRequestsGet400WithJsonError) {
  StartServer();
  httplib::Client cli("127.0.0.1", server_->port());
  for (const char* verb : {"/filter", "/prioritize", "/bind", "/preempt"}) {
    for (const char* body : {"", "{", "[]", "{\"Pod\": 3}", "\xff\xfe"}) {
      auto res = cli.Post(verb, std::string(body), "application/json");
      ASSERT_TRUE(res) << verb;
      EXPECT_EQ(res->status, 400) << verb << " " << body;
      const Json j = Json::parse(res->body, nullptr, false);
      ASSERT_TRUE(j.is_object()) << res->body;
      EXPECT_FALSE(j.at("Error").get<std::string>().empty());
    }
  }
  auto res = cli.Post("/nonsense", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(Json::parse(res->body).contains("Error"));
  // Still serving.
  EXPECT_EQ(cli.Get("/healthz")->status, 200);
  EXPECT_NE(metrics_.Serialize().find("code=\"400\",verb=\"filter\""), std::string::npos);
}

TEST_F(ServerTest, OversizedBodyGets413) {
  ServerOptions o;
  o.max_body_bytes = 4096;
  StartServer(o);
  httplib::Client cli("127.0.0.1", server_->port());
  std::vector<std::string> names(2000, "some-node-name");
  auto res = cli.Post("/filter", FilterBody(MakePod("ml", "p", 1), names), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_TRUE(Json::parse(res->body).contains("Error"));
}

// httplib 0.11 checks the payload limit only against Content-Length: a chunked body used to be read
// whole into memory (200 MB -> 281 MB peak RSS in the fault test) and then parsed.
TEST_F(ServerTest, ChunkedBodyOverTheLimitGets413) {
  ServerOptions o;
  o.max_body_bytes = 4096;
  StartServer(o);
  httplib::Client cli("127.0.0.1", server_->port());
  size_t sent = 0;
  auto res = cli.Post(
      "/filter",
      [&](size_t, httplib::DataSink& sink) {
        const std::string piece(8192, ' ');
        if (sent < (1u << 20) && sink.write(piece.data(), piece.size())) {
          sent += piece.size();
        } else {
          sink.done();
        }
        return true;
      },
      "application/json");
  // The server answers 413 as soon as the limit is passed and stops reading: the client, still
  // writing, either reads the 413 or sees the connection fail. Either way the handler said 413.
  if (res) {
    EXPECT_EQ(res->status, 413);
    EXPECT_TRUE(Json::parse(res->body).contains("Error"));
  }
  EXPECT_NE(metrics_.Serialize().find("code=\"413\",verb=\"filter\""), std::string::npos);
  // A small chunked body is still served.
  cli.stop();
  bool done = false;
  auto ok = cli.Post(
      "/filter",
      [&](size_t, httplib::DataSink& sink) {
        if (!done) {
          const std::string body = FilterBody(MakePod("ml", "p", 1), {"r000-n02"});
          sink.write(body.data(), body.size());
          done = true;
        } else {
          sink.done();
        }
        return true;
      },
      "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// A client that sends the headers and part of the body, then stalls: 408 with a JSON body after the
// read timeout; other clients are served meanwhile.
TEST_F(ServerTest, StalledBodyGets408AfterTheReadTimeout) {
  ServerOptions o;
  o.read_timeout = std::chrono::milliseconds(300);
  StartServer(o);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string head =
      "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"Pod\":";
  ASSERT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  httplib::Client other("127.0.0.1", server_->port());
  EXPECT_EQ(other.Get("/healthz")->status, 200);
  timeval tv{10, 0};  // a deadline for the test, not a timing assertion
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string reply;
  char buf[512];
  while (reply.find('}') == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 408", 0), 0u) << reply;
  EXPECT_NE(reply.find("{\"Error\":"), std::string::npos) << reply;
}

TEST_F(ServerTest, HealthReadinessAndMetrics) {
  StartServer();
  httplib::Client cli("127.0.0.1", server_->port());
  EXPECT_EQ(cli.Get("/healthz")->status, 200);
  EXPECT_EQ(cli.Get("/readyz")->status, 200);
  auto unsynced = std::make_shared<ClusterView>();
  unsynced->synced = false;
  views_->SetView(unsynced);
  EXPECT_EQ(cli.Get("/readyz")->status, 503);
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("# TYPE nvl72_extender_filter_nodes_total counter"), std::string::npos);
}

TEST_F(ServerTest, BindOverHttpPostsBindingAndRefusesOffPlan) {
  std::mutex log_mu;
  std::vector<std::pair<std::string, Service::LogKeys>> logged;
  service_->SetLog([&](int, const std::string& msg, const Service::LogKeys& keys) {
    std::lock_guard<std::mutex> l(log_mu);
    logged.emplace_back(msg, keys);
  });
  StartServer();
  ASSERT_TRUE(
      client_.Create(kube::kPods, "ml", MakePod("ml", "h-0", 4, "", "g", 0, "r000-n00")).ok());
  ASSERT_TRUE(client_.Create(kube::kPods, "ml", MakePod("ml", "one", 1)).ok());
  httplib::Client cli("127.0.0.1", server_->port());
  auto refused =
      cli.Post("/bind", R"({"PodName":"h-0","PodNamespace":"ml","PodUID":"","Node":"r001-n01"})",
               "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 200);
  EXPECT_NE(
      Json::parse(refused->body).at("Error").get<std::string>().find("planned for node r000-n00"),
      std::string::npos);
  auto ok =
      cli.Post("/bind", R"({"PodName":"one","PodNamespace":"ml","PodUID":"","Node":"r001-n01"})",
               "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(Json::parse(ok->body), Json({{"Error", ""}}));
  EXPECT_EQ((*client_.Get(kube::kPods, "ml", "one"))["spec"]["nodeName"], "r001-n01");
  EXPECT_EQ(views_->assumed().at("ml/one"), "r001-n01");
  EXPECT_NE(metrics_.Serialize().find("nvl72_extender_bind_refusals_total 1"), std::string::npos);
  // The refusal is logged once, with the pod, its job and the node it was refused.
  std::lock_guard<std::mutex> l(log_mu);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].first.find("refusing"), std::string::npos);
  EXPECT_EQ(logged[0].second,
            (Service::LogKeys{{"pod", "ml/h-0"}, {"node", "r001-n01"}, {"job", "ml/g"}}));
}

TEST_F(ServerTest, PrefixedVerbsAndPreempt) {
  ServerOptions o;
  o.prefix = "/nvl72";
  StartServer(o);
  httplib::Client cli("127.0.0.1", server_->port());
  EXPECT_EQ(cli.Post("/filter", FilterBody(MakePod("ml", "p", 1), {}), "application/json")->status,
            404);
  EXPECT_EQ(
      cli.Post("/nvl72/filter", FilterBody(MakePod("ml", "p", 1), {}), "application/json")->status,
      200);
  Json req = {{"Pod", MakePod("ml", "urgent", 4)},
              {"NodeNameToMetaVictims",
               {{"r000-n01", {{"Pods", {{{"UID", "uid-ml-g-1"}}}}, {"NumPDBViolations", 0}}},
                {"r001-n00", {{"Pods", {{{"UID", "uid-ml-half"}}}}, {"NumPDBViolations", 0}}}}}};
  auto res = cli.Post("/nvl72/preempt", req.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const Json j = Json::parse(res->body);
  EXPECT_EQ(j.at("NodeNameToMetaVictims").size(), 1u);
  EXPECT_TRUE(j["NodeNameToMetaVictims"].contains("r001-n00"));
}

TEST_F(ServerTest, ConcurrentClients) {
  ServerOptions o;
  o.workers = 4;
  StartServer(o);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      httplib::Client cli("127.0.0.1", server_->port());
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);  // else Nagle + delayed ACK add ~40 ms to every request
      cli.set_connection_timeout(std::chrono::seconds(5));
      cli.set_read_timeout(std::chrono::seconds(5));
      cli.set_write_timeout(std::chrono::seconds(5));
      for (int i = 0; i < 25; ++i) {
        auto res = cli.Post("/filter", FilterBody(MakePod("ml", "p", 1), {"r000-n02"}),
                            "application/json");
        if (res && res->status == 200) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 100);
  server_->Stop();
  server_->Stop();  // idempotent
}

// ---- TLS ----

struct Pem {
  std::string cert, key;
};

// A certificate for `cn` (with SAN IP:127.0.0.1) signed by `issuer` (self-signed CA if null).
Pem MakeCert(const std::string& cn, const Pem* issuer, bool ca) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(x), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* issuer_cert = nullptr;
  EVP_PKEY* issuer_key = key;
  if (issuer != nullptr) {
    BIO* b = BIO_new_mem_buf(issuer->cert.data(), static_cast<int>(issuer->cert.size()));
    issuer_cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    b = BIO_new_mem_buf(issuer->key.data(), static_cast<int>(issuer->key.size()));
    issuer_key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
  }
  X509_set_issuer_name(x, X509_get_subject_name(issuer_cert != nullptr ? issuer_cert : x));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer_cert != nullptr ? issuer_cert : x, x, nullptr, nullptr, 0);
  auto add = [&](int nid, const char* value) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
  };
  add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (!ca) add(NID_subject_alt_name, "IP:127.0.0.1");
  X509_sign(x, issuer_key, EVP_sha256());
  auto pem = [](auto write) {
    BIO* b = BIO_new(BIO_s_mem());
    write(b);
    char* data = nullptr;
    long n = BIO_get_mem_data(b, &data);
    std::string s(data, static_cast<size_t>(n));
    BIO_free(b);
    return s;
  };
  Pem out;
  out.cert = pem([&](BIO* b) { PEM_write_bio_X509(b, x); });
  out.key =
      pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
  if (issuer_cert != nullptr) {
    X509_free(issuer_cert);
    EVP_PKEY_free(issuer_key);
  }
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

std::string WriteTemp(const std::string& dir, const std::string& name, const std::string& data) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << data;
  return path;
}

TEST_F(ServerTest, HttpsWithClientCertificates) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("nvl72-extender-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Pem ca = MakeCert("test-ca", nullptr, true);
  const Pem server = MakeCert("127.0.0.1", &ca, false);
  const Pem client = MakeCert("kube-scheduler", &ca, false);
  ServerOptions o;
  o.tls_cert = WriteTemp(dir, "server.crt", server.cert);
  o.tls_key = WriteTemp(dir, "server.key", server.key);
  o.client_ca = WriteTemp(dir, "ca.crt", ca.cert);
  const std::string client_cert = WriteTemp(dir, "client.crt", client.cert);
  const std::string client_key = WriteTemp(dir, "client.key", client.key);
  StartServer(o);
  EXPECT_TRUE(server_->tls());

  httplib::SSLClient with_cert("127.0.0.1", server_->port(), client_cert, client_key);
  with_cert.set_ca_cert_path(o.client_ca.c_str());
  with_cert.enable_server_certificate_verification(true);
  auto res = with_cert.Post("/filter", FilterBody(MakePod("ml", "p", 1), {"r000-n02"}),
                            "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);

  httplib::SSLClient without_cert("127.0.0.1", server_->port());
  without_cert.set_ca_cert_path(o.client_ca.c_str());
  without_cert.enable_server_certificate_verification(true);
  EXPECT_FALSE(without_cert.Get("/healthz"));

  httplib::Client plain("127.0.0.1", server_->port());
  auto p = plain.Get("/healthz");
  EXPECT_TRUE(!p || p->status != 200);
  server_->Stop();
  std::filesystem::remove_all(dir);
}

TEST_F(ServerTest, BadTlsFilesFailToStart) {
  ServerOptions o;
  o.port = 0;
  o.tls_cert = "/nonexistent/cert.pem";
  o.tls_key = "/nonexistent/key.pem";
  Server s(o, service_.get(), &metrics_);
  EXPECT_FALSE(s.Start().ok());
}

// ---- ClusterCache over a FakeClient ----

TEST(ClusterCacheTest, SyncsBuildsViewsAndAssumesBindings) {
  kube::FakeClient client;
  for (const Json& n : MakeRacks(1, 4)) ASSERT_TRUE(client.Create(kube::kNodes, "", n).ok());
  ASSERT_TRUE(client.Create(kube::kPods, "ml", MakePod("ml", "a", 2, "r000-n00")).ok());
  ASSERT_TRUE(client.Create(kube::kPods, "ml", MakePod("ml", "b", 4)).ok());
  ClusterCacheOptions o;
  o.view.spares_per_domain = 1;
  o.min_rebuild_interval = std::chrono::milliseconds(1);
  ClusterCache cache(&client, kube::RealClock(), o);
  EXPECT_FALSE(cache.Ready());
  cache.Start();
  ASSERT_TRUE(Eventually([&] { return cache.Ready(); }, std::chrono::seconds(10)));
  auto used = [&](const std::string& node) {
    auto v = cache.View();
    return v->state.snapshot().nodes[static_cast<size_t>(v->FindNode(node))].gpu_used;
  };
  EXPECT_EQ(used("r000-n00"), 2);
  ASSERT_NE(cache.GetPod("ml", "b"), nullptr);

  // Assumed: counted before the informer sees the binding.
  cache.Assume("ml/b", "r000-n01");
  cache.RebuildNow();
  EXPECT_EQ(used("r000-n01"), 4);

  // A new node shows up in a later view.
  ASSERT_TRUE(client.Create(kube::kNodes, "", MakeNode("r000-n09", "rack-0")).ok());
  EXPECT_TRUE(Eventually([&] { return cache.View()->FindNode("r000-n09") != placement::kNoNode; },
                         std::chrono::seconds(10)));

  // What /metrics reports of the informers: one list each so far, the objects they hold.
  std::map<std::string, ClusterCache::InformerReport> reports;
  for (const auto& r : cache.Informers()) reports[r.resource] = r;
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports["nodes"].objects, 5u);
  EXPECT_EQ(reports["pods"].objects, 2u);
  EXPECT_EQ(reports["nvl72jobs"].objects, 0u);
  EXPECT_EQ(reports["nodes"].stats.lists, 1);
  cache.Stop();
}

// The view after pods change: a rebuild reuses what it read of unchanged pods (ClusterCache keeps
// their facts by object), so each kind of change must still reach the next view.
TEST(ClusterCacheTest, EveryPodChangeReachesTheNextView) {
  kube::FakeClient client;
  for (const Json& n : MakeRacks(1, 4)) ASSERT_TRUE(client.Create(kube::kNodes, "", n).ok());
  ASSERT_TRUE(client.Create(kube::kPods, "ml", MakePod("ml", "a", 2, "r000-n00")).ok());
  ASSERT_TRUE(client.Create(kube::kPods, "ml", MakePod("ml", "b", 1)).ok());
  ClusterCacheOptions o;
  o.view.spares_per_domain = 0;
  o.min_rebuild_interval = std::chrono::milliseconds(1);
  ClusterCache cache(&client, kube::RealClock(), o);
  cache.Start();
  auto used = [&] {
    auto v = cache.View();
    std::vector<int> out;
    for (const auto& n : v->state.snapshot().nodes) out.push_back(n.gpu_used);
    return out;
  };
  // Waits until the published view shows `want` GPUs used on r000-n00..n03.
  auto settles_at = [&](const std::vector<int>& want) {
    if (Eventually([&] { return cache.Ready() && used() == want; }, std::chrono::seconds(10))) {
      return true;
    }
    ADD_FAILURE() << "view never showed the expected usage; last: "
                  << ::testing::PrintToString(used());
    return false;
  };
  auto cached = [&](const std::string& name) {
    return Eventually([&] { return cache.GetPod("ml", name) != nullptr; },
                      std::chrono::seconds(10));
  };
  ASSERT_TRUE(settles_at({2, 0, 0, 0}));

  // Bound by somebody else: the new object's node counts.
  Json b = MakePod("ml", "b", 1, "r000-n02");
  ASSERT_TRUE(client.Update(kube::kPods, "ml", b).ok());
  ASSERT_TRUE(settles_at({2, 0, 1, 0}));
  // Terminated: no longer counts.
  Json a = MakePod("ml", "a", 2, "r000-n00");
  a["status"]["phase"] = "Succeeded";
  ASSERT_TRUE(client.UpdateStatus(kube::kPods, "ml", a).ok());
  ASSERT_TRUE(settles_at({0, 0, 1, 0}));
  // A new pod, then its deletion.
  ASSERT_TRUE(client.Create(kube::kPods, "ml", MakePod("ml", "c", 4, "r000-n03")).ok());
  ASSERT_TRUE(settles_at({0, 0, 1, 4}));
  ASSERT_TRUE(client.Delete(kube::kPods, "ml", "c").ok());
  ASSERT_TRUE(settles_at({0, 0, 1, 0}));

  // Assumed, then bound elsewhere by the informer's view of it: counted once, where it is bound.
  ASSERT_TRUE(client.Create(kube::kPods, "ml", MakePod("ml", "d", 3)).ok());
  ASSERT_TRUE(cached("d"));  // an assumed pod the cache does not hold is forgotten
  cache.Assume("ml/d", "r000-n01");
  ASSERT_TRUE(settles_at({0, 3, 1, 0}));
  ASSERT_TRUE(client.Update(kube::kPods, "ml", MakePod("ml", "d", 3, "r000-n00")).ok());
  ASSERT_TRUE(settles_at({3, 0, 1, 0}));
  // Assumed, then deleted: forgotten.
  ASSERT_TRUE(client.Create(kube::kPods, "ml", MakePod("ml", "e", 2)).ok());
  ASSERT_TRUE(cached("e"));
  cache.Assume("ml/e", "r000-n03");
  ASSERT_TRUE(settles_at({3, 0, 1, 2}));
  ASSERT_TRUE(client.Delete(kube::kPods, "ml", "e").ok());
  ASSERT_TRUE(settles_at({3, 0, 1, 0}));
  cache.Stop();
}

}  // namespace
}  // namespace nvl72::extender
