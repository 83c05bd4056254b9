#include "kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "kube/object.h"

extern char** environ;

namespace nvl72::kube {
namespace {

using nlohmann::json;

constexpr size_t kMaxStdout = size_t{1} << 20;
constexpr size_t kStderrTail = 400;

// A pipe whose ends close with it.
class Pipe {
 public:
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  bool Open() { return pipe2(fd_, O_CLOEXEC) == 0; }
  int read_end() const { return fd_[0]; }
  int write_end() const { return fd_[1]; }
  void CloseRead() { Close(0); }
  void CloseWrite() { Close(1); }

 private:
  void Close(int i) {
    if (fd_[i] >= 0) close(fd_[i]);
    fd_[i] = -1;
  }
  int fd_[2] = {-1, -1};
};

// What a finished plugin left: its standard output and error, and waitpid's status.
struct Finished {
  std::string out;
  std::string err;
  int wait_status = 0;
};

// posix_spawn's file actions and attributes for one run, destroyed with it.
class SpawnSetup {
 public:
  SpawnSetup(bool interactive, int out_fd, int err_fd) {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
    if (!interactive) posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions_, out_fd, 1);
    if (!interactive) posix_spawn_file_actions_adddup2(&actions_, err_fd, 2);
    posix_spawn_file_actions_addclosefrom_np(&actions_, 3);
    // The plugin starts with default SIGPIPE (we ignore it) and no blocked signals; a
    // non-interactive one in a process group of its own, killed whole on timeout.
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr_, &defaults);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr_, &none);
    short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    if (!interactive) {
      flags |= POSIX_SPAWN_SETPGROUP;
      posix_spawnattr_setpgroup(&attr_, 0);
    }
    posix_spawnattr_setflags(&attr_, flags);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attr() const { return &attr_; }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

// Our environment, then the kubeconfig's env, then KUBERNETES_EXEC_INFO (later names win).
std::vector<std::string> PluginEnvironment(const ExecConfig& config, bool interactive) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [name, value] : config.env) env[name] = value;
  env["KUBERNETES_EXEC_INFO"] = ExecInfo(config, interactive);
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.emplace_back(name).append("=").append(value);
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Status SpawnError(const ExecConfig& config, int rc) {
  if (rc == ENOENT) {
    std::string m = config.Describe() + ": executable \"" + config.command + "\" not found";
    if (!config.install_hint.empty()) m += "\n\n" + config.install_hint;
    return NotFoundError(m);
  }
  return Status(StatusCode::kUnauthenticated, config.Describe() + ": cannot run \"" +
                                                  config.command + "\": " + std::strerror(rc));
}

// Reads both pipes until the plugin closes them or `deadline` passes (false).
bool ReadUntilClosed(Pipe& out, Pipe& err, bool capture_err,
                     std::chrono::steady_clock::time_point deadline, Finished* f) {
  bool out_open = true;
  bool err_open = capture_err;
  char buf[4096];
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd fds[2] = {{out_open ? out.read_end() : -1, POLLIN, 0},
                     {err_open ? err.read_end() : -1, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& to = i == 0 ? f->out : f->err;
      if (to.size() < kMaxStdout) to.append(buf, static_cast<size_t>(got));
    }
  }
  return true;
}

