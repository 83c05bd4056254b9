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

struct Flag {
  std::string_view name;
  std::string_view value_name;  // empty: boolean flag
  std::string help;
  std::function<Status(std::string_view)> apply;
};

std::vector<Flag> MakeFlags(SimConfig& c) {
  auto positive_int = [](std::string_view flag, int& target) {
    return [flag, &target](std::string_view v) {
      int x = 0;
      if (!ParseInt(v, x) || x <= 0) {
        return BadValue(flag, v, "a positive integer");
      }
      target = x;
      return Status::Ok();
    };
  };
  auto number = [](std::string_view flag, double& target, double min, bool min_inclusive,
                   std::string_view expected) {
    return [=, &target](std::string_view v) {
      double x = 0;
      if (!ParseDouble(v, x) || x < min || (!min_inclusive && x == min)) {
        return BadValue(flag, v, expected);
      }
      target = x;
      return Status::Ok();
    };
  };
  SimOptions& o = c.options;
  const SimOptions d;
  std::vector<Flag> flags;
  flags.push_back({"trace", "PATH",
                   "ITP CSV trace (job_id,submission_time,duration,num_gpu). Required.",
                   [&c](std::string_view v) {
                     if (v.empty()) {
                       return BadValue("trace", v, "a file path");
                     }
                     c.trace_path = std::string(v);
                     return Status::Ok();
                   }});
  flags.push_back({"racks", "N",
                   "NVLink domains (racks). Default " + std::to_string(d.cluster.racks) + ".",
                   positive_int("racks", o.cluster.racks)});
  flags.push_back(
      {"nodes-per-rack", "N",
       "Nodes per rack. Default " + std::to_string(d.cluster.nodes_per_rack) + " (NVL72).",
       positive_int("nodes-per-rack", o.cluster.nodes_per_rack)});
  flags.push_back(
      {"gpus-per-node", "N",
       "GPUs per node. Default " + std::to_string(d.cluster.gpus_per_node) + " (NVL72).",
       positive_int("gpus-per-node", o.cluster.gpus_per_node)});
  flags.push_back({"policies", "A,B",
                   "Comma-separated policies to compare. Default: all (nvl72, spread, first-fit, "
                   "domain-best-fit).",
                   [&c](std::string_view v) {
                     c.policies.clear();
                     size_t start = 0;
                     while (start <= v.size()) {
                       size_t comma = v.find(',', start);
                       std::string_view name =
                           v.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                           : comma - start);
                       if (name.empty()) {
                         return BadValue("policies", v, "a comma-separated list of names");
                       }
                       c.policies.emplace_back(name);
                       if (comma == std::string_view::npos) {
                         break;
                       }
                       start = comma + 1;
                     }
                     return Status::Ok();
                   }});
  flags.push_back(
      {"spares", "N",
       "Spare nodes per rack kept out of new gangs (nvl72 policy; also caps the segment "
       "size of gangs larger than a rack). Default " +
           std::to_string(d.spares) + ".",
       [&o](std::string_view v) {
         int x = 0;
         if (!ParseInt(v, x) || x < 0) {
           return BadValue("spares", v, "an integer >= 0");
         }
         o.spares = x;
         return Status::Ok();
       }});
  flags.push_back(
      {"spare-reserve", "hard|soft",
       "hard: new gangs never take the spares; soft: a gang that fits nowhere else takes them "
       "instead of waiting (nvl72 policy). Default " +
           std::string(placement::SpareReserveName(d.spare_reserve)) + ".",
       [&o](std::string_view v) {
         if (!placement::ParseSpareReserve(v, &o.spare_reserve)) {
           return BadValue("spare-reserve", v, "hard or soft");
         }
         return Status::Ok();
       }});
  flags.push_back({"load", "F",
                   "Arrival-rate factor: submission times are divided by F. Default 1.",
                   number("load", c.load, 0, false, "a number > 0")});
  flags.push_back({"seed", "N",
                   "Seed of the failure model. Default " + std::to_string(d.seed) + ".",
                   [&o](std::string_view v) {
                     uint64_t x = 0;
                     if (!ParseInt(v, x)) {
                       return BadValue("seed", v, "an unsigned integer");
                     }
                     o.seed = x;
                     return Status::Ok();
                   }});
  auto fmt = [](double x) {
    std::ostringstream s;
    s << x;
    return s.str();
  };
  flags.push_back({"mtbf-hours", "H",
                   "Mean time between failures of one node, hours; 0 disables failures. Default " +
                       fmt(d.mtbf_hours) + " (Llama 3 interruption rate scaled to a 4-GPU node).",
                   number("mtbf-hours", o.mtbf_hours, 0, true, "a number >= 0")});
  flags.push_back({"repair-hours", "H",
                   "Mean repair time of a failed node, hours (exponential). Default " +
                       fmt(d.repair_hours) + ".",
                   number("repair-hours", o.repair_hours, 0, true, "a number >= 0")});
  flags.push_back({"checkpoint-minutes", "M",
                   "Checkpoint interval; a failure loses the work since the last one; 0 = no loss. "
                   "Default " +
                       fmt(d.checkpoint_minutes) + ".",
                   number("checkpoint-minutes", o.checkpoint_minutes, 0, true, "a number >= 0")});
  flags.push_back({"restart-minutes", "M",
                   "Restart overhead of a job resuming from a checkpoint. Default " +
                       fmt(d.restart_minutes) + ".",
                   number("restart-minutes", o.restart_minutes, 0, true, "a number >= 0")});
  flags.push_back({"cross-domain-speed", "S",
                   "Speed of a gang spanning more than one NVLink domain, in (0, 1]. Default " +
                       fmt(d.cross_domain_speed) + " (43% NVLink -> InfiniBand loss).",
                   [&o](std::string_view v) {
                     double x = 0;
                     if (!ParseDouble(v, x) || x <= 0 || x > 1) {
                       return BadValue("cross-domain-speed", v, "a number in (0, 1]");
                     }
                     o.cross_domain_speed = x;
                     return Status::Ok();
                   }});
  flags.push_back({"preemptible-max-gpus", "N",
                   "Jobs of at most N GPUs are preemptible: a policy may lend them its spare nodes "
                   "and evict them to recover a gang. Default " +
                       std::to_string(d.preemptible_max_gpus) + " (none; the trace does not say).",
                   [&o](std::string_view v) {
                     int x = 0;
                     if (!ParseInt(v, x) || x < 0) {
                       return BadValue("preemptible-max-gpus", v, "an integer >= 0");
                     }
                     o.preemptible_max_gpus = x;
                     return Status::Ok();
                   }});
  flags.push_back(
      {"defrag", "on|off|all",
       "Defragmentation with placement::PlanDefrag under the operator's rules: when a gang waits "
       "although enough GPUs are free, move the fewest preemptible jobs (they lose the work since "
       "their checkpoint and pay the restart cost) so that one rack has room. on: the nvl72 "
       "policy only, like the operator (the baselines have none); all: every policy; off. Needs "
       "--preemptible-max-gpus > 0 to move anything. Default " +
           std::string(DefragScopeName(SimConfig{}.defrag)) + ".",
       [&c](std::string_view v) {
         if (v == "on") {
           c.defrag = DefragScope::kOurs;
         } else if (v == "off") {
           c.defrag = DefragScope::kOff;
         } else if (v == "all") {
           c.defrag = DefragScope::kAll;
         } else {
           return BadValue("defrag", v, "on, off or all");
         }
         return Status::Ok();
       }});
  flags.push_back({"defrag-max-concurrent-moves", "N",
                   "Jobs moved per defragmentation plan at most. Default " +
                       std::to_string(d.defrag.max_moves) + " (the operator's default).",
                   [&o](std::string_view v) {
                     int x = 0;
                     if (!ParseInt(v, x) || x < 1) {
                       return BadValue("defrag-max-concurrent-moves", v, "a positive integer");
                     }
                     o.defrag.max_moves = x;
                     return Status::Ok();
                   }});
  flags.push_back(
      {"defrag-min-interval-seconds", "S",
       "Simulated seconds between two defragmentation plans at least. Default " +
           fmt(d.defrag.min_interval_s) + " (the operator's default).",
       number("defrag-min-interval-seconds", o.defrag.min_interval_s, 0, true, "a number >= 0")});
  flags.push_back(
      {"defrag-cooldown-seconds", "S",
       "A job moved by defragmentation is not moved again within S simulated seconds. "
       "Default " +
           fmt(d.defrag.cooldown_s) + " (the operator's default).",
       number("defrag-cooldown-seconds", o.defrag.cooldown_s, 0, true, "a number >= 0")});
  flags.push_back({"max-jobs", "N", "Replay only the first N jobs in arrival order. Default: all.",
                   positive_int("max-jobs", c.max_jobs)});
  flags.push_back(
      {"json", "", "Print one JSON object instead of the table.", [&c](std::string_view) {
         c.json = true;
         return Status::Ok();
       }});
  flags.push_back({"help", "", "Print this help.", [&c](std::string_view) {
                     c.help = true;
                     return Status::Ok();
                   }});
  return flags;
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
  if (!config.help && config.trace_path.empty()) {
    return InvalidArgumentError("--trace is required (see --help)");
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
    std::string head = "  --" + std::string(f.name);
    if (!f.value_name.empty()) {
      head += " " + std::string(f.value_name);
    }
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
