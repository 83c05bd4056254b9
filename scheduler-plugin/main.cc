// nvl72-extender: the kube-scheduler HTTP extender of nvl72-operator. See docs/extender.md.
#include <csignal>
#include <cstdio>
#include <ctime>
#include <exception>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kube/clock.h"
#include "kube/config.h"
#include "kube/http_client.h"
#include "kube/informer.h"
#include "kube/preflight.h"
#include "scheduler-plugin/cluster_cache.h"
#include "scheduler-plugin/flags.h"
#include "scheduler-plugin/metrics.h"
#include "scheduler-plugin/server.h"
#include "scheduler-plugin/service.h"

#ifndef NVL72_VERSION_STRING
#define NVL72_VERSION_STRING "0.0.0"
#endif

namespace {

int g_level = 1;  // 0 debug, 1 info, 2 warning, 3 error
bool g_json = false;

using LogKeys = std::vector<std::pair<std::string, std::string>>;

// One log line; `keys` ("pod", "job", "node") become JSON fields, or " key=value" in text.
void Log(int level, const std::string& msg, const LogKeys& keys = {}) {
  if (level < g_level) return;
  static const char* kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  static const char* kJsonNames[] = {"debug", "info", "warning", "error"};
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  if (g_json) {
    nlohmann::ordered_json j = {
        {"ts", buf}, {"level", kJsonNames[level]}, {"logger", "nvl72-extender"}, {"msg", msg}};
    for (const auto& [k, v] : keys) j[k] = v;
    std::string line =
        j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return;
  }
  std::string line = msg;
  for (const auto& [k, v] : keys) line.append(" ").append(k).append("=").append(v);
  std::fprintf(stderr, "%s %s nvl72-extender: %s\n", buf, kNames[level], line.c_str());
}

}  // namespace

