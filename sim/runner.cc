#include "sim/runner.h"

#include <algorithm>
#include <memory>

#include "placement/policy.h"
#include "sim/engine.h"
#include "sim/synthetic.h"
#include "sim/trace.h"

namespace nvl72::sim {

StatusOr<RunReport> RunSimulation(const SimConfig& config) {
  if (!config.mix.empty()) {
    const ClusterShape& c = config.options.cluster;
    const std::vector<MixClass> recipe = LlmMixRecipe(c.gpus_per_node);
    for (const MixClass& k : recipe) {
      const int nodes = (k.gpus + c.gpus_per_node - 1) / c.gpus_per_node;
      const int segment = k.segment_nodes <= 0 ? 0 : std::min(k.segment_nodes, nodes);
      if (segment > c.nodes_per_rack) {
        return InvalidArgumentError("--mix " + config.mix + ": its " + std::to_string(k.gpus) +
                                    "-GPU jobs need " + std::to_string(segment) +
                                    " nodes in one rack (--nodes-per-rack " +
                                    std::to_string(c.nodes_per_rack) + ")");
      }
      if (k.gpus > c.TotalGpus()) {
        return InvalidArgumentError(
            "--mix " + config.mix + ": its " + std::to_string(k.gpus) + "-GPU jobs need at least " +
            std::to_string((k.gpus + c.nodes_per_rack * c.gpus_per_node - 1) /
                           (c.nodes_per_rack * c.gpus_per_node)) +
            " racks of " + std::to_string(c.nodes_per_rack) + " x " +
            std::to_string(c.gpus_per_node) + " GPUs (--racks " + std::to_string(c.racks) + ")");
      }
    }
    MixOptions mix;
    mix.cluster_gpus = c.TotalGpus();
    mix.gpus_per_node = c.gpus_per_node;
    mix.days = config.mix_days;
    mix.seed = config.options.seed;
    return RunSimulationOnTrace(config, MakeMixTrace(recipe, mix));
  }
  StatusOr<Trace> trace = LoadTrace(config.trace_path);
  if (!trace.ok()) {
    return trace.status();
  }
  return RunSimulationOnTrace(config, std::move(trace).value());
}

StatusOr<RunReport> RunSimulationOnTrace(const SimConfig& config, Trace trace) {
  RunReport report;
  report.config = config;
  report.policies = config.policies.empty() ? placement::PolicyNames() : config.policies;
  placement::PolicyOptions policy_options;
  policy_options.spares_per_domain = config.options.spares;
  policy_options.spare_reserve = config.options.spare_reserve;
  std::vector<std::unique_ptr<placement::PlacementPolicy>> policies;
  for (const std::string& name : report.policies) {
    std::unique_ptr<placement::PlacementPolicy> policy =
        placement::MakePolicy(name, policy_options);
    if (policy == nullptr) {
      std::string known;
      for (const std::string& n : placement::PolicyNames()) {
        known += (known.empty() ? "" : ", ") + n;
      }
      std::string message = "--policies: unknown policy '" + name + "' (known: ";
      message += known;
      message += ")";
      return InvalidArgumentError(std::move(message));
    }
    policies.push_back(std::move(policy));
  }
  NVL72_RETURN_IF_ERROR(CheckJobsFitCluster(trace, config.options.cluster.TotalGpus()));
  TruncateJobs(trace, config.max_jobs);
  ApplyLoad(trace, config.load);
  report.jobs = static_cast<int64_t>(trace.jobs.size());
  if (!trace.jobs.empty()) {
    report.trace_span_s = trace.jobs.back().submission_s - trace.jobs.front().submission_s;
  }
  for (const TraceJob& job : trace.jobs) {
    report.offered_gpu_hours += job.duration_s * job.gpus / 3600.0;
  }
  const std::string ours = placement::PolicyNames().front();  // the policy the operator runs
  for (const auto& policy : policies) {
    SimOptions options = config.options;
    options.defrag.enabled = config.defrag == DefragScope::kAll ||
                             (config.defrag == DefragScope::kOurs && policy->Name() == ours);
    StatusOr<PolicyMetrics> metrics = Simulate(trace, *policy, options);
    if (!metrics.ok()) {
      return metrics.status();
    }
    report.results.push_back(std::move(metrics).value());
  }
  return report;
}

}  // namespace nvl72::sim
