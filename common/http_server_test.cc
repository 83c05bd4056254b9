#include "common/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace nvl72 {
namespace {

// A raw TCP connection to 127.0.0.1:port (to send what no well-behaved client would).
class RawConn {
 public:
  explicit RawConn(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConn() { close(fd_); }
  bool connected() const { return connected_; }
  bool Send(const std::string& s) {
    return send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Everything the server sends until it closes the connection or `timeout` passes.
  // `*closed` tells which.
  std::string ReadAll(std::chrono::milliseconds timeout, bool* closed) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    *closed = false;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        *closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_;
  bool connected_ = false;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions o) {
    server_ = std::make_unique<HttpServer>(std::move(o));
    ASSERT_TRUE(server_->Init().ok());
    server_->http().Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    server_->http().Post("/upload", [](const httplib::Request& req, httplib::Response& res,
                                       const httplib::ContentReader& read) {
      std::string body;
      const int code = ReadBodyLimited(req, read, 1024, &body);
      res.status = code;
      res.set_content(code == 200 ? std::to_string(body.size()) : std::string("refused"),
                      "text/plain");
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, BodiesOnlyWhereARouteReadsThem) {
  HttpServerOptions o;
  o.body_paths = "/upload";
  o.error_body = [](int status, const std::string& what) {
    return std::make_pair("{\"Error\":\"" + what + "\",\"status\":" + std::to_string(status) + "}",
                          std::string("application/json"));
  };
  Start(o);
  // A chunked body to a path without a body route: 413 on the headers alone, connection closed
  // (the body is never read: 1 GiB announced, a few bytes sent).
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(
      "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n40000000\r\nabc"));
  bool closed = false;
  const std::string reply = c.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_NE(reply.find("HTTP/1.1 413"), std::string::npos) << reply;
  EXPECT_NE(reply.find("no request body accepted on /healthz"), std::string::npos) << reply;
  EXPECT_TRUE(closed) << "the connection must not be reused with an unread body in it";

  httplib::Client cli("127.0.0.1", server_->port());
  auto post = cli.Post("/nowhere", std::string(100, 'x'), "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 404);
  EXPECT_EQ(post->body, "{\"Error\":\"no such path /nowhere\",\"status\":404}");
  // The body route still takes bodies, bounded by its own limit.
  auto up = cli.Post("/upload", std::string(100, 'x'), "text/plain");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->status, 200);
  EXPECT_EQ(up->body, "100");
  auto big = cli.Post("/upload", std::string(5000, 'x'), "text/plain");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  // httplib's own errors get the error body; bodiless requests are served as before.
  auto missing = cli.Get("/missing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, "{\"Error\":\"no such path /missing\",\"status\":404}");
  auto ok = cli.Get("/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->body, "ok\n");
}

// Go's HTTP client (kube-scheduler calling the extender, Prometheus scraping) sends
// "Accept-Encoding: gzip" on every request; httplib would then gzip every JSON reply, costing CPU
// on both sides of a local connection.
TEST_F(HttpServerTest, RepliesAreNotCompressedForAClientThatAcceptsGzip) {
  Start(HttpServerOptions{});
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, deflate, br\r\n"
             "Connection: close\r\n\r\n"));
  bool closed = false;
  const std::string reply = c.ReadAll(std::chrono::seconds(5), &closed);
  ASSERT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_EQ(reply.find("Content-Encoding"), std::string::npos) << reply;
  EXPECT_EQ(reply.substr(reply.size() - 5), "\r\nok\n") << reply;
}

// A client that asks first ("Expect: 100-continue", as curl does for bodies over 1 MiB) is refused
// on the headers when the announced body is too large: 413, never "100 Continue" (which would
// invite a body that is then refused, the connection closed under the client's upload).
TEST_F(HttpServerTest, AnExpectedBodyOverTheLimitIsRefusedBeforeContinue) {
  HttpServerOptions o;
  o.body_paths = "/upload";
  o.max_body_bytes = 4096;
  Start(o);
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n"
             "Expect: 100-continue\r\n\r\n"));
  bool closed = false;
  const std::string reply = c.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  EXPECT_EQ(reply.find("100 Continue"), std::string::npos) << reply;
  EXPECT_TRUE(closed);

  // Also a body to a path without a body route, and a length past 64 bits.
  RawConn g(server_->port());
  ASSERT_TRUE(g.Send(
      "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"));
  const std::string get_reply = g.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_EQ(get_reply.rfind("HTTP/1.1 413", 0), 0u) << get_reply;
  RawConn h(server_->port());
  ASSERT_TRUE(
      h.Send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n"
             "Expect: 100-continue\r\n\r\n"));
  const std::string huge_reply = h.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_EQ(huge_reply.rfind("HTTP/1.1 413", 0), 0u) << huge_reply;

