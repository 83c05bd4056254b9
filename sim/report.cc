#include "sim/report.h"

#include <cstdio>
#include <sstream>

namespace nvl72::sim {
namespace {

nlohmann::json MetricsToJson(const PolicyMetrics& m) {
  return nlohmann::json{
      {"usable_capacity", m.usable_capacity},
      {"wait_mean_s", m.wait_mean_s},
      {"wait_p99_s", m.wait_p99_s},
      {"single_domain_ratio", m.single_domain_ratio},
      {"in_place_recovery_ratio", m.in_place_recovery_ratio},
      {"stranded_gpu_ratio", m.stranded_gpu_ratio},
      {"makespan_s", m.makespan_s},
      {"wait_mean_gang_s", m.wait_mean_gang_s},
      {"wait_p99_gang_s", m.wait_p99_gang_s},
      {"wait_mean_pod_s", m.wait_mean_pod_s},
      {"wait_p99_pod_s", m.wait_p99_pod_s},
      {"gang_recovery_wait_mean_s", m.gang_recovery_wait_mean_s},
      {"gang_recovery_wait_p99_s", m.gang_recovery_wait_p99_s},
      {"gang_recovery_wait_gpu_hours", m.gang_recovery_wait_gpu_hours},
      {"jobs", m.jobs},
      {"jobs_completed", m.jobs_completed},
      {"jobs_never_placed", m.jobs_never_placed},
      {"gang_starts", m.gang_starts},
      {"gang_starts_single_domain", m.gang_starts_single_domain},
      {"gang_starts_cross_domain", m.gang_starts_cross_domain},
      {"pod_starts", m.pod_starts},
      {"node_failures", m.node_failures},
      {"node_failures_hitting_jobs", m.node_failures_hitting_jobs},
      {"gang_holds", m.gang_holds},
      {"rack_outages", m.rack_outages},
      {"rack_outages_hitting_jobs", m.rack_outages_hitting_jobs},
      {"job_interruptions", m.job_interruptions},
      {"gang_failures", m.gang_failures},
      {"gang_recovered_in_place", m.gang_recovered_in_place},
      {"requeues", m.requeues},
      {"preemptions", m.preemptions},
      {"defrag_plans", m.defrag_plans},
      {"defrag_moves", m.defrag_moves},
      {"waiting_hours", m.waiting_hours},
      {"healthy_gpu_hours_waiting", m.healthy_gpu_hours_waiting},
      {"useful_gpu_hours_waiting", m.useful_gpu_hours_waiting},
      {"stranded_gpu_hours_waiting", m.stranded_gpu_hours_waiting},
      {"spare_gpu_hours_waiting", m.spare_gpu_hours_waiting},
      {"useful_gpu_hours_total", m.useful_gpu_hours_total},
      {"lost_gpu_hours", m.lost_gpu_hours},
      {"restart_gpu_hours", m.restart_gpu_hours},
      {"slowdown_gpu_hours", m.slowdown_gpu_hours},
  };
}

std::string Fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, x);
  return buf;
}

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

nlohmann::json ReportToJson(const RunReport& report) {
  const SimConfig& c = report.config;
  const SimOptions& o = c.options;
  nlohmann::json policies = nlohmann::json::object();
  for (const PolicyMetrics& m : report.results) {
    policies[m.policy] = MetricsToJson(m);
  }
  nlohmann::json config = {
      {"trace", c.mix.empty() ? c.trace_path : "synthetic:" + c.mix},
      {"mix_days", c.mix.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.mix_days)},
      {"jobs", report.jobs},
      {"offered_gpu_hours", report.offered_gpu_hours},
      {"trace_span_s", report.trace_span_s},
      {"racks", o.cluster.racks},
      {"nodes_per_rack", o.cluster.nodes_per_rack},
      {"gpus_per_node", o.cluster.gpus_per_node},
      {"cluster_gpus", o.cluster.TotalGpus()},
      {"policies", report.policies},
      {"spares", o.spares},
      {"spare_reserve", placement::SpareReserveName(o.spare_reserve)},
      {"load", c.load},
      {"max_jobs", c.max_jobs},
      {"seed", o.seed},
      {"mtbf_hours", o.mtbf_hours},
      {"repair_hours", o.repair_hours},
      {"rack_mtbf_hours", o.rack_mtbf_hours},
      {"rack_repair_hours", o.rack_repair_hours},
      {"gang_recovery", GangRecoveryName(o.gang_recovery)},
      {"recovery_wait_s", o.recovery_wait_s},
      {"checkpoint_minutes", o.checkpoint_minutes},
      {"restart_minutes", o.restart_minutes},
      {"cross_domain_speed", o.cross_domain_speed},
      {"preemptible_max_gpus", o.preemptible_max_gpus},
      {"defrag", DefragScopeName(c.defrag)},
      {"defrag_max_concurrent_moves", o.defrag.max_moves},
      {"defrag_min_interval_s", o.defrag.min_interval_s},
      {"defrag_cooldown_s", o.defrag.cooldown_s},
  };
  return nlohmann::json{{"policies", policies}, {"config", config}};
}

