// Synthetic LLM-era job mix (--mix llm): a seeded trace in which rack-sized gangs carry most of the
// work, for the regimes the ITP traces do not cover (their largest job is 64 GPUs).
//
// The recipe (docs/simulator.md, "Failure-heavy regimes" > "The rack-sized job mix") is a table of
// job classes: GPUs, nodes per segment, mean duration and share of the offered GPU-hours. Each
// class arrives as a Poisson process whose rate makes the whole mix offer `load` x the cluster's
// GPUs on average over `days`; durations are exponential. Every draw comes from one
// DeterministicRandom stream per class, so a seed gives the same trace on every platform.
// Thread-safety: pure function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/trace.h"

namespace nvl72::sim {

struct MixClass {
  const char* name;       // job id prefix
  int gpus;               // GPUs of one job
  int segment_nodes;      // TraceJob::segment_nodes (0: the engine's rule)
  double mean_hours;      // mean duration (exponential)
  double gpu_hour_share;  // share of the offered GPU-hours; the shares sum to 1
};

// The LLM-era recipe for nodes of `gpus_per_node` GPUs (4 on GB200): 16- and 18-node gangs in
// one rack each, 32- and 64-node jobs in segments of 16, and small jobs.
std::vector<MixClass> LlmMixRecipe(int gpus_per_node);

struct MixOptions {
  int cluster_gpus = 576;
  int gpus_per_node = 4;
  double days = 60;  // arrivals in [0, days)
  double load =
      0.85;  // offered GPU-hours / (cluster GPUs x hours); cluster04 offers ~0.85 on 8 racks
  uint64_t seed = 1;
};

// Seed of the mix's per-class streams: apart from the node and rack outage streams of the same run
// seed, so the workload does not repeat the failure draws (class c would otherwise share node c's).
uint64_t MixSeed(uint64_t seed);

// The trace ("file" is "synthetic:llm"), sorted in arrival order; `line` numbers the jobs from 2
// like a CSV file would.
Trace MakeMixTrace(const std::vector<MixClass>& recipe, const MixOptions& options);

}  // namespace nvl72::sim
