// Benchmarks of nvl72::kube (Google Benchmark). Run: build/<dir>/bench/kube_bench
//  - BM_InformerSync: List+cache of 10,000 Nodes + 20,000 Pods (realistic shapes) from FakeClient;
//    reports objects/s and the resident-set growth of holding the caches.
//  - BM_WatchDecode: JsonStreamDecoder + ParseWatchEvent on a stream of Pod MODIFIED events in
//    16 KiB chunks (what HttpClient::Watch does per chunk); events/s and bytes/s.
//  - BM_InformerDispatch: end-to-end FakeClient write -> watch fan-out -> informer cache + handler.
//  - BM_InformerSyncRealServer/<transform>: only with NVL72_KUBECONFIG set (bench/cache_memory.sh
//    --kube-bench does it): the same two informers against a REAL kube-apiserver through
//    HttpClient (TLS, paged lists of 500, JSON decoded from the wire); time to sync the Nodes and
//    the Pods, and the RSS added, with objects kept as sent (0) or without managedFields (1,
//    kube::DropManagedFields), and the Nodes alone (2). Run each variant in its own process: RSS
//    growth is only honest once.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "kube/config.h"
#include "kube/fake_client.h"
#include "kube/http_client.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/watch_decoder.h"

namespace nvl72::kube {
namespace {

long RssKb() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(f);
  return pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}

Json MakeNode(int i) {
  std::string name = "rack" + std::to_string(i / 18) + "-node" + std::to_string(i % 18);
  return Json::parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name + R"(",
    "labels":{"kubernetes.io/hostname":")" +
                     name + R"(","nvidia.com/gpu.clique":"cluster-a.)" + std::to_string(i / 18) +
                     R"(","nvidia.com/gpu.product":"NVIDIA-GB200",
      "node.kubernetes.io/instance-type":"gb200-nvl72","topology.kubernetes.io/zone":"zone-a"},
    "annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"}},
    "spec":{"podCIDR":"10.1.0.0/24"},
    "status":{"capacity":{"cpu":"144","memory":"884Gi","nvidia.com/gpu":"4","pods":"110"},
      "allocatable":{"cpu":"142","memory":"880Gi","nvidia.com/gpu":"4","pods":"110"},
      "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status",
        "lastHeartbeatTime":"2026-12-02T09:00:00Z","lastTransitionTime":"2026-12-02T08:00:00Z"},
        {"type":"MemoryPressure","status":"False","reason":"KubeletHasSufficientMemory",
        "lastHeartbeatTime":"2026-12-02T09:00:00Z","lastTransitionTime":"2026-12-02T08:00:00Z"}],
      "addresses":[{"type":"InternalIP","address":"10.0.0.1"},{"type":"Hostname","address":")" +
                     name + R"("}],
      "nodeInfo":{"kubeletVersion":"v1.34.4","architecture":"arm64","operatingSystem":"linux"}}})");
}

Json MakePod(int i) {
  std::string name = "job" + std::to_string(i / 16) + "-" + std::to_string(i % 16);
  return Json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(",
    "namespace":"team-)" +
                     std::to_string(i % 20) + R"(","labels":{"nvl72.dev/job":"job)" +
                     std::to_string(i / 16) + R"(","nvl72.dev/rank":")" + std::to_string(i % 16) +
                     R"("},
    "annotations":{"nvl72.dev/node":"rack1-node2"},
    "ownerReferences":[{"apiVersion":"nvl72.dev/v1alpha1","kind":"NVL72Job","name":"job1","uid":"abc","controller":true}]},
    "spec":{"schedulerName":"nvl72-scheduler","nodeName":"rack)" +
                     std::to_string(i % 500) + R"(-node3",
      "containers":[{"name":"trainer","image":"nvcr.io/nvidia/pytorch:25.01-py3","command":["torchrun"],
        "args":["--nnodes=16","--nproc-per-node=4","train.py"],
        "env":[{"name":"RANK","value":"3"},{"name":"WORLD_SIZE","value":"64"},{"name":"MASTER_ADDR","value":"job1-0.job1"}],
        "resources":{"limits":{"nvidia.com/gpu":"4"},"requests":{"cpu":"100","memory":"800Gi","nvidia.com/gpu":"4"}}}],
      "tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]},
    "status":{"phase":"Running","podIP":"10.1.2.3","startTime":"2026-12-02T09:00:00Z",
      "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-02T09:00:00Z"}]}})");
}