  // A body within the limit is invited and read.
  RawConn ok(server_->port());
  ASSERT_TRUE(
      ok.Send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
              "Expect: 100-continue\r\nConnection: close\r\n\r\n"));
  bool ok_closed = false;
  std::string ok_reply = ok.ReadAll(std::chrono::milliseconds(500), &ok_closed);
  EXPECT_EQ(ok_reply.rfind("HTTP/1.1 100 Continue", 0), 0u) << ok_reply;
  ASSERT_TRUE(ok.Send("abcde"));
  ok_reply += ok.ReadAll(std::chrono::seconds(5), &ok_closed);
  EXPECT_NE(ok_reply.find("HTTP/1.1 200"), std::string::npos) << ok_reply;
}

// A client that sends a refused body anyway (no Expect) must still be able to send it and read the
// 413: the server keeps reading and dropping it after its reply instead of closing at once (a close
// with unread bytes resets the connection, and the client's next send fails: curl then reports
// "send failure" and never shows the 413).
TEST_F(HttpServerTest, ARefusedBodySentAnywayDoesNotResetTheConnection) {
  HttpServerOptions o;
  o.body_paths = "/upload";
  Start(o);
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  const size_t body = 256u << 10;
  ASSERT_TRUE(c.Send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body) +
                     "\r\n\r\n"));
  // The route refuses on the Content-Length (over its 1,024 bytes) and replies before the body.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string chunk(16u << 10, 'x');
  size_t sent = 0;
  while (sent < body && c.Send(chunk)) sent += chunk.size();
  EXPECT_EQ(sent, body) << "the server reset the connection while the client was sending";
  bool closed = false;
  const std::string reply = c.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  EXPECT_TRUE(closed);
}

// A worker serves one connection at a time: at the thread limit, an idle connection (here one that
// never sends a byte) gives its worker up as soon as another connection waits, long before the
// keep-alive timeout.
TEST_F(HttpServerTest, AnIdleConnectionGivesItsWorkerToAWaitingOne) {
  HttpServerOptions o;
  o.workers = 1;
  o.max_workers = 1;
  o.keep_alive_timeout = std::chrono::seconds(60);
  Start(o);
  RawConn idle(server_->port());
  ASSERT_TRUE(idle.connected());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it now holds the only worker
  httplib::Client cli("127.0.0.1", server_->port());
  cli.set_read_timeout(10, 0);  // far below the 60 s the idle connection could otherwise hold on
  auto res = cli.Get("/healthz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  bool closed = false;
  idle.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed);
}

