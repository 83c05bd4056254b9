// Command line of nvl72-sim: flags -> SimConfig, and the --help text.
//
// Every flag accepts "--name value" and "--name=value". A bad value is an InvalidArgument naming
// the flag, so main() can print one line and exit 2. Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/engine.h"

namespace nvl72::sim {

struct SimConfig {
  std::string trace_path;             // --trace (required)
  SimOptions options;                 // cluster, speed, failure model, spares, seed
  double load = 1.0;                  // --load: submission times are divided by it
  int max_jobs = 0;                   // --max-jobs: 0 = all
  std::vector<std::string> policies;  // --policies: empty = placement::PolicyNames()
  bool json = false;                  // --json
  bool help = false;                  // --help
};

// `args` excludes the program name.
StatusOr<SimConfig> ParseFlags(std::span<const std::string_view> args);

std::string HelpText();

}  // namespace nvl72::sim
