#include "common/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <regex>
#include <string_view>
#include <type_traits>
#include <vector>

// GuardedServer, GuardedStream and CountingPool below override cpp-httplib internals (its
// per-connection hook process_and_close_socket, process_request, Stream, TaskQueue,
// new_task_queue, svr_sock_) as they are in the version checked here. Another version may change
// them without any compile error: review the overrides against it, then update the version.
#define NVL72_HTTPLIB_CHECKED_VERSION "0.11.4"
#ifndef CPPHTTPLIB_VERSION
#error "common/http_server.cc overrides httplib 0.11.4 internals: CPPHTTPLIB_VERSION is missing"
#endif
// The preprocessor cannot compare strings, hence a static_assert for the version itself.
static_assert(std::string_view(CPPHTTPLIB_VERSION) == NVL72_HTTPLIB_CHECKED_VERSION,
              "common/http_server.cc overrides cpp-httplib internals checked against "
              "httplib " NVL72_HTTPLIB_CHECKED_VERSION
              " only, but httplib.h is version " CPPHTTPLIB_VERSION
              ": review GuardedServer, GuardedStream and CountingPool against this version, then "
              "update NVL72_HTTPLIB_CHECKED_VERSION");

namespace nvl72 {
namespace {

using Clock = std::chrono::steady_clock;

// The worker pool: `min` threads always; more, up to `max`, while connections wait and no thread
// is idle, so that slow clients holding workers do not queue the others (a thread above `min` ends
// after kSpareIdle without work). At `max` it counts the connections that wait for a worker
// (httplib's ThreadPool does not say): a connection without a request in progress then gives its
// worker up as soon as another connection waits.
class CountingPool final : public httplib::TaskQueue {
 public:
  CountingPool(size_t min, size_t max) : min_(std::max<size_t>(1, min)), max_(std::max(min_, max)) {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < min_; ++i) SpawnLocked();
  }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      jobs_.push_back(std::move(fn));
      if (jobs_.size() > idle_ && live_ < max_) SpawnLocked();
      UpdateWaitingLocked();
    }
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    // No enqueue() after shutdown() (httplib's accept loop has ended): threads_ no longer changes
    // but for threads that end, which only record themselves in ended_.
    for (auto& t : threads_) t.join();
  }
  // Connections waiting for a worker that no idle or new thread will take (0 below `max`).
  size_t waiting() const { return waiting_.load(); }
  // A connection may close to free its worker only while fewer have already promised to than
  // connections wait: one waiting connection does not make every idle one close. A promise is kept
  // when a waiting connection gets a worker (whichever worker that is).
  bool ClaimEviction() {
    std::lock_guard<std::mutex> l(mu_);
    if (evicting_ >= StarvedLocked()) return false;
    ++evicting_;
    return true;
  }

 private:
  static constexpr std::chrono::seconds kSpareIdle{10};

  void SpawnLocked() {
    // Join the threads that ended (each has left Work(), so this does not wait on mu_).
    for (std::thread::id id : ended_) {
      auto it = std::find_if(threads_.begin(), threads_.end(),
                             [id](const std::thread& t) { return t.get_id() == id; });
      if (it == threads_.end()) continue;
      it->join();
      threads_.erase(it);
    }
    ended_.clear();
    threads_.emplace_back([this] { Work(); });
    ++live_;
  }
  size_t StarvedLocked() const {
    return live_ >= max_ && jobs_.size() > idle_ ? jobs_.size() - idle_ : 0;
  }
  void UpdateWaitingLocked() { waiting_.store(StarvedLocked()); }
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        ++idle_;
        UpdateWaitingLocked();
        const bool woken = cv_.wait_for(l, kSpareIdle, [&] { return !jobs_.empty() || shutdown_; });
        --idle_;
        if (jobs_.empty() && (shutdown_ || (!woken && live_ > min_))) {
          --live_;
          if (!shutdown_) ended_.push_back(std::this_thread::get_id());
          UpdateWaitingLocked();
          return;
        }
        if (jobs_.empty()) continue;  // idle for kSpareIdle, but one of the `min`
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        if (evicting_ > 0) --evicting_;
        UpdateWaitingLocked();
      }
      fn();
    }
  }
  const size_t min_, max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::atomic<size_t> waiting_{0};
  size_t live_ = 0;      // threads in Work(); guarded by mu_
  size_t idle_ = 0;      // threads waiting for a job; guarded by mu_
  size_t evicting_ = 0;  // guarded by mu_
  bool shutdown_ = false;
  std::vector<std::thread> threads_;    // guarded by mu_ until shutdown()
  std::vector<std::thread::id> ended_;  // threads that left Work(), not joined yet; guarded by mu_
};

