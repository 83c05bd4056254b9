// nvl72-operator: admits NVL72Job gangs all-or-nothing into one NVLink domain. See
// docs/operator.md.
#include <httplib.h>
#include <prometheus/text_serializer.h>
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "common/http_server.h"
#include "kube/config.h"
#include "kube/http_client.h"
#include "kube/preflight.h"
#include "operator/controller.h"
#include "operator/log.h"
#include "operator/metrics.h"
#include "operator/options.h"

#ifndef NVL72_VERSION
#define NVL72_VERSION "dev"
#endif

namespace nvl72::op {
namespace {

StatusOr<kube::Config> LoadConfig(const Options& o) {
  if (!o.kubeconfig.empty()) return kube::LoadKubeconfig(o.kubeconfig);
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) return kube::InClusterConfig();
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    return kube::LoadKubeconfig(env);
  }
  return kube::InClusterConfig();
}

// Parses the command line into `o` and applies the log flags. Returns the exit code when there is
// nothing to run (a bad flag, --help, --version).
std::optional<int> ParseFlags(int argc, char** argv, Options* o) {
  auto parsed = ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::cerr << "nvl72-operator: " << parsed.status().message() << "\n";
    return 2;
  }
  *o = std::move(parsed).value();
  if (o->help) {
    std::cout << Usage();
    return 0;
  }
  if (o->version) {
    std::cout << "nvl72-operator " << NVL72_VERSION << "\n";
    return 0;
  }
  SetLogLevel(ParseLogLevel(o->log_level));
  LogFormat format = LogFormat::kText;
  if (ParseLogFormat(o->log_format, &format)) SetLogFormat(format);
  return std::nullopt;
}

// Signals are handled by one thread; every other thread has them blocked.
sigset_t BlockShutdownSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return sigs;
}

// The API server client; null (the reason logged) when the config is unusable or the API server
// rejects our credentials.
std::unique_ptr<kube::HttpClient> ConnectToApiServer(const Options& o) {
  auto config = LoadConfig(o);
  if (!config.ok()) {
    NVL72_LOG(kError) << "config: " << config.status();
    return nullptr;
  }
  NVL72_LOG(kInfo) << "nvl72-operator " << NVL72_VERSION << " -> " << config->DebugString();
  auto client = kube::HttpClient::Create(*config);
  if (!client.ok()) {
    NVL72_LOG(kError) << "client: " << client.status();
    return nullptr;
  }
  // A wrong or revoked token would leave the informers retrying (and /readyz 503) without a word.
  if (Status s = kube::CheckCredentials(client->get(), kube::kNodes); !s.ok()) {
    NVL72_LOG(kError) << "the API server rejected our credentials (" << config->DebugString()
                      << "): " << s;
    return nullptr;
  }
  return std::move(client).value();
}

// /metrics and the probes: the same limits as the extender's listener (common/http_server.h):
// a few workers, short timeouts, no request bodies, idle connections closed after 5 s.
std::pair<std::string, std::string> TextError(int, const std::string& what) {
  return std::make_pair(what + "\n", std::string("text/plain"));
}

bool Enabled(const std::string& addr) { return !addr.empty() && addr != "0"; }

// Serves /metrics on --metrics-addr (unless disabled) into `slot`; false (logged) on error.
bool ServeMetrics(const Options& o, const Metrics& metrics, std::unique_ptr<HttpServer>* slot) {
  if (!Enabled(o.metrics_addr)) return true;
  HttpServerOptions so;
  SplitHostPort(o.metrics_addr, &so.host, &so.port);
  so.tls_cert = o.metrics_tls_cert;
  so.tls_key = o.metrics_tls_key;
  so.client_ca = o.metrics_client_ca;
  so.tls_flag_prefix = "--metrics-tls";
  so.client_ca_flag = "--metrics-client-ca";
  so.workers = 2;
  so.error_body = TextError;
  *slot = std::make_unique<HttpServer>(so);
  HttpServer& server = **slot;
  if (Status s = server.Init(); !s.ok()) {
    NVL72_LOG(kError) << "metrics server: " << s;
    return false;
  }
  std::shared_ptr<prometheus::Collectable> collectable = metrics.Collectable();
  server.http().Get("/metrics", [collectable](const httplib::Request&, httplib::Response& res) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, collectable->Collect());
    res.set_content(out.str(), "text/plain; version=0.0.4");
  });
  if (Status s = server.Start(); !s.ok()) {
    NVL72_LOG(kError) << "metrics server on " << o.metrics_addr << ": " << s;
    return false;
  }
  NVL72_LOG(kInfo) << "metrics on " << (server.tls() ? "https://" : "http://") << o.metrics_addr
                   << "/metrics"
                   << (o.metrics_client_ca.empty() ? "" : " (client certificates required)");
  return true;
}