void BM_InformerSync(benchmark::State& state) {
  const int nodes = 10000, pods = 20000;
  FakeClient client;
  for (int i = 0; i < nodes; ++i) client.Seed(kNodes, MakeNode(i));
  for (int i = 0; i < pods; ++i) client.Seed(kPods, MakePod(i));
  long rss_growth = 0;
  for (auto _ : state) {
    long before = RssKb();
    Informer node_inf(&client, RealClock(), InformerOptions{.resource = kNodes});
    Informer pod_inf(&client, RealClock(), InformerOptions{.resource = kPods});
    pod_inf.AddIndexer("node", PodNodeNameIndex);
    node_inf.Start();
    pod_inf.Start();
    if (!node_inf.WaitForSync(std::chrono::minutes(5)) ||
        !pod_inf.WaitForSync(std::chrono::minutes(5))) {
      state.SkipWithError("informer did not sync");
      return;
    }
    // The first iteration shows the real growth; later ones reuse memory the allocator kept.
    rss_growth = std::max(rss_growth, RssKb() - before);
    benchmark::DoNotOptimize(pod_inf.Size() + node_inf.Size());
    state.PauseTiming();
    node_inf.Stop();
    pod_inf.Stop();
    state.ResumeTiming();
  }
  state.counters["objects/s"] = benchmark::Counter(static_cast<double>(nodes + pods),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.counters["cache_rss_MiB"] = static_cast<double>(rss_growth) / 1024.0;
}
BENCHMARK(BM_InformerSync)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_InformerSyncRealServer(benchmark::State& state) {
  const char* kubeconfig = std::getenv("NVL72_KUBECONFIG");
  auto config = LoadKubeconfig(kubeconfig != nullptr ? kubeconfig : "");
  if (!config.ok()) {
    state.SkipWithError(config.status().ToString().c_str());
    return;
  }
  auto client = HttpClient::Create(*config);
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  const bool slim = state.range(0) == 1;
  const bool nodes_only = state.range(0) == 2;
  long rss_growth = 0;
  double node_seconds = 0, pod_seconds = 0;
  size_t nodes = 0, pods = 0;
  for (auto _ : state) {
    const long before = RssKb();
    InformerOptions no{.resource = kNodes};
    InformerOptions po{.resource = kPods};
    if (slim) no.transform = po.transform = DropManagedFields;
    Informer node_inf(client->get(), RealClock(), no);
    Informer pod_inf(client->get(), RealClock(), po);
    pod_inf.AddIndexer("node", PodNodeNameIndex);
    const auto t0 = std::chrono::steady_clock::now();
    node_inf.Start();
    if (!nodes_only) pod_inf.Start();
    std::thread timer([&] {
      node_inf.WaitForSync(std::chrono::minutes(5));
      node_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    const bool synced = nodes_only || pod_inf.WaitForSync(std::chrono::minutes(5));
    pod_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    timer.join();
    if (!synced || !node_inf.HasSynced()) {
      state.SkipWithError("informer did not sync");
      return;
    }
    rss_growth = std::max(rss_growth, RssKb() - before);
    nodes = node_inf.Size();
    pods = pod_inf.Size();
    state.PauseTiming();
    node_inf.Stop();
    if (!nodes_only) pod_inf.Stop();
    state.ResumeTiming();
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["pods"] = static_cast<double>(pods);
  state.counters["nodes_synced_s"] = node_seconds;
  state.counters["all_synced_s"] = pod_seconds;
  state.counters["cache_rss_MiB"] = static_cast<double>(rss_growth) / 1024.0;
}
[[maybe_unused]] const bool kRealServerRegistered = [] {
  if (std::getenv("NVL72_KUBECONFIG") != nullptr) {
    benchmark::RegisterBenchmark("BM_InformerSyncRealServer", BM_InformerSyncRealServer)
        ->Arg(0)
        ->Arg(1)
        ->Arg(2)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->UseRealTime();
  }
  return true;
}();

void BM_WatchDecode(benchmark::State& state) {
  std::string stream;
  const int events = 2000;
  for (int i = 0; i < events; ++i) {
    stream += Json{{"type", "MODIFIED"}, {"object", MakePod(i)}}.dump();
    stream += '\n';
  }
  const size_t chunk = size_t{16} * 1024;
  int64_t decoded = 0;
  for (auto _ : state) {
    JsonStreamDecoder d;
    for (size_t off = 0; off < stream.size(); off += chunk) {
      Status s = d.Feed(std::string_view(stream).substr(off, chunk), [&](Json&& v) {
        auto ev = ParseWatchEvent(std::move(v));
        benchmark::DoNotOptimize(ev);
        ++decoded;
        return Status::Ok();
      });
      if (!s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        return;
      }
    }
  }
  state.SetItemsProcessed(decoded);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(stream.size()));
}
BENCHMARK(BM_WatchDecode)->Unit(benchmark::kMillisecond);

void BM_InformerDispatch(benchmark::State& state) {
  FakeClient client;
  const int pods = 1000;
  for (int i = 0; i < pods; ++i) client.Seed(kPods, MakePod(i));
  Informer inf(&client, RealClock(), InformerOptions{.resource = kPods});
  inf.AddIndexer("node", PodNodeNameIndex);
  std::atomic<int64_t> handled{0};
  inf.AddEventHandler(
      EventHandlers{nullptr, [&](const ObjectPtr&, const ObjectPtr&) { ++handled; }, nullptr});
  inf.Start();
  if (!inf.WaitForSync(std::chrono::minutes(1))) {
    state.SkipWithError("no sync");
    return;
  }
  while (client.NumWatches() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int64_t sent = 0;
  for (auto _ : state) {
    const int batch = 2000;
    int64_t target = handled.load() + batch;
    for (int i = 0; i < batch; ++i) {
      Json p = MakePod(i % pods);
      auto r = client.Patch(kPods, Namespace(p), Name(p), PatchType::kMerge,
                            {{"metadata", {{"annotations", {{"seq", std::to_string(sent + i)}}}}}});
      if (!r.ok()) {
        state.SkipWithError(r.status().ToString().c_str());
        return;
      }
    }
    sent += batch;
    while (handled.load() < target) std::this_thread::yield();
  }
  state.SetItemsProcessed(sent);
  inf.Stop();
}
BENCHMARK(BM_InformerDispatch)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace nvl72::kube

BENCHMARK_MAIN();
