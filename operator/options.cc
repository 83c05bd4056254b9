#include "operator/options.h"

#include <charconv>
#include <functional>
#include <map>

#include "operator/compute_domains.h"
#include "operator/pod_groups.h"
#include "placement/policy.h"

namespace nvl72::op {
namespace {

bool ParseInt(const std::string& s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string Usage() {
  return R"(nvl72-operator: admits NVL72Job gangs all-or-nothing into one NVLink domain.

Usage: nvl72-operator [flags]

  --kubeconfig PATH            kubeconfig file (default: in-cluster config, else $KUBECONFIG)
  --namespace NS               namespace of watched NVL72Jobs (default: all namespaces)
  --domain-label KEY           node label naming the NVLink domain (default nvidia.com/gpu.clique)
  --domain-label-fallback KEY  node label used when the domain label is missing (default none)
  --gpu-resource NAME          GPU extended resource (default nvidia.com/gpu)
  --spares-per-domain N        empty nodes per domain kept for in-place recovery (default 2)
  --spare-reserve MODE         soft: a gang that fits nowhere else takes the spares instead of
                               waiting; hard: new gangs never take them (default soft)
  --policy NAME                placement policy: nvl72 | spread | first-fit | domain-best-fit (default nvl72)
  --workers N                  concurrent reconcile workers (default 4)
  --master-port N              MASTER_PORT given to rank pods (default 29500)
  --admission-resync-seconds N period of the safety-net admission pass (default 30; 0 = off)
  --leader-elect[=BOOL]        run leader election on a Lease (default false)
  --lease-name NAME            Lease name (default nvl72-operator)
  --lease-namespace NS         Lease namespace (default kube-system)
  --identity ID                leader election identity (default hostname_pid)
  --metrics-addr HOST:PORT     Prometheus /metrics (default 0.0.0.0:8080; "0" disables)
  --metrics-tls-cert FILE      serve /metrics over HTTPS with this PEM certificate (needs
                               --metrics-tls-key)
  --metrics-tls-key FILE       PEM private key of --metrics-tls-cert
  --metrics-client-ca FILE     /metrics only for clients with a certificate signed by this PEM CA
                               (mTLS; needs --metrics-tls-cert)
  --health-addr HOST:PORT      /healthz and /readyz (default 0.0.0.0:8081; "0" disables)
  --health-stall-seconds N     /healthz fails when keys wait in the work queue and no reconcile
                               finished for N seconds (stuck workers; default 300; 0 = off)
  --log-level LEVEL            debug | info | warning | error (default info)
  --recovery-wait-seconds N    no healthy node left in a job's domain: wait this long before moving the
                               gang (default: 3 x the job's notReadyGraceSeconds; a job's
                               spec.recovery.waitForDomainSeconds wins)
  --cordoned-ranks MODE        ranks on cordoned nodes: keep (stay) | move (gracefully, to a free node
                               of the same domain) (default keep); cordoned nodes never get new work
  --defrag[=BOOL]              move preemptible jobs so a waiting Required gang fits (default true)
  --defrag-max-concurrent-moves N  jobs being moved by defragmentation at once (default 2)
  --defrag-min-interval-seconds N  minimum time between two defragmentation plans (default 30)
  --defrag-cooldown-seconds N  a job moved by defragmentation is not moved again within this (default 600)
  --defrag-grace-seconds N     deletion grace period of a moved job's pods, for checkpointing (default 30)
  --defrag-move-timeout-seconds N  a move whose ranks do not all run again within this ends as
                               MoveTimedOut and frees the budget (default 600)
  --unschedulable-replan-seconds N  a rank pod kube-scheduler refuses on its planned node for this
                               long releases its gang's reservation, and the gang is planned again
                               without that node (doubles with each re-plan; default 60)
  --stuck-seconds N            a job holding a reservation whose ranks have not all run for this long
                               is stuck: a Warning event "Stuck" with the Running condition's reason,
                               counted in nvl72_operator_stuck_jobs{reason} (default 300; 0 = off)
  --max-replans N              re-plans of one job (per spec generation) before it waits for a spec
                               change (default 3)
  --log-format FORMAT          text | json (one JSON object per line; default text)
  --pod-groups MODE            stock gang scheduling: each gang segment gets a scheduling.k8s.io
                               PodGroup (gang minCount = segment size, topology constraint on the
                               domain label for Required gangs) that its rank pods join. auto: when
                               the API server serves PodGroups (asked again every minute); on:
                               always (refuses to start without them); off: never (default auto)
  --compute-domains MODE       the default of spec.fabric: each gang segment gets an IMEX
                               ComputeDomain (resource.nvidia.com/v1beta1, NVIDIA's DRA driver) and
                               every rank pod its channel claim. auto: when the API server serves
                               ComputeDomains (asked again every 10 s); on: always (refuses to
                               start without the CRD); off: never (default auto)
  --help                       this text
  --version                    print the version
)";
}

namespace {

// The flags (without their "--"): where each one's value goes.
struct OptionTable {
  std::map<std::string, std::string*> strings;
  std::map<std::string, int*> ints;
  std::map<std::string, bool*> bools;
};

// The table of flags, writing into `o`; --spare-reserve into `*spare_reserve` (checked and
// converted after parsing).
OptionTable MakeOptionTable(Options& o, std::string* spare_reserve) {
  OptionTable t;
  t.strings = {{"kubeconfig", &o.kubeconfig},
               {"namespace", &o.ns},
               {"domain-label", &o.domain_label},
               {"domain-label-fallback", &o.domain_label_fallback},
               {"gpu-resource", &o.gpu_resource},
               {"policy", &o.policy},
               {"lease-name", &o.lease_name},
               {"lease-namespace", &o.lease_namespace},
               {"identity", &o.identity},
               {"metrics-addr", &o.metrics_addr},
               {"metrics-tls-cert", &o.metrics_tls_cert},
               {"metrics-tls-key", &o.metrics_tls_key},
               {"metrics-client-ca", &o.metrics_client_ca},
               {"health-addr", &o.health_addr},
               {"log-level", &o.log_level},
               {"cordoned-ranks", &o.cordoned_ranks},
               {"log-format", &o.log_format},
               {"pod-groups", &o.pod_groups},
               {"compute-domains", &o.compute_domains},
               {"spare-reserve", spare_reserve}};
  t.ints = {{"spares-per-domain", &o.spares_per_domain},
            {"workers", &o.workers},
            {"master-port", &o.master_port},
            {"admission-resync-seconds", &o.admission_resync_seconds},
            {"recovery-wait-seconds", &o.recovery_wait_seconds},
            {"defrag-max-concurrent-moves", &o.defrag_max_concurrent_moves},
            {"defrag-min-interval-seconds", &o.defrag_min_interval_seconds},
            {"defrag-cooldown-seconds", &o.defrag_cooldown_seconds},
            {"defrag-grace-seconds", &o.defrag_grace_seconds},
            {"defrag-move-timeout-seconds", &o.defrag_move_timeout_seconds},
            {"health-stall-seconds", &o.health_stall_seconds},
            {"unschedulable-replan-seconds", &o.unschedulable_replan_seconds},
            {"max-replans", &o.max_replans},
            {"stuck-seconds", &o.stuck_seconds}};
  t.bools = {{"leader-elect", &o.leader_elect},
             {"help", &o.help},
             {"version", &o.version},
             {"defrag", &o.defrag}};
  return t;
}

// A boolean flag: bare, "=true" or "=false".
Status SetBool(const std::string& name, bool has_value, const std::string& value, bool* dst) {
  if (!has_value || value == "true") {
    *dst = true;
  } else if (value == "false") {
    *dst = false;
  } else {
    return InvalidArgumentError("--" + name + ": expected true or false, got \"" + value + "\"");
  }
  return Status::Ok();
}

// The value of string or integer flag `name` (known to the table).
Status SetValue(const OptionTable& t, const std::string& name, const std::string& value) {
  if (auto s = t.strings.find(name); s != t.strings.end()) {
    *s->second = value;
  } else if (auto n = t.ints.find(name); n != t.ints.end()) {
    if (!ParseInt(value, n->second) || *n->second < 0) {
      return InvalidArgumentError("--" + name + ": expected a non-negative integer, got \"" +
                                  value + "\"");
    }
  } else {
    return InvalidArgumentError("unknown flag --" + name + " (see --help)");
  }
  return Status::Ok();
}

// Applies every flag of `args` through `t`, in order ("-h" sets `*help`); the first error.
Status ApplyArgs(const std::vector<std::string>& args, const OptionTable& t, bool* help) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h") {
      *help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) return InvalidArgumentError("unexpected argument \"" + a + "\"");
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (auto b = t.bools.find(name); b != t.bools.end()) {
      NVL72_RETURN_IF_ERROR(SetBool(name, has_value, value, b->second));
      continue;
    }
    if (t.strings.count(name) == 0 && t.ints.count(name) == 0) {
      return InvalidArgumentError("unknown flag --" + name + " (see --help)");
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return InvalidArgumentError("--" + name + " needs a value");
      value = args[++i];
    }
    NVL72_RETURN_IF_ERROR(SetValue(t, name, value));
  }
  return Status::Ok();
}

// The first checks, in order: the named choices and the numeric limits. Sets o->spare_reserve.
Status ValidateChoicesAndLimits(Options* o, const std::string& spare_reserve) {
  if (!placement::ParseSpareReserve(spare_reserve, &o->spare_reserve)) {
    return InvalidArgumentError("--spare-reserve: expected soft or hard, got \"" + spare_reserve +
                                "\"");
  }
  if (placement::MakePolicy(o->policy) == nullptr) {
    return InvalidArgumentError("--policy: unknown policy \"" + o->policy + "\"");
  }
  if (o->log_level != "debug" && o->log_level != "info" && o->log_level != "warning" &&
      o->log_level != "error") {
    return InvalidArgumentError("--log-level: expected debug, info, warning or error");
  }
  if (o->log_format != "text" && o->log_format != "json") {
    return InvalidArgumentError("--log-format: expected text or json");
  }
  if (o->workers < 1) return InvalidArgumentError("--workers: must be >= 1");
  if (!ParsePodGroupsMode(o->pod_groups)) {
    return InvalidArgumentError("--pod-groups: expected auto, on or off, got \"" + o->pod_groups +
                                "\"");
  }
  if (!ParseComputeDomainsMode(o->compute_domains)) {
    return InvalidArgumentError("--compute-domains: expected auto, on or off, got \"" +
                                o->compute_domains + "\"");
  }
  if (o->cordoned_ranks != "keep" && o->cordoned_ranks != "move") {
    return InvalidArgumentError("--cordoned-ranks: expected keep or move, got \"" +
                                o->cordoned_ranks + "\"");
  }
  if (o->defrag_move_timeout_seconds < 1) {
    return InvalidArgumentError("--defrag-move-timeout-seconds: must be >= 1");
  }
  if (o->unschedulable_replan_seconds < 1) {
    return InvalidArgumentError("--unschedulable-replan-seconds: must be >= 1");
  }
  if (o->max_replans < 0) return InvalidArgumentError("--max-replans: must be >= 0");
  if (o->defrag_max_concurrent_moves < 1) {
    return InvalidArgumentError("--defrag-max-concurrent-moves: must be >= 1");
  }
  return Status::Ok();
}

// The last checks, in order: the domain label, the listen addresses, TLS and leader election.
Status ValidateLabelAndEndpoints(const Options& o) {
  if (o.domain_label.empty()) return InvalidArgumentError("--domain-label: must not be empty");
  for (auto [flag, addr] :
       {std::pair{"--metrics-addr", &o.metrics_addr}, std::pair{"--health-addr", &o.health_addr}}) {
    std::string host;
    int port = 0;
    if (!addr->empty() && *addr != "0" && !SplitHostPort(*addr, &host, &port)) {
      return InvalidArgumentError(std::string(flag) + ": expected HOST:PORT, got \"" + *addr +
                                  "\"");
    }
  }
  if (o.metrics_tls_cert.empty() != o.metrics_tls_key.empty()) {
    return InvalidArgumentError("--metrics-tls-cert and --metrics-tls-key go together");
  }
  if (!o.metrics_client_ca.empty() && o.metrics_tls_cert.empty()) {
    return InvalidArgumentError(
        "--metrics-client-ca needs --metrics-tls-cert and --metrics-tls-key");
  }
  if (o.leader_elect && (o.lease_name.empty() || o.lease_namespace.empty())) {
    return InvalidArgumentError("--leader-elect needs --lease-name and --lease-namespace");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  std::string spare_reserve(placement::SpareReserveName(o.spare_reserve));
  NVL72_RETURN_IF_ERROR(ApplyArgs(args, MakeOptionTable(o, &spare_reserve), &o.help));
  if (o.help || o.version) return o;
  NVL72_RETURN_IF_ERROR(ValidateChoicesAndLimits(&o, spare_reserve));
  NVL72_RETURN_IF_ERROR(ValidateLabelAndEndpoints(o));
  return o;
}

bool SplitHostPort(const std::string& addr, std::string* host, int* port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) return false;
  std::string h = addr.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) h = "0.0.0.0";
  int p = 0;
  if (!ParseInt(addr.substr(colon + 1), &p) || p < 0 || p > 65535) return false;
  *host = h;
  *port = p;
  return true;
}

}  // namespace nvl72::op