// Whether the request announces a body over `max_bytes` (a Content-Length past 64 bits counts).
bool ContentLengthOver(const httplib::Request& req, size_t max_bytes) {
  if (!req.has_header("Content-Length")) return false;
  const std::string length = req.get_header_value("Content-Length");
  uint64_t n = 0;
  const std::errc ec = std::from_chars(length.data(), length.data() + length.size(), n).ec;
  return ec == std::errc::result_out_of_range ||
         (ec == std::errc() && n > static_cast<uint64_t>(max_bytes));
}

struct Limits {
  std::chrono::milliseconds read_timeout{5000};
  std::chrono::milliseconds write_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::seconds keep_alive_timeout{5};
  size_t keep_alive_max_count = 10000;
  size_t request_bytes = 1u << 20;  // request line + headers + body
};

int PollFor(int fd, short events, Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  pollfd p{fd, events, 0};
  int r;
  do {
    r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
  } while (r < 0 && errno == EINTR);
  return r;
}

// Whether a connection that has not sent a whole request head since `since` (its first byte, or
// the end of the last reply) gives its worker up now: see GuardedServer::GiveWorkerUp.
using GiveUpFn = std::function<bool(Clock::time_point since)>;

// How often a wait that may give its worker up looks again.
constexpr std::chrono::milliseconds kGiveUpSlice{20};

