// nvl72-extender: the kube-scheduler HTTP extender of nvl72-operator. See docs/extender.md.
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
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
  for (const auto& [k, v] : keys) line += " " + k + "=" + v;
  std::fprintf(stderr, "%s %s nvl72-extender: %s\n", buf, kNames[level], line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nvl72;
  using namespace nvl72::extender;
  std::vector<std::string> args(argv + 1, argv + argc);
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

  // Signals are taken synchronously by the main thread; every other thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto extender = Extender::Create(flags->extender);
  if (!extender.ok()) {
    std::cerr << "nvl72-extender: " << extender.status().message() << "\n";
    return 2;
  }
  StatusOr<kube::Config> config = flags->kubeconfig.empty()
                                      ? kube::InClusterConfig()
                                      : kube::LoadKubeconfig(flags->kubeconfig, flags->context);
  if (!config.ok()) {
    Log(3, "kube config: " + config.status().ToString());
    return 1;
  }
  config->user_agent = std::string("nvl72-extender/") + NVL72_VERSION_STRING;
  auto client = kube::HttpClient::Create(*config);
  if (!client.ok()) {
    Log(3, "kube client: " + client.status().ToString());
    return 1;
  }

  // A wrong or revoked token would leave the informers retrying (and /readyz 503) without a word.
  if (Status s = kube::CheckCredentials(client->get(), kube::kNodes); !s.ok()) {
    Log(3,
        "the API server rejected our credentials (" + config->DebugString() + "): " + s.ToString());
    return 1;
  }
  ClusterCacheOptions cache_options;
  cache_options.view.spares_per_domain = flags->extender.spares_per_domain;
  cache_options.view.cluster.domain_label = flags->domain_label;
  cache_options.view.cluster.domain_label_fallback = flags->domain_label_fallback;
  cache_options.view.cluster.gpu_resource = flags->extender.gpu_resource;
  cache_options.min_rebuild_interval = std::chrono::milliseconds(flags->min_rebuild_interval_ms);
  // A token revoked or expired while we run, RBAC taken away, the API server gone: the informers
  // retry with backoff and keep their caches; say so (counts: nvl72_extender_watch_errors_total).
  cache_options.on_informer_error = [](const kube::ResourceRef& r, const Status& s, int64_t n) {
    const kube::InformerErrorSeverity sev = kube::InformerErrorSeverityOf(s, n);
    if (sev != kube::InformerErrorSeverity::kNone)
      Log(static_cast<int>(sev), kube::DescribeInformerError(r, s, n));
  };
  // Without the NVL72Job CRD the extender still works from pod labels/annotations (e.g. before the
  // operator is installed); it does not pick the CRD up later without a restart.
  {
    kube::ListOptions probe;
    probe.limit = 1;
    auto jobs = (*client)->List(cache_options.jobs_resource, "", probe);
    if (!jobs.ok() && kube::IsNotFound(jobs.status())) {
      Log(2, "NVL72Job CRD not served (" + jobs.status().message() +
                 "): gang ranks come from pod annotations only, no node counts as reserved");
      cache_options.watch_jobs = false;
    }
  }
  Metrics metrics;
  (*client)->SetRequestObserver([&metrics](std::string_view verb, int code, double seconds) {
    metrics.ObserveApiRequest(verb, code, seconds);
  });
  ClusterCache cache(client->get(), kube::RealClock(), cache_options);
  Service service(extender->get(), &cache, client->get(), &metrics);
  service.SetLog([](int level, const std::string& msg, const Service::LogKeys& keys) {
    Log(level, msg, keys);
  });
  Server server(flags->server, &service, &metrics);
  if (Status s = server.Start(); !s.ok()) {
    Log(3, "listen: " + s.ToString());
    return 1;
  }
  cache.Start();
  Log(1, std::string("serving ") + (server.tls() ? "https" : "http") + "://" + flags->server.host +
             ":" + std::to_string(server.port()) + flags->server.prefix +
             "/{filter,prioritize,bind,preempt}" + " policy=" + flags->extender.policy +
             " spares-per-domain=" + std::to_string(flags->extender.spares_per_domain) +
             " keep-off-spares=" + (flags->extender.keep_off_spares ? "true" : "false") +
             " api=" + config->DebugString());

  bool was_ready = false;
  int64_t rebuilds = 0;
  for (;;) {
    timespec tick{1, 0};
    const int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      Log(1, std::string("signal ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ", shutting down");
      break;
    }
    if (!was_ready && cache.Ready()) {
      was_ready = true;
      const auto view = cache.View();
      Log(1, "caches synced: " + std::to_string(view->state.snapshot().nodes.size()) +
                 " GPU nodes in " + std::to_string(view->state.snapshot().domains.size()) +
                 " domains, " + std::to_string(view->state.reservations().size()) +
                 " reservations");
    }
    const int64_t r = cache.rebuilds();
    if (r > rebuilds) {
      metrics.IncViewRebuilds(r - rebuilds);
      rebuilds = r;
    }
    for (const auto& inf : cache.Informers())
      metrics.SetInformer(inf.resource, inf.stats, inf.objects);
  }
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
