// Output of nvl72-sim: the JSON object of --json and the human-readable table.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/runner.h"

namespace nvl72::sim {

// {"policies": {"<name>": {"usable_capacity": x, ...counters}, ...}, "config": {...}}.
// Deterministic: no timestamps or durations of the run itself.
nlohmann::json ReportToJson(const RunReport& report);

// One row per policy, the configuration, and each policy's usable capacity relative to `spread`
// (when spread ran).
std::string FormatTable(const RunReport& report);

}  // namespace nvl72::sim