// One waiting connection frees one worker: of three idle connections holding all three workers (the
// thread limit), exactly one closes for a newcomer; the other two stay open.
TEST_F(HttpServerTest, OneWaitingConnectionClosesOnlyOneIdleOne) {
  HttpServerOptions o;
  o.workers = 3;
  o.max_workers = 3;
  o.keep_alive_timeout = std::chrono::seconds(60);
  Start(o);
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<RawConn>(server_->port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  std::this_thread::sleep_for(
      std::chrono::milliseconds(300));  // past the idle grace: all evictable
  httplib::Client cli("127.0.0.1", server_->port());
  cli.set_read_timeout(10, 0);
  auto res = cli.Get("/healthz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  int closed_count = 0;
  for (auto& c : idle) {
    bool closed = false;
    c->ReadAll(std::chrono::milliseconds(400), &closed);
    closed_count += closed ? 1 : 0;
  }
  EXPECT_EQ(closed_count, 1);
}

// Without other clients an idle connection stays until the keep-alive timeout, then is closed.
TEST_F(HttpServerTest, AnIdleConnectionIsClosedAfterTheKeepAliveTimeout) {
  HttpServerOptions o;
  o.keep_alive_timeout = std::chrono::seconds(1);
  Start(o);
  RawConn idle(server_->port());
  ASSERT_TRUE(idle.connected());
  bool closed = false;
  idle.ReadAll(std::chrono::seconds(10), &closed);
  EXPECT_TRUE(closed);
}

// httplib 0.11 reads a request line or header until its newline, however long (100 MB sent as one
// line took 107 MB of its memory). Here the request is cut off at max_header_bytes +
// max_body_bytes.
TEST_F(HttpServerTest, AnEndlessRequestLineIsCutOff) {
  HttpServerOptions o;
  o.max_body_bytes = 4096;
  o.max_header_bytes = 4096;
  Start(o);
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("GET /"));
  const std::string chunk(64 << 10, 'a');
  size_t sent = 0;
  while (sent < (16u << 20) && c.Send(chunk)) sent += chunk.size();
  EXPECT_LT(sent, 16u << 20) << "the server kept reading a 16 MiB request line";
  bool closed = false;
  c.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed);
  httplib::Client cli("127.0.0.1", server_->port());
  auto res = cli.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// A client that sends its headers a byte at a time, each just inside the read timeout, is cut off
// at the request timeout.
TEST_F(HttpServerTest, ATricklingRequestIsCutOffAtTheRequestTimeout) {
  HttpServerOptions o;
  o.read_timeout = std::chrono::milliseconds(1000);
  o.request_timeout = std::chrono::milliseconds(500);
  Start(o);
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  const std::string request =
      "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
  size_t i = 0;
  for (; i < request.size() && c.Send(request.substr(i, 1)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the whole request takes ~4 s
  }
  bool closed = false;
  const std::string reply = c.ReadAll(std::chrono::seconds(3), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply.find("200 OK"), std::string::npos) << reply;
}

// Slow clients that trickle their request heads (slowloris) must not keep /healthz waiting: with
// the operator's health server settings (2 workers, default timeouts) each such connection used to
// hold a worker until the 10 s request timeout, and 4 of them delayed /healthz by ~9 s while
// kubelet's liveness probe gives up after its timeout. The bound below only detects that hang;
// bench/http_server_trickle measures the latency.
TEST_F(HttpServerTest, TricklingClientsDoNotDelayHealthz) {
  HttpServerOptions o;
  o.workers = 2;  // operator/main.cc's health server
  Start(o);
  constexpr int kTricklers = 8;
  std::vector<std::unique_ptr<RawConn>> slow;
  for (int i = 0; i < kTricklers; ++i) {
    slow.push_back(std::make_unique<RawConn>(server_->port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop.load()) {
      for (auto& c : slow) c->Send("a");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // every trickler holds a connection
  httplib::Client cli("127.0.0.1", server_->port());
  cli.set_read_timeout(15, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = cli.Get("/healthz");
  const auto took = std::chrono::steady_clock::now() - t0;
  stop.store(true);
  trickle.join();
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(took, std::chrono::seconds(3))
      << "/healthz took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms behind " << kTricklers << " trickling connections";
}

// At the thread limit, a connection that has not sent its whole request head within the idle grace
// gives its worker up to a waiting connection, as an idle one does (many slow clients cannot hold
// every worker until the request timeout).
TEST_F(HttpServerTest, AHalfSentRequestGivesItsWorkerToAWaitingOne) {
  HttpServerOptions o;
  o.workers = 1;
  o.max_workers = 1;
  Start(o);
  RawConn slow(server_->port());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it holds the only worker
  httplib::Client cli("127.0.0.1", server_->port());
  cli.set_read_timeout(15, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = cli.Get("/healthz");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(took, std::chrono::seconds(3));
  bool closed = false;
  const std::string reply = slow.ReadAll(std::chrono::seconds(2), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply.find("200 OK"), std::string::npos) << reply;
}

TEST_F(HttpServerTest, TlsFilesAreChecked) {
  HttpServerOptions half;
  half.tls_cert = "/nonexistent.crt";
  HttpServer a(half);
  Status s = a.Init();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--tls-cert and --tls-key go together"), std::string::npos)
      << s.message();

  HttpServerOptions ca_only;
  ca_only.client_ca = "/ca.crt";
  ca_only.tls_flag_prefix = "--metrics-tls";
  ca_only.client_ca_flag = "--metrics-client-ca";
  HttpServer b(ca_only);
  s = b.Init();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--metrics-client-ca needs --metrics-tls-cert and --metrics-tls-key"),
            std::string::npos)
      << s.message();

  HttpServerOptions missing;
  missing.tls_cert = "/nonexistent.crt";
  missing.tls_key = "/nonexistent.key";
  HttpServer c(missing);
  s = c.Init();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cannot load TLS certificate/key (/nonexistent.crt"),
            std::string::npos);
}

TEST_F(HttpServerTest, StartWithoutInitIsAnError) {
  HttpServer s{HttpServerOptions{}};
  EXPECT_EQ(s.Start().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace nvl72
