// Command-line options of nvl72-operator.
// Thread-safety: values; ParseOptions is a pure function.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace nvl72::op {

struct Options {
  std::string kubeconfig;  // "" -> in-cluster config, else $KUBECONFIG
  std::string ns;          // namespace of watched NVL72Jobs; "" = all namespaces
  std::string domain_label = "nvidia.com/gpu.clique";
  std::string domain_label_fallback;
  std::string gpu_resource = "nvidia.com/gpu";
  int spares_per_domain = 2;
  std::string policy = "nvl72";
  int workers = 4;
  int master_port = 29500;
  int admission_resync_seconds = 30;  // safety-net admission pass period
  bool leader_elect = false;
  std::string lease_name = "nvl72-operator";
  std::string lease_namespace = "kube-system";
  std::string identity;  // "" -> hostname_pid
  std::string metrics_addr = "0.0.0.0:8080";  // "" or "0" disables
  std::string health_addr = "0.0.0.0:8081";   // "" or "0" disables
  std::string log_level = "info";              // debug | info | warning | error
  std::string log_format = "text";             // text | json
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
