#include "sim/synthetic.h"

#include <algorithm>
#include <string>

#include "sim/failure_model.h"

namespace nvl72::sim {

std::vector<MixClass> LlmMixRecipe(int gpus_per_node) {
  const int g = gpus_per_node;
  return {
      // Rack-sized expert- or tensor-parallel groups: 64 and 72 GPUs, one NVLink domain each.
      {"rack16", 16 * g, 16, 12, 0.30},
      {"rack18", 18 * g, 18, 12, 0.20},
      // Larger jobs in segments of 16 nodes (one per rack).
      {"multi32", 32 * g, 16, 24, 0.20},
      {"multi64", 64 * g, 16, 24, 0.10},
      // Small jobs: pods and 2-node gangs (fine-tuning, evaluation, development).
      {"small1", 1, 0, 2, 0.05},
      {"small2", 2, 0, 2, 0.05},
      {"small4", g, 0, 2, 0.05},
      {"small8", 2 * g, 0, 2, 0.05},
  };
}

uint64_t MixSeed(uint64_t seed) { return NodeStreamSeed(~seed, -2); }

Trace MakeMixTrace(const std::vector<MixClass>& recipe, const MixOptions& options) {
  Trace trace;
  trace.file = "synthetic:llm";
  const double horizon_s = options.days * 86400;
  const double gpu_s_per_s = options.load * options.cluster_gpus;
  for (size_t c = 0; c < recipe.size(); ++c) {
    const MixClass& k = recipe[c];
    const double mean_s = k.mean_hours * 3600;
    // Jobs per second that offer this class's share: share x demand / (GPUs x mean duration).
    const double rate = k.gpu_hour_share * gpu_s_per_s / (k.gpus * mean_s);
    if (rate <= 0) continue;
    DeterministicRandom rng(NodeStreamSeed(MixSeed(options.seed), static_cast<int>(c)));
    int n = 0;
    for (double t = rng.Exponential(1 / rate); t < horizon_s; t += rng.Exponential(1 / rate)) {
      TraceJob job;
      job.id = std::string(k.name) + "-" + std::to_string(n++);
      job.submission_s = t;
      job.duration_s = rng.Exponential(mean_s);
      job.gpus = k.gpus;
      job.segment_nodes = k.segment_nodes;
      trace.jobs.push_back(std::move(job));
    }
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submission_s < b.submission_s;
  });
  for (size_t i = 0; i < trace.jobs.size(); ++i) trace.jobs[i].line = static_cast<int>(i) + 2;
  return trace;
}

}  // namespace nvl72::sim
