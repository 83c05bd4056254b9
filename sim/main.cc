// nvl72-sim: command-line entry point. Parses flags, runs every policy, prints a table or JSON.
// Exit codes: 0 ok, 2 bad input, 1 internal error.
#include <iostream>
#include <string_view>
#include <vector>

#include "sim/flags.h"
#include "sim/report.h"
#include "sim/runner.h"

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  nvl72::StatusOr<nvl72::sim::SimConfig> config = nvl72::sim::ParseFlags(args);
  if (!config.ok()) {
    std::cerr << "nvl72-sim: " << config.status().message() << "\n";
    return 2;
  }
  if (config->help) {
    std::cout << nvl72::sim::HelpText();
    return 0;
  }
  nvl72::StatusOr<nvl72::sim::RunReport> report = nvl72::sim::RunSimulation(*config);
  if (!report.ok()) {
    std::cerr << "nvl72-sim: " << report.status().message() << "\n";
    return report.status().code() == nvl72::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (config->json) {
    std::cout << nvl72::sim::ReportToJson(*report).dump(2) << "\n";
  } else {
    std::cout << nvl72::sim::FormatTable(*report);
  }
  return 0;
}