namespace nvl72::extender {
namespace {

// Parses the flags and sets the log level and format. An exit code when there is nothing more to
// do: bad flags (2), --help or --version (0).
std::optional<int> ParseFlagsAndSetUpLogging(const std::vector<std::string>& args, Flags* out) {
  auto flags = ParseFlags(args);
  if (!flags.ok()) {
    std::cerr << "nvl72-extender: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout << Usage();
    return 0;
  }
  if (flags->version) {
    std::cout << "nvl72-extender " << NVL72_VERSION_STRING << "\n";
    return 0;
  }
  g_json = flags->log_format == "json";
  g_level = flags->log_level == "debug"     ? 0
            : flags->log_level == "info"    ? 1
            : flags->log_level == "warning" ? 2
                                            : 3;
  *out = std::move(*flags);
  return std::nullopt;
}

// Blocks SIGINT and SIGTERM (returned, for sigtimedwait) and ignores SIGPIPE.
sigset_t BlockShutdownSignals() {
  // Signals are taken synchronously by the main thread; every other thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return sigs;
}

// Loads the kube config into `*config` and makes a client whose credentials the API server accepts.
// nullptr (the reason logged) if any step fails.
std::unique_ptr<kube::HttpClient> ConnectToApiServer(const Flags& flags, kube::Config* config) {
  StatusOr<kube::Config> loaded = flags.kubeconfig.empty()
                                      ? kube::InClusterConfig()
                                      : kube::LoadKubeconfig(flags.kubeconfig, flags.context);
  if (!loaded.ok()) {
    Log(3, "kube config: " + loaded.status().ToString());
    return nullptr;
  }
  *config = std::move(*loaded);
  config->user_agent = std::string("nvl72-extender/") + NVL72_VERSION_STRING;
  auto client = kube::HttpClient::Create(*config);
  if (!client.ok()) {
    Log(3, "kube client: " + client.status().ToString());
    return nullptr;
  }
  // A wrong or revoked token would leave the informers retrying (and /readyz 503) without a word.
  if (Status s = kube::CheckCredentials(client->get(), kube::kNodes); !s.ok()) {
    Log(3,
        "the API server rejected our credentials (" + config->DebugString() + "): " + s.ToString());
    return nullptr;
  }
  return std::move(*client);
}

ClusterCacheOptions MakeCacheOptions(const Flags& flags) {
  ClusterCacheOptions cache_options;
  cache_options.view.spares_per_domain = flags.extender.spares_per_domain;
  cache_options.view.cluster.domain_label = flags.domain_label;
  cache_options.view.cluster.domain_label_fallback = flags.domain_label_fallback;
  cache_options.view.cluster.gpu_resource = flags.extender.gpu_resource;
  cache_options.min_rebuild_interval = std::chrono::milliseconds(flags.min_rebuild_interval_ms);
  // A token revoked or expired while we run, RBAC taken away, the API server gone: the informers
  // retry with backoff and keep their caches; say so (counts: nvl72_extender_watch_errors_total).
  cache_options.on_informer_error = [](const kube::ResourceRef& r, const Status& s, int64_t n) {
    const kube::InformerErrorSeverity sev = kube::InformerErrorSeverityOf(s, n);
    if (sev != kube::InformerErrorSeverity::kNone)
      Log(static_cast<int>(sev), kube::DescribeInformerError(r, s, n));
  };
  return cache_options;
}

// Without the NVL72Job CRD the extender still works from pod labels/annotations (e.g. before the
// operator is installed); it does not pick the CRD up later without a restart.
void DisableJobsIfCrdMissing(kube::Client* client, ClusterCacheOptions* cache_options) {
  kube::ListOptions probe;
  probe.limit = 1;
  auto jobs = client->List(cache_options->jobs_resource, "", probe);
  if (!jobs.ok() && kube::IsNotFound(jobs.status())) {
    Log(2, "NVL72Job CRD not served (" + jobs.status().message() +
               "): gang ranks come from pod annotations only, no node counts as reserved");
    cache_options->watch_jobs = false;
  }
}

void LogServing(const Flags& flags, const Server& server, const kube::Config& config) {
  Log(1, std::string("serving ") + (server.tls() ? "https" : "http") + "://" + flags.server.host +
             ":" + std::to_string(server.port()) + flags.server.prefix +
             "/{filter,prioritize,bind,preempt}" + " policy=" + flags.extender.policy +
             " spares-per-domain=" + std::to_string(flags.extender.spares_per_domain) +
             " keep-off-spares=" + (flags.extender.keep_off_spares ? "true" : "false") +
             " api=" + config.DebugString());
}

void LogSynced(const ClusterCache& cache) {
  const auto view = cache.View();
  Log(1, "caches synced: " + std::to_string(view->state.snapshot().nodes.size()) +
             " GPU nodes in " + std::to_string(view->state.snapshot().domains.size()) +
             " domains, " + std::to_string(view->state.reservations().size()) + " reservations");
}

// Returns on SIGINT or SIGTERM. Meanwhile, once a second: logs the first sync of the caches and
// exports the cache's counters.
void WaitForShutdownSignal(const sigset_t& sigs, const ClusterCache& cache, Metrics& metrics) {
  bool was_ready = false;
  int64_t rebuilds = 0;
  for (;;) {
    timespec tick{1, 0};
    const int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      Log(1, std::string("signal ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ", shutting down");
      return;
    }
    if (!was_ready && cache.Ready()) {
      was_ready = true;
      LogSynced(cache);
    }
    const int64_t r = cache.rebuilds();
    if (r > rebuilds) {
      metrics.IncViewRebuilds(r - rebuilds);
      rebuilds = r;
    }
    for (const auto& inf : cache.Informers())
      metrics.SetInformer(inf.resource, inf.stats, inf.objects);
  }
}

// Starts the server and the caches, serves until SIGINT or SIGTERM, then shuts down. The exit code.
int Serve(const Flags& flags, const kube::Config& config, Extender* extender,
          kube::HttpClient* client, const ClusterCacheOptions& cache_options,
          const sigset_t& sigs) {
  Metrics metrics;
  client->SetRequestObserver([&metrics](std::string_view verb, int code, double seconds) {
    metrics.ObserveApiRequest(verb, code, seconds);
  });
  ClusterCache cache(client, kube::RealClock(), cache_options);
  Service service(extender, &cache, client, &metrics);
  service.SetLog([](int level, const std::string& msg, const Service::LogKeys& keys) {
    Log(level, msg, keys);
  });
  Server server(flags.server, &service, &metrics);
  if (Status s = server.Start(); !s.ok()) {
    Log(3, "listen: " + s.ToString());
    return 1;
  }
  cache.Start();
  LogServing(flags, server, config);
  WaitForShutdownSignal(sigs, cache, metrics);
  // Keep-alive connections of the scheduler hold their workers until they idle out: give in-flight
  // requests a few seconds, then leave.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    Log(1, "shutdown grace period over, exiting");
    std::_Exit(0);
  }).detach();
  server.Stop();
  cache.Stop();
  return 0;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Flags flags;
  if (std::optional<int> done = ParseFlagsAndSetUpLogging(args, &flags)) return *done;
  const sigset_t sigs = BlockShutdownSignals();
  auto extender = Extender::Create(flags.extender);
  if (!extender.ok()) {
    std::cerr << "nvl72-extender: " << extender.status().message() << "\n";
    return 2;
  }
  kube::Config config;
  std::unique_ptr<kube::HttpClient> client = ConnectToApiServer(flags, &config);
  if (client == nullptr) return 1;
  ClusterCacheOptions cache_options = MakeCacheOptions(flags);
  DisableJobsIfCrdMissing(client.get(), &cache_options);
  return Serve(flags, config, extender->get(), client.get(), cache_options, sigs);
}

}  // namespace
}  // namespace nvl72::extender

int main(int argc, char** argv) {
  try {
    return nvl72::extender::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "nvl72-extender: fatal: " << e.what() << "\n";
    return 1;
  }
}
