#include "sim/flags.h"

#include <gtest/gtest.h>

namespace nvl72::sim {
namespace {

StatusOr<SimConfig> Parse(std::vector<std::string_view> args) { return ParseFlags(args); }

TEST(ParseFlags, DefaultsAndOverrides) {
  StatusOr<SimConfig> c = Parse({"--trace", "t.csv"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->trace_path, "t.csv");
  EXPECT_EQ(c->options.cluster.racks, 8);
  EXPECT_EQ(c->options.cluster.nodes_per_rack, 18);
  EXPECT_EQ(c->options.cluster.gpus_per_node, 4);
  EXPECT_EQ(c->options.spares, 2);
  EXPECT_EQ(c->options.spare_reserve, placement::SpareReserve::kSoft);
  EXPECT_DOUBLE_EQ(c->options.cross_domain_speed, 0.57);
  EXPECT_DOUBLE_EQ(c->load, 1.0);
  EXPECT_TRUE(c->policies.empty());
  EXPECT_FALSE(c->json);
  EXPECT_EQ(c->defrag, DefragScope::kOurs);  // like the operator: on
  EXPECT_EQ(c->options.defrag.max_moves, 2);
  EXPECT_DOUBLE_EQ(c->options.defrag.min_interval_s, 30);
  EXPECT_DOUBLE_EQ(c->options.defrag.cooldown_s, 600);

  c = Parse({"--trace=t.csv",
             "--racks",
             "3",
             "--nodes-per-rack=4",
             "--gpus-per-node",
             "8",
             "--policies",
             "nvl72,spread",
             "--spares",
             "0",
             "--spare-reserve",
             "hard",
             "--load",
             "1.5",
             "--seed",
             "99",
             "--mtbf-hours",
             "0",
             "--repair-hours",
             "2",
             "--checkpoint-minutes",
             "0",
             "--restart-minutes",
             "5",
             "--cross-domain-speed",
             "1",
             "--max-jobs",
             "10",
             "--defrag",
             "all",
             "--defrag-max-concurrent-moves",
             "3",
             "--defrag-min-interval-seconds=0",
             "--defrag-cooldown-seconds",
             "60.5",
             "--json"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->options.cluster.racks, 3);
  EXPECT_EQ(c->options.cluster.nodes_per_rack, 4);
  EXPECT_EQ(c->options.cluster.gpus_per_node, 8);
  EXPECT_EQ(c->policies, (std::vector<std::string>{"nvl72", "spread"}));
  EXPECT_EQ(c->options.spares, 0);
  EXPECT_EQ(c->options.spare_reserve, placement::SpareReserve::kHard);
  EXPECT_DOUBLE_EQ(c->load, 1.5);
  EXPECT_EQ(c->options.seed, 99u);
  EXPECT_DOUBLE_EQ(c->options.mtbf_hours, 0);
  EXPECT_DOUBLE_EQ(c->options.repair_hours, 2);
  EXPECT_DOUBLE_EQ(c->options.checkpoint_minutes, 0);
  EXPECT_DOUBLE_EQ(c->options.restart_minutes, 5);
  EXPECT_DOUBLE_EQ(c->options.cross_domain_speed, 1);
  EXPECT_EQ(c->max_jobs, 10);
  EXPECT_TRUE(c->json);
  EXPECT_EQ(c->defrag, DefragScope::kAll);
  EXPECT_EQ(c->options.defrag.max_moves, 3);
  EXPECT_DOUBLE_EQ(c->options.defrag.min_interval_s, 0);
  EXPECT_DOUBLE_EQ(c->options.defrag.cooldown_s, 60.5);
  c = Parse({"--trace", "t", "--defrag", "off"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->defrag, DefragScope::kOff);
}

TEST(ParseFlags, FailureHeavyRegimesAndTheSyntheticMix) {
  StatusOr<SimConfig> c = Parse({"--trace", "t.csv"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->options.rack_mtbf_hours, 0);  // no sourced rate: off unless swept
  EXPECT_DOUBLE_EQ(c->options.rack_repair_hours, 24);
  EXPECT_EQ(c->options.gang_recovery, GangRecovery::kHold);  // the operator's recovery
  EXPECT_DOUBLE_EQ(c->options.recovery_wait_s, 180);
  EXPECT_TRUE(c->mix.empty());

  c = Parse({"--mix", "llm", "--mix-days=7", "--rack-mtbf-hours", "720", "--rack-repair-hours", "6",
             "--gang-recovery", "requeue", "--recovery-wait-seconds", "0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mix, "llm");
  EXPECT_TRUE(c->trace_path.empty());
  EXPECT_DOUBLE_EQ(c->mix_days, 7);
  EXPECT_DOUBLE_EQ(c->options.rack_mtbf_hours, 720);
  EXPECT_DOUBLE_EQ(c->options.rack_repair_hours, 6);
  EXPECT_EQ(c->options.gang_recovery, GangRecovery::kRequeue);
  EXPECT_DOUBLE_EQ(c->options.recovery_wait_s, 0);
}

TEST(ParseFlags, HelpNeedsNoTrace) {
  StatusOr<SimConfig> c = Parse({"--help"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->help);
}

TEST(ParseFlags, BadValuesNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string_view>, std::string>> cases = {
      {{}, "--trace is required"},
      {{"--trace", "t", "--racks", "0"}, "--racks: expected a positive integer, got '0'"},
      {{"--trace", "t", "--racks", "2x"}, "--racks"},
      {{"--trace", "t", "--load", "0"}, "--load: expected a number > 0"},
      {{"--trace", "t", "--load", "-1"}, "--load"},
      {{"--trace", "t", "--spares", "-1"}, "--spares"},
      {{"--trace", "t", "--spare-reserve", "firm"}, "--spare-reserve"},
      {{"--trace", "t", "--mtbf-hours", "x"}, "--mtbf-hours"},
      {{"--trace", "t", "--cross-domain-speed", "1.5"}, "--cross-domain-speed"},
      {{"--trace", "t", "--cross-domain-speed", "0"}, "--cross-domain-speed"},
      {{"--trace", "t", "--seed", "-3"}, "--seed"},
      {{"--trace", "t", "--preemptible-max-gpus", "-1"}, "--preemptible-max-gpus"},
      {{"--trace", "t", "--policies", "a,,b"}, "--policies"},
      {{"--trace", "t", "--defrag", "yes"}, "--defrag: expected on, off or all"},
      {{"--trace", "t", "--defrag-max-concurrent-moves", "0"}, "--defrag-max-concurrent-moves"},
      {{"--trace", "t", "--defrag-min-interval-seconds", "-1"}, "--defrag-min-interval-seconds"},
      {{"--trace", "t", "--defrag-cooldown-seconds", "x"}, "--defrag-cooldown-seconds"},
      {{"--trace", "t", "--racks"}, "--racks needs a value"},
      {{"--trace", "t", "--json=1"}, "--json takes no value"},
      {{"--trace", "t", "--bogus", "1"}, "unknown flag --bogus"},
      {{"--trace", "t", "stray"}, "unexpected argument 'stray'"},
      {{"--mix", "gpt"}, "--mix: expected llm"},
      {{"--trace", "t", "--mix", "llm"}, "--trace and --mix exclude each other"},
      {{"--mix", "llm", "--mix-days", "0"}, "--mix-days"},
      {{"--trace", "t", "--rack-mtbf-hours", "-1"}, "--rack-mtbf-hours"},
      {{"--trace", "t", "--rack-repair-hours", "x"}, "--rack-repair-hours"},
      {{"--trace", "t", "--gang-recovery", "wait"}, "--gang-recovery: expected hold or requeue"},
      {{"--trace", "t", "--recovery-wait-seconds", "-5"}, "--recovery-wait-seconds"},
  };
  for (const auto& [args, message] : cases) {
    StatusOr<SimConfig> c = Parse(args);
    ASSERT_FALSE(c.ok()) << message;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(message), std::string::npos)
        << "got: " << c.status().message() << "; want: " << message;
  }
}

TEST(HelpText, DocumentsEveryFlagWithItsDefault) {
  // Collapse the word-wrapping so that "Default\n    12669" reads "Default 12669".
  std::string help;
  for (char c : HelpText()) {
    if (c == '\n') c = ' ';
    if (c == ' ' && !help.empty() && help.back() == ' ') continue;
    help += c;
  }
  for (const char* flag : {"--trace",
                           "--racks",
                           "--nodes-per-rack",
                           "--gpus-per-node",
                           "--policies",
                           "--spares",
                           "--spare-reserve",
                           "--load",
                           "--seed",
                           "--mtbf-hours",
                           "--repair-hours",
                           "--checkpoint-minutes",
                           "--restart-minutes",
                           "--cross-domain-speed",
                           "--preemptible-max-gpus",
                           "--defrag",
                           "--defrag-max-concurrent-moves",
                           "--defrag-min-interval-seconds",
                           "--defrag-cooldown-seconds",
                           "--max-jobs",
                           "--mix",
                           "--mix-days",
                           "--rack-mtbf-hours",
                           "--rack-repair-hours",
                           "--gang-recovery",
                           "--recovery-wait-seconds",
                           "--json",
                           "--help"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(help.find("Default 0.57"), std::string::npos);
  EXPECT_NE(help.find("Default 12669"), std::string::npos);
  EXPECT_NE(help.find("Default soft"), std::string::npos);
  EXPECT_NE(help.find("Default on."), std::string::npos);
  EXPECT_NE(help.find("Default 600"), std::string::npos);
  EXPECT_NE(help.find("Default hold."), std::string::npos);
  EXPECT_NE(help.find("Default 180"), std::string::npos);
}

}  // namespace
}  // namespace nvl72::sim
