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

// Which policies defragment (--defrag). kOurs: only the policy the operator runs
// (placement::PolicyNames().front(), nvl72): the baselines users would otherwise run (Kueue- or
// Volcano-like placement) have no defragmentation, the operator has it. kAll: every policy, to
// separate the effect of the placement from that of the defragmentation.
enum class DefragScope { kOff, kOurs, kAll };
std::string_view DefragScopeName(DefragScope scope);  // "off", "on", "all"

struct SimConfig {
  std::string trace_path;  // --trace (required unless --mix)
  std::string mix;         // --mix: "llm" replaces the trace by the synthetic mix (sim/synthetic.h)
  double mix_days = 60;    // --mix-days: arrivals of the synthetic mix span this many days
  SimOptions options;      // cluster, speed, failure model, spares, seed, defrag budget
  DefragScope defrag = DefragScope::kOurs;  // --defrag; sets options.defrag.enabled per policy
  double load = 1.0;                        // --load: submission times are divided by it
  int max_jobs = 0;                         // --max-jobs: 0 = all
  std::vector<std::string> policies;        // --policies: empty = placement::PolicyNames()
  bool json = false;                        // --json
  bool help = false;                        // --help
};

// `args` excludes the program name.
StatusOr<SimConfig> ParseFlags(std::span<const std::string_view> args);

std::string HelpText();

}  // namespace nvl72::sim