// Serves /healthz and /readyz on --health-addr (unless disabled) into `slot`; false (logged) on
// error.
bool ServeHealth(const Options& o, const Controller& controller,
                 std::unique_ptr<HttpServer>* slot) {
  if (!Enabled(o.health_addr)) return true;
  HttpServerOptions so;
  SplitHostPort(o.health_addr, &so.host, &so.port);
  so.workers = 2;
  so.error_body = TextError;
  *slot = std::make_unique<HttpServer>(so);
  HttpServer& server = **slot;
  if (Status s = server.Init(); !s.ok()) {
    NVL72_LOG(kError) << "health server: " << s;
    return false;
  }
  server.http().Get("/healthz", [c = &controller](const httplib::Request&, httplib::Response& res) {
    res.status = c->Healthy() ? 200 : 500;
    res.set_content(c->Healthy() ? "ok\n" : "unhealthy\n", "text/plain");
  });
  server.http().Get("/readyz", [c = &controller](const httplib::Request&, httplib::Response& res) {
    const bool ready = c->Ready();
    res.status = ready ? 200 : 503;
    res.set_content(
        ready ? (c->IsLeader() ? "ok leader\n" : "ok standby\n") : "caches not synced\n",
        "text/plain");
  });
  if (Status s = server.Start(); !s.ok()) {
    NVL72_LOG(kError) << "health server: cannot bind " << o.health_addr << ": " << s;
    return false;
  }
  return true;
}

// Runs the controller until a signal in `sigs` (or lost leadership, or a fatal error), then stops
// the servers. Returns the exit code.
int RunUntilSignal(Controller& controller, sigset_t sigs, HttpServer* health,
                   HttpServer* metrics_server) {
  std::stop_source stop;
  std::jthread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    NVL72_LOG(kInfo) << "signal " << sig << ": shutting down";
    stop.request_stop();
  });

  Status s = controller.Run(stop.get_token());
  if (!stop.stop_requested()) {
    // Lost leadership or a fatal error: wake the signal thread so it can be joined.
    stop.request_stop();
    // SIGTERM is blocked in every thread (BlockShutdownSignals): it kills nothing, it only ends
    // the signal thread's sigwait.
    // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
    pthread_kill(signal_thread.native_handle(), SIGTERM);
  }
  if (health != nullptr) health->Stop();
  if (metrics_server != nullptr) metrics_server->Stop();
  if (!s.ok()) {
    NVL72_LOG(kError) << "controller: " << s;
    return 1;
  }
  NVL72_LOG(kInfo) << "bye";
  return 0;
}

int Main(int argc, char** argv) {
  Options o;
  if (std::optional<int> exit_code = ParseFlags(argc, argv, &o)) return *exit_code;
  const sigset_t sigs = BlockShutdownSignals();

  std::unique_ptr<kube::HttpClient> client = ConnectToApiServer(o);
  if (client == nullptr) return 1;
  Metrics metrics;
  client->SetRequestObserver([&metrics](std::string_view verb, int code, double seconds) {
    metrics.ObserveApiRequest(verb, code, seconds);
  });
  std::unique_ptr<HttpServer> metrics_server;
  if (!ServeMetrics(o, metrics, &metrics_server)) return 1;

  Controller controller(client.get(), o, &metrics);
  std::unique_ptr<HttpServer> health;
  if (!ServeHealth(o, controller, &health)) return 1;

  return RunUntilSignal(controller, sigs, health.get(), metrics_server.get());
}

}  // namespace
}  // namespace nvl72::op

int main(int argc, char** argv) { return nvl72::op::Main(argc, argv); }
