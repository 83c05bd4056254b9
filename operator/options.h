// Command-line options of nvl72-operator.
// Thread-safety: values; ParseOptions is a pure function.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "placement/policy.h"

namespace nvl72::op {

struct Options {
  std::string kubeconfig;  // "" -> in-cluster config, else $KUBECONFIG
  std::string ns;          // namespace of watched NVL72Jobs; "" = all namespaces
  std::string domain_label = "nvidia.com/gpu.clique";
  std::string domain_label_fallback;
  std::string gpu_resource = "nvidia.com/gpu";
  int spares_per_domain = 2;
  // hard: new gangs never take the spares; soft: a gang that fits nowhere else (or fills a domain's
  // free nodes exactly) takes them instead of waiting. See docs/simulator.md for the measurements.
  placement::SpareReserve spare_reserve = placement::SpareReserve::kSoft;
  std::string policy = "nvl72";
  int workers = 4;
  int master_port = 29500;
  int admission_resync_seconds = 30;  // safety-net admission pass period
  bool leader_elect = false;
  std::string lease_name = "nvl72-operator";
  std::string lease_namespace = "kube-system";
  std::string identity;                       // "" -> hostname_pid
  std::string metrics_addr = "0.0.0.0:8080";  // "" or "0" disables
  std::string health_addr = "0.0.0.0:8081";   // "" or "0" disables
  // /metrics over HTTPS (both PEM files set), and with a client CA only for clients with a
  // certificate signed by it (mTLS).
  std::string metrics_tls_cert;
  std::string metrics_tls_key;
  std::string metrics_client_ca;
  std::string log_level = "info";  // debug | info | warning | error
  // Recovery (issue 6). -1 = unset: a job without spec.recovery.waitForDomainSeconds waits
  // 3 x its notReadyGraceSeconds for a node in its domain before its gang moves.
  int recovery_wait_seconds = -1;
  std::string cordoned_ranks =
      "keep";  // keep | move (gracefully, when a node of the domain is free)
  // Defragmentation (issue 6): moves preemptible jobs so a waiting Required gang fits.
  bool defrag = true;
  int defrag_max_concurrent_moves = 2;   // jobs being moved at once (and per plan)
  int defrag_min_interval_seconds = 30;  // between two plans' moves
  int defrag_cooldown_seconds = 600;     // a moved job is not moved again within this
  int defrag_grace_seconds = 30;         // deletion grace of a moved job's pods (checkpointing)
  // A move whose ranks do not all run again this long after it began ends as MoveTimedOut and no
  // longer holds the budget (else one stuck job would stop defragmentation for good).
  int defrag_move_timeout_seconds = 600;
  // The safety net (operator/safety_net.h): a rank kube-scheduler refuses on its planned node for
  // this long releases its gang's reservation, which is planned again without that node; after
  // max_replans re-plans the job waits until its spec changes.
  int unschedulable_replan_seconds = 60;
  // A job holding a reservation whose ranks have not all run for this long is stuck: Warning event
  // "Stuck", nvl72_operator_stuck_jobs{reason}. 0 = off.
  int stuck_seconds = 300;
  int max_replans = 3;
  std::string log_format = "text";  // text | json
  // Stock gang scheduling (operator/pod_groups.h): auto | on | off.
  std::string pod_groups = "auto";
  // The default of spec.fabric (operator/compute_domains.h): auto | on | off.
  std::string compute_domains = "auto";
  // /healthz fails when keys are ready in the work queue but no reconcile finished for this long.
  int health_stall_seconds = 300;  // 0 = off
  bool help = false;
  bool version = false;
};

// Parses argv (flags as --name=value or --name value; booleans as --flag, --flag=true|false).
// Errors are kInvalidArgument naming the flag.
StatusOr<Options> ParseOptions(const std::vector<std::string>& args);
std::string Usage();
// Splits "host:port" ("[::1]:80", ":8080" -> host "0.0.0.0"). Returns false on a malformed value.
bool SplitHostPort(const std::string& addr, std::string* host, int* port);

}  // namespace nvl72::op