// The connection as httplib's Stream, with what httplib 0.11's own socket stream lacks: a byte
// budget and a deadline per request (its line reader grows without bound: 100 MB sent as one
// request line took 107 MB of memory), buffered reads (httplib reads header lines a byte at a
// time), and TLS or plain I/O on a non-blocking socket. Until the request head (request line and
// headers) has been read whole, a wait for more bytes ends early when `give_up` says so: a slow
// client's worker goes to a waiting connection.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, SSL* ssl, const Limits& limits, GiveUpFn give_up)
      : fd_(fd), ssl_(ssl), limits_(limits), give_up_(std::move(give_up)) {}

  void BeginRequest() {
    budget_ = limits_.request_bytes;
    started_ = Clock::now();
    deadline_ = started_ + limits_.request_timeout;
    close_after_ = false;
    head_done_ = false;
    last_bytes_ = 0;
  }
  bool broken() const { return broken_ || write_broken_; }
  bool close_after() const { return close_after_; }
  // The connection closes after this reply with (possibly) unread request bytes behind it.
  void CloseAfterReply() { close_after_ = unread_ = true; }
  // Whether request bytes may be left unread when the connection closes (see LingeringClose).
  bool unread() const { return unread_ && !write_broken_; }
  size_t buffered() const {
    return end_ - begin_ + (ssl_ != nullptr ? static_cast<size_t>(SSL_pending(ssl_)) : 0);
  }

  bool is_readable() const override {
    if (buffered() > 0) return true;
    return PollFor(fd_, POLLIN, ReadDeadline()) > 0;
  }
  bool is_writable() const override {
    return PollFor(fd_, POLLOUT, Clock::now() + limits_.write_timeout) > 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (broken_) return -1;
    if (begin_ == end_) {
      const ssize_t n = Fill();
      if (n <= 0) return n;
    }
    size_t n = std::min(size, end_ - begin_);
    if (n > budget_) n = budget_;
    if (n == 0) {  // the request is larger than we accept
      broken_ = unread_ = true;
      return -1;
    }
    std::memcpy(ptr, buf_ + begin_, n);
    if (!head_done_) SeeHeadBytes(buf_ + begin_, n);
    begin_ += n;
    budget_ -= n;
    return static_cast<ssize_t>(n);
  }
  // A request that could not be read whole still gets its error reply (408, 413).
  ssize_t write(const char* ptr, size_t size) override {
    if (write_broken_) return -1;
    const Clock::time_point deadline = Clock::now() + limits_.write_timeout;
    for (;;) {
      ssize_t n;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int r = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (r > 0) return r;
        const int e = SSL_get_error(ssl_, r);
        if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) return WriteBroken();
        if (PollFor(fd_, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline) <= 0)
          return WriteBroken();
        continue;
      }
      n = send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return WriteBroken();
      if (PollFor(fd_, POLLOUT, deadline) <= 0) return WriteBroken();
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) Describe(a, &ip, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) Describe(a, &ip, &port);
  }
  socket_t socket() const override { return fd_; }

 private:
  Clock::time_point ReadDeadline() const {
    return std::min(deadline_, Clock::now() + limits_.read_timeout);
  }
  // The head ends with an empty line: "\r\n\r\n" (or "\n\n", which httplib also takes).
  void SeeHeadBytes(const char* p, size_t n) {
    for (size_t i = 0; i < n && !head_done_; ++i) {
      last_bytes_ = (last_bytes_ << 8) | static_cast<unsigned char>(p[i]);
      head_done_ = (last_bytes_ & 0xffff) == 0x0a0a || (last_bytes_ & 0xffffff) == 0x0a0d0a;
    }
  }
  // poll() until `deadline`; while the head is incomplete, in slices, ending early (0) when the
  // worker is given up.
  int Wait(short events, Clock::time_point deadline) {
    if (head_done_ || !give_up_) return PollFor(fd_, events, deadline);
    for (;;) {
      const int r = PollFor(fd_, events, std::min(deadline, Clock::now() + kGiveUpSlice));
      if (r != 0 || Clock::now() >= deadline || give_up_(started_)) return r;
    }
  }
  ssize_t Broken() {
    broken_ = true;
    return -1;
  }
  ssize_t WriteBroken() {
    write_broken_ = true;
    return -1;
  }
  // Reads what is there (at most a buffer) within the read timeout and the request's deadline.
  ssize_t Fill() {
    begin_ = end_ = 0;
    for (;;) {
      const Clock::time_point deadline = ReadDeadline();
      if (Clock::now() >= deadline) return Broken();
      ssize_t n;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int r = SSL_read(ssl_, buf_, sizeof buf_);
        if (r > 0) {
          end_ = static_cast<size_t>(r);
          return r;
        }
        const int e = SSL_get_error(ssl_, r);
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return Broken();
        if (Wait(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline) <= 0) return Broken();
        continue;
      }
      n = recv(fd_, buf_, sizeof buf_, 0);
      if (n > 0) {
        end_ = static_cast<size_t>(n);
        return n;
      }
      if (n == 0) return 0;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Broken();
      if (Wait(POLLIN, deadline) <= 0) return Broken();
    }
  }
  static void Describe(const sockaddr_storage& a, std::string* ip, int* port) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto& in = reinterpret_cast<const sockaddr_in&>(a);
      inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
      *port = ntohs(in.sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
      inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
      *port = ntohs(in6.sin6_port);
    }
    *ip = text;
  }

  const int fd_;
  SSL* const ssl_;
  const Limits& limits_;
  const GiveUpFn give_up_;
  char buf_[16384];
  size_t begin_ = 0, end_ = 0;
  size_t budget_ = 0;
  Clock::time_point started_{};
  Clock::time_point deadline_{};
  bool head_done_ = false;     // the request line and headers of this request were read
  uint32_t last_bytes_ = 0;    // the last 4 bytes of the head read so far
  bool broken_ = false;        // reading failed or went over the budget or the deadline
  bool write_broken_ = false;  // writing failed or timed out
  bool close_after_ = false;
  bool unread_ = false;  // the request was cut off or refused before its body was read
};

// Closing a socket with unread bytes in its receive buffer makes the kernel send a reset, which
// can destroy our reply before the client reads it: curl, still sending a refused 2 MiB body,
// reported "send failure" and never saw the 413. So, like nginx's lingering close: send FIN after
// the reply, then read and drop what the client still sends, until it closes, `linger` passes or
// `max_bytes` were dropped (a client that sends without end is still cut off).
void LingeringClose(int sock, std::chrono::milliseconds linger, size_t max_bytes) {
  ::shutdown(sock, SHUT_WR);
  const Clock::time_point deadline = Clock::now() + linger;
  char buf[16384];
  size_t dropped = 0;
  while (dropped < max_bytes && PollFor(sock, POLLIN, deadline) > 0) {
    const ssize_t n = recv(sock, buf, sizeof buf, 0);
    if (n > 0) dropped += static_cast<size_t>(n);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
  }
}

