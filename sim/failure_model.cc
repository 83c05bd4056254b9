#include "sim/failure_model.h"

#include <algorithm>
#include <cmath>

namespace nvl72::sim {

double DeterministicRandom::Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double DeterministicRandom::Exponential(double mean) { return -mean * std::log1p(-Uniform()); }

uint64_t NodeStreamSeed(uint64_t seed, int node) {
  // SplitMix64 (Steele, Lea, Flood 2014) over seed + golden-ratio steps per node.
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(node) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t RackTimelineSeed(uint64_t seed) { return NodeStreamSeed(~seed, -1); }

FailureTimeline::FailureTimeline(int nodes, const FailureModelOptions& options)
    : options_(options), last_repaired_s_(static_cast<size_t>(nodes), -1.0) {
  streams_.reserve(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) {
    streams_.emplace_back(NodeStreamSeed(options.seed, n));
  }
}

NodeOutage FailureTimeline::NextOutage(int node, double start_s) {
  if (options_.mtbf_hours <= 0) {
    return NodeOutage{INFINITY, INFINITY};
  }
  double& last = last_repaired_s_[static_cast<size_t>(node)];
  const double up_from = last < 0 ? start_s : last;
  DeterministicRandom& rng = streams_[static_cast<size_t>(node)];
  NodeOutage outage;
  outage.fail_s = up_from + rng.Exponential(options_.mtbf_hours * 3600.0);
  // A repair takes at least one second so that fail and repair never share a timestamp.
  outage.repaired_s =
      outage.fail_s + std::max(1.0, rng.Exponential(options_.repair_hours * 3600.0));
  last = outage.repaired_s;
  return outage;
}

}  // namespace nvl72::sim
