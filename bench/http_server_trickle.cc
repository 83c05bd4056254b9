// http_server_trickle: how long /healthz takes while N clients trickle their request heads
// (slowloris), on an HttpServer configured as nvl72-operator's health server (2 workers, default
// limits; operator/main.cc). Prints one line per N: the median and the slowest of a few /healthz
// requests, each made after the tricklers hold their connections. Numbers: docs/benchmarks.md.
//
//   http_server_trickle [N ...]      (default: 0 1 2 4 8 16 64 256)
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/http_server.h"

namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// N connections that send a request head a byte every 100 ms; a connection the server closes is
// opened again (a real attacker reconnects too).
class Tricklers {
 public:
  Tricklers(int port, int n) : port_(port), fds_(static_cast<size_t>(n), -1) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Tricklers() {
    stop_.store(true);
    thread_.join();
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }

 private:
  void Run() {
    const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    while (!stop_.load()) {
      for (int& fd : fds_) {
        if (fd >= 0 && send(fd, "a", 1, MSG_NOSIGNAL) == 1) continue;
        if (fd >= 0) close(fd);
        fd = Connect(port_);
        if (fd >= 0) send(fd, head.data(), head.size(), MSG_NOSIGNAL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  const int port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
  if (counts.empty()) counts = {0, 1, 2, 4, 8, 16, 64, 256};

  nvl72::HttpServerOptions o;
  o.workers = 2;  // as operator/main.cc's health server
  nvl72::HttpServer server(o);
  if (!server.Init().ok()) return 1;
  server.http().Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  if (!server.Start().ok()) return 1;

  std::printf("%-10s %12s %12s %s\n", "tricklers", "median_ms", "max_ms", "failed");
  for (int n : counts) {
    Tricklers t(server.port(), n);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // they hold their connections
    std::vector<double> ms;
    int failed = 0;
    for (int i = 0; i < 5; ++i) {
      httplib::Client cli("127.0.0.1", server.port());
      cli.set_read_timeout(30, 0);
      const auto t0 = Clock::now();
      auto res = cli.Get("/healthz");
      const double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!res || res->status != 200) ++failed;
      ms.push_back(took);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-10d %12.1f %12.1f %d\n", n, ms[ms.size() / 2], ms.back(), failed);
    std::fflush(stdout);
  }
  server.Stop();
  return 0;
}