// The connection being served by this worker thread (for CloseAfterReply from a handler).
thread_local GuardedStream* current_stream = nullptr;

// httplib's server with our connection loop in place of its own (process_and_close_socket is the
// one per-connection hook httplib has; overriding it is how SSLServer adds TLS). process_request,
// the HTTP parsing and routing, stays httplib's.
template <typename Base>
class GuardedServer final : public Base {
 public:
  template <typename... Args>
  explicit GuardedServer(Limits limits, Args&&... args)
      : Base(std::forward<Args>(args)...), limits_(limits) {
    this->new_task_queue = [this] {
      pool_ = new CountingPool(workers_, max_workers_);
      return pool_;
    };
  }
  void set_workers(size_t min, size_t max) {
    workers_ = std::max<size_t>(1, min);
    max_workers_ = std::max(workers_, max);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool unread = false;
    const bool ok = Serve(sock, &unread);
    if (unread) LingeringClose(sock, kLinger, 4 * limits_.request_bytes);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  bool Serve(int sock, bool* unread) {
    const int flags = fcntl(sock, F_GETFL, 0);
    if (flags < 0 || fcntl(sock, F_SETFL, flags | O_NONBLOCK) < 0) return false;
    SSL* ssl = nullptr;
    if constexpr (std::is_same_v<Base, httplib::SSLServer>) {
      ssl = SSL_new(this->ssl_context());
      if (ssl == nullptr) return false;
      SSL_set_fd(ssl, sock);
      if (!Handshake(ssl, sock, Clock::now())) {
        SSL_free(ssl);
        return false;
      }
    }
    GuardedStream strm(sock, ssl, limits_,
                       [this](Clock::time_point since) { return GiveWorkerUp(since); });
    current_stream = &strm;
    bool ok = true;
    for (size_t count = limits_.keep_alive_max_count; count > 0; --count) {
      if (strm.buffered() == 0 && !WaitForRequest(sock)) break;
      strm.BeginRequest();
      bool connection_closed = false;
      ok = this->process_request(strm, count == 1, connection_closed, [ssl](httplib::Request& req) {
        req.ssl = ssl;
        // Replies go out uncompressed: httplib gzips a JSON reply whenever the request accepts
        // gzip, and Go's HTTP client (kube-scheduler's extender calls, Prometheus) always says it
        // does. Our replies are small and local, so compressing only costs CPU on both sides.
        req.headers.erase("Accept-Encoding");
      });
      if (!ok || connection_closed || strm.broken() || strm.close_after()) break;
    }
    *unread = strm.unread();
    current_stream = nullptr;
    if (ssl != nullptr) {
      SSL_shutdown(ssl);  // close_notify, not waiting for the peer's
      SSL_free(ssl);
    }
    return ok;
  }

  // One rule for a connection without a request in progress (idle, or still sending its TLS
  // handshake or request head since `since`): when the server stops, or when another connection
  // waits for a worker at the pool's limit and kIdleGrace has passed, it gives its worker up. A
  // client sends its next request, and the whole of it, right after connecting or after the last
  // reply: within the grace it is not given up, which keeps the race of a request crossing our
  // close rare. Slow clients thus cannot hold every worker until their timeouts.
  bool GiveWorkerUp(Clock::time_point since) {
    if (this->svr_sock_ == INVALID_SOCKET) return true;  // stopping
    return Clock::now() - since >= kIdleGrace && pool_ != nullptr && pool_->waiting() > 0 &&
           pool_->ClaimEviction();
  }

  // The TLS handshake, bounded by the request timeout as a whole (a client that trickles it cannot
  // hold the worker longer) and given up as GiveWorkerUp says.
  bool Handshake(SSL* ssl, int sock, Clock::time_point since) {
    const Clock::time_point deadline = since + limits_.request_timeout;
    for (;;) {
      ERR_clear_error();
      const int r = SSL_accept(ssl);
      if (r == 1) return true;
      const int e = SSL_get_error(ssl, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return false;
      const Clock::time_point step = std::min(deadline, Clock::now() + limits_.read_timeout);
      int p = 0;
      while ((p = PollFor(sock, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                          std::min(step, Clock::now() + kGiveUpSlice))) == 0 &&
             Clock::now() < step) {
        if (GiveWorkerUp(since)) return false;
      }
      if (p <= 0) return false;
    }
  }

  // Waits for the next request's first byte: false when the connection stays idle for the
  // keep-alive timeout, is closed, or gives its worker up (GiveWorkerUp).
  bool WaitForRequest(int sock) {
    const Clock::time_point start = Clock::now();
    const Clock::time_point idle_until = start + limits_.keep_alive_timeout;
    for (;;) {
      if (GiveWorkerUp(start)) return false;
      const int r = PollFor(sock, POLLIN, std::min(idle_until, Clock::now() + kGiveUpSlice));
      if (r > 0) {
        char c;
        return recv(sock, &c, 1, MSG_PEEK) > 0;  // data, not the peer's close
      }
      if (r < 0 || Clock::now() >= idle_until) return false;
    }
  }

  static constexpr std::chrono::milliseconds kIdleGrace{200};
  static constexpr std::chrono::milliseconds kLinger{2000};
  const Limits limits_;
  size_t workers_ = 4;
  size_t max_workers_ = 4;
  CountingPool* pool_ = nullptr;  // owned by httplib (new_task_queue)
};

Limits LimitsFrom(const HttpServerOptions& o) {
  Limits limits;
  limits.read_timeout = o.read_timeout;
  limits.write_timeout = o.write_timeout;
  limits.request_timeout = o.request_timeout;
  limits.keep_alive_timeout = o.keep_alive_timeout;
  limits.keep_alive_max_count = std::max<size_t>(1, o.keep_alive_max_count);
  limits.request_bytes = o.max_body_bytes + o.max_header_bytes;
  return limits;
}

// The listener: HTTPS (with the TLS files loaded) when a certificate is given, else plain HTTP.
StatusOr<std::unique_ptr<httplib::Server>> NewGuardedServer(const HttpServerOptions& o) {
  const Limits limits = LimitsFrom(o);
  const auto workers = static_cast<size_t>(std::max(1, o.workers));
  const auto max_workers = static_cast<size_t>(std::max(o.workers, o.max_workers));
  if (o.tls_cert.empty()) {
    auto plain = std::make_unique<GuardedServer<httplib::Server>>(limits);
    plain->set_workers(workers, max_workers);
    return std::unique_ptr<httplib::Server>(std::move(plain));
  }
  auto ssl = std::make_unique<GuardedServer<httplib::SSLServer>>(
      limits, o.tls_cert.c_str(), o.tls_key.c_str(),
      o.client_ca.empty() ? nullptr : o.client_ca.c_str());
  if (!ssl->is_valid()) {
    return InvalidArgumentError("cannot load TLS certificate/key (" + o.tls_cert + ", " +
                                o.tls_key + ")" +
                                (o.client_ca.empty() ? "" : " or client CA " + o.client_ca));
  }
  ssl->set_workers(workers, max_workers);
  return std::unique_ptr<httplib::Server>(std::move(ssl));
}

// Fills an error reply: the status, and a body from `error_body` (else "what" as plain text).
struct ErrorReply {
  std::function<std::pair<std::string, std::string>(int, const std::string&)> error_body;

  void operator()(httplib::Response& res, int status, const std::string& what) const {
    res.status = status;
    if (error_body) {
      auto [body, type] = error_body(status, what);
      res.set_content(body, type.c_str());
    } else {
      res.set_content(what + "\n", "text/plain");
    }
  }
};

// A body the route will not read: refused on the headers alone (true), before any body byte.
struct BodyRefusal {
  std::shared_ptr<const std::regex> body_paths;  // null: no path takes a body
  ErrorReply reply;

  bool operator()(const httplib::Request& req, httplib::Response& res) const {
    const bool chunked = req.has_header("Transfer-Encoding");
    const std::string length = req.get_header_value("Content-Length");
    const bool has_body = chunked || (!length.empty() && length != "0");
    if (!has_body || (body_paths != nullptr && std::regex_match(req.path, *body_paths)))
      return false;
    // The unread body must not be taken for the next request on this connection.
    res.set_header("Connection", "close");
    CloseConnectionAfterReply();
    // Every route of ours that is not a read (GET, HEAD) takes a body, so the path is unknown.
    if (req.method == "GET" || req.method == "HEAD") {
      reply(res, 413, "no request body accepted on " + req.path);
    } else {
      reply(res, 404, "no such path " + req.path);
    }
    return true;
  }
};

// Bodies only where a route reads them (bounded): checked on the headers, before any body byte.
void InstallBodyRefusal(httplib::Server& http, const HttpServerOptions& o,
                        const ErrorReply& reply) {
  std::shared_ptr<const std::regex> body_paths;
  if (!o.body_paths.empty()) body_paths = std::make_shared<const std::regex>(o.body_paths);
  const BodyRefusal refuse_body{body_paths, reply};
  http.set_pre_routing_handler([refuse_body](const httplib::Request& req, httplib::Response& res) {
    return refuse_body(req, res) ? httplib::Server::HandlerResponse::Handled
                                 : httplib::Server::HandlerResponse::Unhandled;
  });
  // A client that asks before sending its body (curl does for bodies over 1 MiB) gets the refusal
  // instead of "100 Continue" when the headers already tell: httplib would otherwise invite the
  // body and only then refuse it.
  const size_t max_body = o.max_body_bytes;
  http.set_expect_100_continue_handler(
      [refuse_body, reply, max_body](const httplib::Request& req, httplib::Response& res) {
        if (refuse_body(req, res)) return res.status;
        if (!ContentLengthOver(req, max_body)) return 100;
        res.set_header("Connection", "close");
        CloseConnectionAfterReply();
        reply(res, 413, "request body too large");
        return 413;
      });
}

// Bodies for the error replies httplib makes itself, and for exceptions out of handlers.
void InstallErrorReplies(httplib::Server& http, const ErrorReply& reply) {
  http.set_error_handler([reply](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route's own error reply
    reply(res, res.status,
          res.status == 413   ? std::string("request body too large")
          : res.status == 404 ? "no such path " + req.path
                              : "HTTP " + std::to_string(res.status));
  });
  http.set_exception_handler(
      [reply](const httplib::Request&, httplib::Response& res, const std::exception_ptr& ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what += std::string(": ") + e.what();
        } catch (...) {
        }
        reply(res, 500, what);
      });
}

}  // namespace