namespace {

// The run's configuration: the trace, the cluster, the failure model, preemption and defrag.
void WriteConfig(std::ostream& out, const RunReport& report) {
  const SimConfig& c = report.config;
  const SimOptions& o = c.options;
  out << "trace " << (c.mix.empty() ? c.trace_path : "synthetic:" + c.mix) << ": " << report.jobs
      << " jobs, " << Fixed(report.offered_gpu_hours, 0) << " GPU-hours over "
      << Fixed(report.trace_span_s / 86400, 1) << " days (load x" << Fixed(c.load, 2) << ")\n"
      << "cluster " << o.cluster.racks << " racks x " << o.cluster.nodes_per_rack << " nodes x "
      << o.cluster.gpus_per_node << " GPUs = " << o.cluster.TotalGpus() << " GPUs; spares "
      << o.spares << " (" << placement::SpareReserveName(o.spare_reserve)
      << " reserve); cross-domain speed " << Fixed(o.cross_domain_speed, 2) << "\n"
      << "failures: MTBF " << Fixed(o.mtbf_hours, 0) << " h/node, repair "
      << Fixed(o.repair_hours, 1) << " h; rack outages: "
      << (o.rack_mtbf_hours > 0 ? "MTBF " + Fixed(o.rack_mtbf_hours, 0) + " h/rack, repair " +
                                      Fixed(o.rack_repair_hours, 1) + " h"
                                : std::string("none"))
      << "; checkpoint " << Fixed(o.checkpoint_minutes, 0) << " min, restart "
      << Fixed(o.restart_minutes, 0) << " min, seed " << o.seed << "\n"
      << "preemptible: jobs of <= " << o.preemptible_max_gpus << " GPUs; defrag "
      << DefragScopeName(c.defrag) << " (<= " << o.defrag.max_moves << " moves per plan, "
      << Fixed(o.defrag.min_interval_s, 0) << " s between plans, cooldown "
      << Fixed(o.defrag.cooldown_s, 0) << " s)\n\n";
}

// The table's columns and their widths; cells are right-aligned.
const std::vector<std::pair<std::string, size_t>>& Columns() {
  static const std::vector<std::pair<std::string, size_t>> kColumns = {
      {"policy", 16},      {"usable", 8},       {"vs spread", 10},  {"wait mean h", 12},
      {"wait p99 h", 11},  {"1-domain", 9},     {"in-place", 9},    {"stranded", 9},
      {"makespan d", 11},  {"gang starts", 12}, {"gang fails", 11}, {"defrag moves", 13},
      {"never placed", 13}};
  return kColumns;
}

// The cells of policy `m`, one per column; "vs spread" compares with `spread` when it ran.
std::vector<std::string> PolicyCells(const PolicyMetrics& m, const PolicyMetrics* spread) {
  std::string vs = "-";
  if (spread != nullptr && spread->usable_capacity > 0) {
    vs = Fixed(m.usable_capacity / spread->usable_capacity, 2) + "x";
  }
  std::string in_place = m.gang_failures > 0 ? Fixed(m.in_place_recovery_ratio, 3) : "n/a";
  std::string one_domain = m.gang_starts > 0 ? Fixed(m.single_domain_ratio, 3) : "n/a";
  return {m.policy,
          Fixed(m.usable_capacity, 3),
          vs,
          Fixed(m.wait_mean_s / 3600, 2),
          Fixed(m.wait_p99_s / 3600, 2),
          one_domain,
          in_place,
          Fixed(m.stranded_gpu_ratio, 3),
          Fixed(m.makespan_s / 86400, 2),
          std::to_string(m.gang_starts),
          std::to_string(m.gang_failures),
          std::to_string(m.defrag_moves),
          std::to_string(m.jobs_never_placed)};
}

}  // namespace

std::string FormatTable(const RunReport& report) {
  std::ostringstream out;
  WriteConfig(out, report);
  const PolicyMetrics* spread = nullptr;
  for (const PolicyMetrics& m : report.results) {
    if (m.policy == "spread") {
      spread = &m;
    }
  }
  const auto& columns = Columns();
  for (const auto& [name, width] : columns) {
    out << Pad(name, width);
  }
  out << "\n";
  for (const PolicyMetrics& m : report.results) {
    const std::vector<std::string> cells = PolicyCells(m, spread);
    for (size_t i = 0; i < cells.size(); ++i) {
      out << Pad(cells[i], columns[i].second);
    }
    out << "\n";
  }
  out << "\nusable = useful GPU-h (full-speed work, failures' lost work removed) / healthy GPU-h,\n"
         "both while at least one job waits; in-place = gang failures recovered in place / gang\n"
         "failures (n/a: no gang failure). See docs/simulator.md.\n";
  return out.str();
}

}  // namespace nvl72::sim
