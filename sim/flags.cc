#include "sim/flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <sstream>

namespace nvl72::sim {
namespace {

Status BadValue(std::string_view flag, std::string_view value, std::string_view expected) {
  return InvalidArgumentError("--" + std::string(flag) + ": expected " + std::string(expected) +
                              ", got '" + std::string(value) + "'");
}

bool ParseDouble(std::string_view text, double& out) {
  if (text.empty()) {
    return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(out);
}

template <typename Int>
bool ParseInt(std::string_view text, Int& out) {
  if (text.empty()) {
    return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

using Apply = std::function<Status(std::string_view)>;

struct Flag {
  std::string_view name;
  std::string_view value_name;  // empty: boolean flag
  std::string help;
  Apply apply;
};

// ---- Value parsers: each returns the `apply` of one flag, storing into `target`.

// An int >= min; `expected` names the range in the error.
Apply IntAtLeast(std::string_view flag, int& target, int min, std::string_view expected) {
  return [=, &target](std::string_view v) {
    int x = 0;
    if (!ParseInt(v, x) || x < min) {
      return BadValue(flag, v, expected);
    }
    target = x;
    return Status::Ok();
  };
}

Apply PositiveInt(std::string_view flag, int& target) {
  return IntAtLeast(flag, target, 1, "a positive integer");
}

Apply NonNegativeInt(std::string_view flag, int& target) {
  return IntAtLeast(flag, target, 0, "an integer >= 0");
}

Apply UnsignedInt(std::string_view flag, uint64_t& target) {
  return [flag, &target](std::string_view v) {
    uint64_t x = 0;
    if (!ParseInt(v, x)) {
      return BadValue(flag, v, "an unsigned integer");
    }
    target = x;
    return Status::Ok();
  };
}

// A finite number >= min (> min unless min_inclusive).
Apply Number(std::string_view flag, double& target, double min, bool min_inclusive,
             std::string_view expected) {
  return [=, &target](std::string_view v) {
    double x = 0;
    if (!ParseDouble(v, x) || x < min || (!min_inclusive && x == min)) {
      return BadValue(flag, v, expected);
    }
    target = x;
    return Status::Ok();
  };
}

// A number in (0, 1].
Apply Fraction(std::string_view flag, double& target) {
  return [flag, &target](std::string_view v) {
    double x = 0;
    if (!ParseDouble(v, x) || x <= 0 || x > 1) {
      return BadValue(flag, v, "a number in (0, 1]");
    }
    target = x;
    return Status::Ok();
  };
}

Apply TracePath(std::string& target) {
  return [&target](std::string_view v) {
    if (v.empty()) {
      return BadValue("trace", v, "a file path");
    }
    target = std::string(v);
    return Status::Ok();
  };
}

Apply MixName(std::string& target) {
  return [&target](std::string_view v) {
    if (v != "llm") {
      return BadValue("mix", v, "llm");
    }
    target = std::string(v);
    return Status::Ok();
  };
}

Apply PolicyList(std::vector<std::string>& target) {
  return [&target](std::string_view v) {
    target.clear();
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      std::string_view name =
          v.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (name.empty()) {
        return BadValue("policies", v, "a comma-separated list of names");
      }
      target.emplace_back(name);
      if (comma == std::string_view::npos) {
        break;
      }
      start = comma + 1;
    }
    return Status::Ok();
  };
}

Apply SpareReserveValue(placement::SpareReserve& target) {
  return [&target](std::string_view v) {
    if (!placement::ParseSpareReserve(v, &target)) {
      return BadValue("spare-reserve", v, "hard or soft");
    }
    return Status::Ok();
  };
}

Apply GangRecoveryValue(GangRecovery& target) {
  return [&target](std::string_view v) {
    if (!ParseGangRecovery(v, &target)) {
      return BadValue("gang-recovery", v, "hold or requeue");
    }
    return Status::Ok();
  };
}

Apply DefragScopeValue(DefragScope& target) {
  return [&target](std::string_view v) {
    if (v == "on") {
      target = DefragScope::kOurs;
    } else if (v == "off") {
      target = DefragScope::kOff;
    } else if (v == "all") {
      target = DefragScope::kAll;
    } else {
      return BadValue("defrag", v, "on, off or all");
    }
    return Status::Ok();
  };
}

// A boolean flag: sets `target`.
Apply SetTrue(bool& target) {
  return [&target](std::string_view) {
    target = true;
    return Status::Ok();
  };
}

// A default value in the help text.
std::string Fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// The flag table.
std::vector<Flag> MakeFlags(SimConfig& c) {
  SimOptions& o = c.options;
  const SimOptions d;
  return {
      {"trace", "PATH", "ITP CSV trace (job_id,submission_time,duration,num_gpu). Required.",
       TracePath(c.trace_path)},
      {"mix", "llm",
       "Instead of --trace, a synthetic LLM-era job mix drawn from --seed: 16- and 18-node gangs "
       "in one rack each, 32- and 64-node jobs in segments of 16, small jobs; load 0.85 of the "
       "cluster (recipe in docs/simulator.md).",
       MixName(c.mix)},
      {"mix-days", "D", "Days of arrivals of --mix. Default 60 (like cluster04).",
       Number("mix-days", c.mix_days, 0, false, "a number > 0")},
      {"racks", "N", "NVLink domains (racks). Default " + std::to_string(d.cluster.racks) + ".",
       PositiveInt("racks", o.cluster.racks)},
      {"nodes-per-rack", "N",
       "Nodes per rack. Default " + std::to_string(d.cluster.nodes_per_rack) + " (NVL72).",
       PositiveInt("nodes-per-rack", o.cluster.nodes_per_rack)},
      {"gpus-per-node", "N",
       "GPUs per node. Default " + std::to_string(d.cluster.gpus_per_node) + " (NVL72).",
       PositiveInt("gpus-per-node", o.cluster.gpus_per_node)},
      {"policies", "A,B",
       "Comma-separated policies to compare. Default: all (nvl72, spread, first-fit, "
       "domain-best-fit).",
       PolicyList(c.policies)},
      {"spares", "N",
       "Spare nodes per rack kept out of new gangs (nvl72 policy; also caps the segment "
       "size of gangs larger than a rack). Default " +
           std::to_string(d.spares) + ".",
       NonNegativeInt("spares", o.spares)},
      {"spare-reserve", "hard|soft",
       "hard: new gangs never take the spares; soft: a gang that fits nowhere else takes them "
       "instead of waiting (nvl72 policy). Default " +
           std::string(placement::SpareReserveName(d.spare_reserve)) + ".",
       SpareReserveValue(o.spare_reserve)},
      {"load", "F", "Arrival-rate factor: submission times are divided by F. Default 1.",
       Number("load", c.load, 0, false, "a number > 0")},
      {"seed", "N", "Seed of the failure model. Default " + std::to_string(d.seed) + ".",
       UnsignedInt("seed", o.seed)},
      {"mtbf-hours", "H",
       "Mean time between failures of one node, hours; 0 disables failures. Default " +
           Fmt(d.mtbf_hours) + " (Llama 3 interruption rate scaled to a 4-GPU node).",
       Number("mtbf-hours", o.mtbf_hours, 0, true, "a number >= 0")},
      {"repair-hours", "H",
       "Mean repair time of a failed node, hours (exponential). Default " + Fmt(d.repair_hours) +
           ".",
       Number("repair-hours", o.repair_hours, 0, true, "a number >= 0")},
      {"rack-mtbf-hours", "H",
       "Mean time between whole-rack outages of one rack (every node NotReady at once: NVLink "
       "switch tray, fabric), hours; 0 disables them. Default 0 (no sourced rate: sweep it).",
       Number("rack-mtbf-hours", o.rack_mtbf_hours, 0, true, "a number >= 0")},
      {"rack-repair-hours", "H",
       "Mean repair time of a failed rack, hours (exponential). Default " +
           Fmt(d.rack_repair_hours) + ".",
       Number("rack-repair-hours", o.rack_repair_hours, 0, true, "a number >= 0")},
      {"checkpoint-minutes", "M",
       "Checkpoint interval; a failure loses the work since the last one; 0 = no loss. "
       "Default " +
           Fmt(d.checkpoint_minutes) + ".",
       Number("checkpoint-minutes", o.checkpoint_minutes, 0, true, "a number >= 0")},
      {"restart-minutes", "M",
       "Restart overhead of a job resuming from a checkpoint. Default " + Fmt(d.restart_minutes) +
           ".",
       Number("restart-minutes", o.restart_minutes, 0, true, "a number >= 0")},
      {"gang-recovery", "hold|requeue",
       "What nvl72 does when a failed rank finds no node in its rack. hold: the operator's "
       "recovery, the gang keeps its other nodes and waits for one there, then after "
       "--recovery-wait-seconds moves whole where it fits; requeue: releases its nodes and "
       "requeues like the baselines (the model before). Default " +
           std::string(GangRecoveryName(d.gang_recovery)) + ".",
       GangRecoveryValue(o.gang_recovery)},
      {"recovery-wait-seconds", "S",
       "Wait bound of a held gang before it moves to another rack. Default " +
           Fmt(d.recovery_wait_s) + " (the operator's: 3 x notReadyGraceSeconds).",
       Number("recovery-wait-seconds", o.recovery_wait_s, 0, true, "a number >= 0")},
      {"cross-domain-speed", "S",
       "Speed of a gang spanning more than one NVLink domain, in (0, 1]. Default " +
           Fmt(d.cross_domain_speed) + " (43% NVLink -> InfiniBand loss).",
       Fraction("cross-domain-speed", o.cross_domain_speed)},
      {"preemptible-max-gpus", "N",
       "Jobs of at most N GPUs are preemptible: a policy may lend them its spare nodes "
       "and evict them to recover a gang. Default " +
           std::to_string(d.preemptible_max_gpus) + " (none; the trace does not say).",
       NonNegativeInt("preemptible-max-gpus", o.preemptible_max_gpus)},
      {"defrag", "on|off|all",
       "Defragmentation with placement::PlanDefrag under the operator's rules: when a gang waits "
       "although enough GPUs are free, move the fewest preemptible jobs (they lose the work since "
       "their checkpoint and pay the restart cost) so that one rack has room. on: the nvl72 "
       "policy only, like the operator (the baselines have none); all: every policy; off. Needs "
       "--preemptible-max-gpus > 0 to move anything. Default " +
           std::string(DefragScopeName(SimConfig{}.defrag)) + ".",
       DefragScopeValue(c.defrag)},
      {"defrag-max-concurrent-moves", "N",
       "Jobs moved per defragmentation plan at most. Default " +
           std::to_string(d.defrag.max_moves) + " (the operator's default).",
       PositiveInt("defrag-max-concurrent-moves", o.defrag.max_moves)},
      {"defrag-min-interval-seconds", "S",
       "Simulated seconds between two defragmentation plans at least. Default " +
           Fmt(d.defrag.min_interval_s) + " (the operator's default).",
       Number("defrag-min-interval-seconds", o.defrag.min_interval_s, 0, true, "a number >= 0")},
      {"defrag-cooldown-seconds", "S",
       "A job moved by defragmentation is not moved again within S simulated seconds. "
       "Default " +
           Fmt(d.defrag.cooldown_s) + " (the operator's default).",
       Number("defrag-cooldown-seconds", o.defrag.cooldown_s, 0, true, "a number >= 0")},
      {"max-jobs", "N", "Replay only the first N jobs in arrival order. Default: all.",
       PositiveInt("max-jobs", c.max_jobs)},
      {"json", "", "Print one JSON object instead of the table.", SetTrue(c.json)},
      {"help", "", "Print this help.", SetTrue(c.help)},
  };
}

}  // namespace

std::string_view DefragScopeName(DefragScope scope) {
  switch (scope) {
    case DefragScope::kOff:
      return "off";
    case DefragScope::kOurs:
      return "on";
    case DefragScope::kAll:
      return "all";
  }
  return "?";
}

StatusOr<SimConfig> ParseFlags(std::span<const std::string_view> args) {
  SimConfig config;
  std::vector<Flag> flags = MakeFlags(config);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg.substr(0, 2) != "--") {
      return InvalidArgumentError("unexpected argument '" + std::string(arg) + "' (see --help)");
    }
    arg.remove_prefix(2);
    std::string_view value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto flag =
        std::find_if(flags.begin(), flags.end(), [&](const Flag& f) { return f.name == arg; });
    if (flag == flags.end()) {
      return InvalidArgumentError("unknown flag --" + std::string(arg) + " (see --help)");
    }
    if (flag->value_name.empty()) {
      if (has_value) {
        return InvalidArgumentError("--" + std::string(arg) + " takes no value");
      }
    } else if (!has_value) {
      if (i + 1 >= args.size()) {
        return InvalidArgumentError("--" + std::string(arg) + " needs a value (" +
                                    std::string(flag->value_name) + ")");
      }
      value = args[++i];
    }
    NVL72_RETURN_IF_ERROR(flag->apply(value));
  }
  if (!config.help && !config.trace_path.empty() && !config.mix.empty()) {
    return InvalidArgumentError("--trace and --mix exclude each other (see --help)");
  }
  if (!config.help && config.trace_path.empty() && config.mix.empty()) {
    return InvalidArgumentError("--trace is required, or --mix llm (see --help)");
  }
  return config;
}

std::string HelpText() {
  SimConfig scratch;
  std::ostringstream out;
  out << "nvl72-sim: replays a GPU job trace on simulated GB200 NVL72 racks under every placement\n"
         "policy, with the same seeded node failures, and compares them.\n\n"
         "Usage: nvl72-sim --trace FILE [flags]\n\nFlags:\n";
  for (const Flag& f : MakeFlags(scratch)) {
    // Appended piece by piece: `"  --" + std::string(...)` trips GCC 12's -Wrestrict false
    // positive at -O3 (GCC bug 105651), which broke the Release build.
    std::string head = "  --";
    head.append(f.name);
    if (!f.value_name.empty()) head.append(" ").append(f.value_name);
    out << head;
    if (head.size() < 28) {
      out << std::string(28 - head.size(), ' ');
    } else {
      out << "\n" << std::string(28, ' ');
    }
    // Word-wrap the description to 100 columns, continuation lines under the first.
    size_t column = 28;
    std::istringstream words(f.help);
    std::string word;
    bool first = true;
    while (words >> word) {
      if (!first && column + 1 + word.size() > 100) {
        out << "\n" << std::string(28, ' ');
        column = 28;
      } else if (!first) {
        out << ' ';
        ++column;
      }
      out << word;
      column += word.size();
      first = false;
    }
    out << "\n";
  }
  out << "\nExit codes: 0 ok, 2 bad input (flags, trace, policy name), 1 internal error.\n"
         "Model and metric definitions: docs/simulator.md.\n";
  return out.str();
}

}  // namespace nvl72::sim
