// Command-line flags of nvl72-extender. Parsing is separate from main() so that it is unit-tested.
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler-plugin/extender.h"
#include "scheduler-plugin/server.h"

namespace nvl72::extender {

struct Flags {
  std::string kubeconfig;  // "" = in-cluster config
  std::string context;
  ServerOptions server;
  ExtenderOptions extender;
  std::string domain_label = "nvidia.com/gpu.clique";
  std::string domain_label_fallback;
  int min_rebuild_interval_ms = 100;
  std::string log_level = "info";   // debug | info | warning | error
  std::string log_format = "text";  // text | json (one JSON object per line)
  bool help = false;
  bool version = false;
};

// Parses argv (argv[0] is skipped). Accepts "--flag value" and "--flag=value"; booleans also bare
// ("--keep-off-spares") or "=true|false". Errors name the flag.
StatusOr<Flags> ParseFlags(const std::vector<std::string>& args);

// Splits "host:port", "[v6]:port" or ":port" (host 0.0.0.0).
Status ParseListen(const std::string& value, std::string* host, int* port);

std::string Usage();

}  // namespace nvl72::extender