void CloseConnectionAfterReply() {
  if (current_stream != nullptr) current_stream->CloseAfterReply();
}

HttpServer::HttpServer(HttpServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Init() {
  const std::string& p = options_.tls_flag_prefix;
  if (options_.tls_cert.empty() != options_.tls_key.empty()) {
    return InvalidArgumentError(p + "-cert and " + p + "-key go together");
  }
  if (!options_.client_ca.empty() && options_.tls_cert.empty()) {
    return InvalidArgumentError(options_.client_ca_flag + " needs " + p + "-cert and " + p +
                                "-key");
  }
  auto server = NewGuardedServer(options_);
  if (!server.ok()) return server.status();
  http_ = std::move(server).value();
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_tcp_nodelay(true);

  const ErrorReply reply{options_.error_body};
  InstallBodyRefusal(*http_, options_, reply);
  InstallErrorReplies(*http_, reply);
  return Status::Ok();
}

Status HttpServer::Start() {
  if (http_ == nullptr) return FailedPreconditionError("HttpServer::Start before Init");
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
  while (!http_->is_running() && !listening_done->load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

void HttpServer::Stop() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

int ReadBodyLimited(const httplib::Request& req, const httplib::ContentReader& read_body,
                    size_t max_bytes, std::string* body) {
  if (ContentLengthOver(req, max_bytes)) {
    CloseConnectionAfterReply();
    return 413;
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
  if (too_large || !read) CloseConnectionAfterReply();  // the rest of the body is not read
  if (too_large) return 413;
  if (!read) return 408;
  return 200;
}

}  // namespace nvl72
