// One nvl72-sim run: load and check the trace, build every requested policy, and simulate each on
// the same trace, failure timeline and seed.
//
// Errors are InvalidArgument for bad input (unreadable or malformed trace, job larger than the
// cluster, unknown policy) and Internal for a policy that returned an invalid placement.
// Thread-safety: pure function of its arguments.
#pragma once

#include <vector>

#include "common/status.h"
#include "sim/flags.h"
#include "sim/metrics.h"

namespace nvl72::sim {

struct RunReport {
  SimConfig config;
  std::vector<std::string> policies;   // in the order run
  int64_t jobs = 0;                    // jobs replayed (after --max-jobs)
  double trace_span_s = 0;             // last - first submission, after --load
  double offered_gpu_hours = 0;        // sum of duration x GPUs
  std::vector<PolicyMetrics> results;  // parallel to `policies`
};

StatusOr<RunReport> RunSimulation(const SimConfig& config);

// Same, on an already parsed trace (tests); applies --load and --max-jobs to a copy.
StatusOr<RunReport> RunSimulationOnTrace(const SimConfig& config, Trace trace);

}  // namespace nvl72::sim
