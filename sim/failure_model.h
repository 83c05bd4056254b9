// Seeded node-failure model: per node, alternating exponential up-times (mean MTBF) and exponential
// repair times (mean repair time).
//
// Each node draws from its own std::mt19937_64 stream seeded from (seed, node), and the exponential
// transform is our own (53-bit uniform, -mean * log1p(-u)), so the outage sequence of a node is the
// same on every platform and does not depend on how far a caller consumes other nodes' streams.
// That is what lets every policy of one run see the identical failure timeline.
// Thread-safety: a FailureTimeline is not thread-safe; use one per simulation.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace nvl72::sim {

// Platform-independent draws from std::mt19937_64 (whose output sequence the standard fixes).
class DeterministicRandom {
 public:
  explicit DeterministicRandom(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1) with 53 random bits.
  double Uniform();
  // Exponential with the given mean (> 0).
  double Exponential(double mean);

 private:
  std::mt19937_64 engine_;
};

struct FailureModelOptions {
  double mtbf_hours = 0;    // mean up-time of one node between failures; <= 0 disables failures
  double repair_hours = 0;  // mean time a failed node stays NotReady
  uint64_t seed = 1;
};

struct NodeOutage {
  double fail_s = 0;      // the node stops being Ready; +infinity: no further outage
  double repaired_s = 0;  // the node is Ready again; > fail_s
};

// Where the engine gets node outages from: the seeded model in runs, a script in tests.
class FailureSource {
 public:
  virtual ~FailureSource() = default;
  // The next outage of `node` after the previous one returned for it; the first call per node
  // counts from `start_s`. Outages of one node never overlap.
  virtual NodeOutage NextOutage(int node, double start_s) = 0;
};

class FailureTimeline final : public FailureSource {
 public:
  FailureTimeline(int nodes, const FailureModelOptions& options);

  // Infinite times when failures are disabled (mtbf_hours <= 0).
  NodeOutage NextOutage(int node, double start_s) override;

 private:
  FailureModelOptions options_;
  std::vector<DeterministicRandom> streams_;
  std::vector<double> last_repaired_s_;  // < 0 before the first outage
};

// Seed of node `node`'s stream: SplitMix64 of the run seed and the node index.
uint64_t NodeStreamSeed(uint64_t seed, int node);

// Seed of the rack-outage timeline of a run: a different value than the run seed, so that rack
// streams never repeat node streams, and the node timeline is the same with or without racks.
uint64_t RackTimelineSeed(uint64_t seed);

}  // namespace nvl72::sim