// Runs the plugin to its end (or kills it at the deadline: kDeadlineExceeded).
StatusOr<Finished> Spawn(const ExecConfig& config, bool interactive) {
  Pipe out;
  Pipe err;
  if (!out.Open() || !err.Open()) {
    return InternalError(config.Describe() + ": pipe: " + std::strerror(errno));
  }
  std::vector<std::string> argv_s{config.command};
  argv_s.insert(argv_s.end(), config.args.begin(), config.args.end());
  std::vector<std::string> env_s = PluginEnvironment(config, interactive);
  std::vector<char*> argv = CStrings(argv_s);
  std::vector<char*> envp = CStrings(env_s);
  pid_t pid = 0;
  int rc = 0;
  {
    SpawnSetup setup(interactive, out.write_end(), err.write_end());
    rc = posix_spawnp(&pid, config.command.c_str(), setup.actions(), setup.attr(), argv.data(),
                      envp.data());
  }
  out.CloseWrite();
  err.CloseWrite();
  if (rc != 0) return SpawnError(config, rc);
  const auto limit =
      interactive ? std::chrono::milliseconds(kExecInteractiveTimeout) : config.timeout;
  Finished f;
  if (!ReadUntilClosed(out, err, !interactive, std::chrono::steady_clock::now() + limit, &f)) {
    kill(interactive ? pid : -pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f", static_cast<double>(limit.count()) / 1000);
    return Status(StatusCode::kDeadlineExceeded,
                  config.Describe() + ": no answer within " + secs + " s; killed it");
  }
  while (waitpid(pid, &f.wait_status, 0) < 0 && errno == EINTR) {
  }
  return f;
}

// The last line of what the plugin wrote on standard error, shortened.
std::string StderrTail(const std::string& err) {
  size_t end = err.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t start = err.find_last_of('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  std::string line = err.substr(start, end - start + 1);
  if (line.size() > kStderrTail) line = "..." + line.substr(line.size() - kStderrTail);
  return line;
}

Status ExitError(const ExecConfig& config, const Finished& f) {
  std::string m = config.Describe();
  if (WIFEXITED(f.wait_status)) {
    m += " failed with exit code " + std::to_string(WEXITSTATUS(f.wait_status));
  } else if (WIFSIGNALED(f.wait_status)) {
    m += " was killed by signal " + std::to_string(WTERMSIG(f.wait_status));
  } else {
    m += " ended abnormally";
  }
  if (std::string tail = StderrTail(f.err); !tail.empty()) m += ": " + tail;
  return Status(StatusCode::kUnauthenticated, m);
}

// A string field of `obj`; "" when absent or null; false when present with another type.
bool StringField(const json& obj, const char* key, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

}  // namespace

std::string ExecConfig::Describe() const {
  return "exec plugin \"" + command + "\" of user \"" + user + "\"";
}

StatusOr<bool> ExecInteractive(const ExecConfig& config, bool stdin_is_terminal) {
  if (config.interactive_mode == "Never") return false;
  if (config.interactive_mode == "Always") {
    if (!stdin_is_terminal) {
      return FailedPreconditionError(
          config.Describe() +
          " needs an interactive terminal (interactiveMode Always) and standard input is not one");
    }
    return true;
  }
  return stdin_is_terminal;  // IfAvailable
}

std::string ExecInfo(const ExecConfig& config, bool interactive) {
  json info = {{"apiVersion", config.api_version},
               {"kind", "ExecCredential"},
               {"spec", {{"interactive", interactive}}}};
  if (config.provide_cluster_info) info["spec"]["cluster"] = config.cluster;
  return info.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<ExecCredential> ParseExecCredential(const std::string& out, const ExecConfig& config) {
  auto bad = [&](const std::string& what) {
    return Status(StatusCode::kUnauthenticated, config.Describe() + ": " + what);
  };
  json j = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return bad("printed no ExecCredential JSON (" + std::to_string(out.size()) +
               " bytes on standard output)");
  }
  std::string api_version;
  std::string kind;
  if (!StringField(j, "apiVersion", &api_version) || api_version != config.api_version) {
    return bad("printed apiVersion \"" + api_version + "\", but the kubeconfig asks for \"" +
               config.api_version + "\"");
  }
  if (!StringField(j, "kind", &kind) || kind != "ExecCredential") {
    return bad("printed kind \"" + kind + "\", not ExecCredential");
  }
  auto status = j.find("status");
  if (status == j.end() || !status->is_object()) return bad("printed no status");
  ExecCredential c;
  std::string expiry;
  if (!StringField(*status, "token", &c.token) ||
      !StringField(*status, "clientCertificateData", &c.client_cert_pem) ||
      !StringField(*status, "clientKeyData", &c.client_key_pem) ||
      !StringField(*status, "expirationTimestamp", &expiry)) {
    return bad("printed a status field that is not a string");
  }
  if (c.token.empty() && c.client_cert_pem.empty() && c.client_key_pem.empty()) {
    return bad("printed neither a token nor a client certificate and key");
  }
  if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
    return bad("printed only one of clientCertificateData and clientKeyData");
  }
  if (!expiry.empty()) {
    auto t = ParseTime(expiry);
    if (!t.ok()) return bad("expirationTimestamp: " + t.status().message());
    c.expiry = *t;
  }
  return c;
}

StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& config) {
  auto interactive = ExecInteractive(config, isatty(STDIN_FILENO) == 1);
  if (!interactive.ok()) return interactive.status();
  auto finished = Spawn(config, *interactive);
  if (!finished.ok()) return finished.status();
  if (!WIFEXITED(finished->wait_status) || WEXITSTATUS(finished->wait_status) != 0) {
    return ExitError(config, *finished);
  }
  if (finished->out.size() >= kMaxStdout) {
    return Status(StatusCode::kUnauthenticated,
                  config.Describe() + ": printed more than 1 MiB on standard output");
  }
  return ParseExecCredential(finished->out, config);
}

ExecAuthenticator::ExecAuthenticator(ExecConfig config, Clock* clock, Runner runner)
    : config_(std::move(config)), clock_(clock), runner_(std::move(runner)) {}

StatusOr<ExecAuthenticator::CredentialPtr> ExecAuthenticator::Get() {
  std::lock_guard<std::mutex> l(mu_);
  bool expired = cached_ && cached_->expiry && clock_->WallNow() >= *cached_->expiry;
  if (!cached_ || expired) NVL72_RETURN_IF_ERROR(RunLocked());
  return cached_;
}

Status ExecAuthenticator::Refresh(const CredentialPtr& used) {
  std::lock_guard<std::mutex> l(mu_);
  if (cached_ != used) return Status::Ok();  // another caller already ran the plugin
  return RunLocked();
}

int ExecAuthenticator::runs() const {
  std::lock_guard<std::mutex> l(mu_);
  return runs_;
}

Status ExecAuthenticator::RunLocked() {
  ++runs_;
  auto c = runner_(config_);
  if (!c.ok()) return c.status();
  cached_ = std::make_shared<const ExecCredential>(std::move(c).value());
  return Status::Ok();
}

}  // namespace nvl72::kube
