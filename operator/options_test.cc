#include "operator/options.h"

#include <gtest/gtest.h>

namespace nvl72::op {
namespace {

TEST(OptionsTest, Defaults) {
  auto o = ParseOptions({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->domain_label, "nvidia.com/gpu.clique");
  EXPECT_EQ(o->spares_per_domain, 2);
  EXPECT_EQ(o->spare_reserve, placement::SpareReserve::kSoft);
  EXPECT_EQ(o->policy, "nvl72");
  EXPECT_FALSE(o->leader_elect);
  EXPECT_EQ(o->ns, "");
  EXPECT_EQ(o->log_format, "text");
  EXPECT_EQ(o->health_stall_seconds, 300);
}

TEST(OptionsTest, BothFlagForms) {
  auto o = ParseOptions({"--kubeconfig", "/k", "--namespace=team", "--spares-per-domain=0",
                         "--leader-elect", "--lease-name", "l", "--policy=first-fit",
                         "--domain-label-fallback", "rack", "--metrics-addr=:9090", "--health-addr",
                         "127.0.0.1:0", "--log-level=debug", "--log-format", "json",
                         "--health-stall-seconds=7"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->kubeconfig, "/k");
  EXPECT_EQ(o->ns, "team");
  EXPECT_EQ(o->spares_per_domain, 0);
  EXPECT_TRUE(o->leader_elect);
  EXPECT_EQ(o->lease_name, "l");
  EXPECT_EQ(o->policy, "first-fit");
  EXPECT_EQ(o->domain_label_fallback, "rack");
  EXPECT_EQ(o->log_level, "debug");
  auto hard = ParseOptions({"--spare-reserve=hard"});
  ASSERT_TRUE(hard.ok()) << hard.status();
  EXPECT_EQ(hard->spare_reserve, placement::SpareReserve::kHard);
  auto soft = ParseOptions({"--spare-reserve", "soft"});
  ASSERT_TRUE(soft.ok()) << soft.status();
  EXPECT_EQ(soft->spare_reserve, placement::SpareReserve::kSoft);
  EXPECT_EQ(o->log_format, "json");
  EXPECT_EQ(o->health_stall_seconds, 7);
  auto off = ParseOptions({"--leader-elect=false"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->leader_elect);
}

TEST(OptionsTest, ErrorsNameTheFlag) {
  for (auto [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--bogus"}, "unknown flag --bogus"},
           {{"--bogus", "value"}, "unknown flag --bogus"},
           {{"--spares-per-domain", "x"}, "--spares-per-domain"},
           {{"--spare-reserve", "firm"}, "--spare-reserve"},
           {{"--policy", "magic"}, "--policy"},
           {{"--metrics-addr", "nohost"}, "--metrics-addr"},
           {{"--log-level", "loud"}, "--log-level"},
           {{"--log-format", "xml"}, "--log-format"},
           {{"--health-stall-seconds", "-1"}, "--health-stall-seconds"},
           {{"--namespace"}, "--namespace"},
           {{"--leader-elect=maybe"}, "--leader-elect"},
           {{"--cordoned-ranks=evict"}, "--cordoned-ranks"},
           {{"--recovery-wait-seconds=-5"}, "--recovery-wait-seconds"},
           {{"--defrag-max-concurrent-moves=0"}, "--defrag-max-concurrent-moves"},
           {{"--defrag=sometimes"}, "--defrag"},
           {{"--defrag-move-timeout-seconds=0"}, "--defrag-move-timeout-seconds"},
           {{"--metrics-tls-cert=/a.crt"}, "--metrics-tls-cert and --metrics-tls-key go together"},
           {{"--metrics-client-ca=/ca.crt"}, "--metrics-client-ca needs --metrics-tls-cert"}}) {
    auto o = ParseOptions(args);
    ASSERT_FALSE(o.ok()) << flag;
    EXPECT_NE(o.status().message().find(flag), std::string::npos) << o.status().message();
  }
}

TEST(OptionsTest, RecoveryAndDefragFlags) {
  auto d = ParseOptions({});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->recovery_wait_seconds, -1) << "unset: 3 x the job's grace";
  EXPECT_EQ(d->cordoned_ranks, "keep");
  EXPECT_TRUE(d->defrag);
  auto o = ParseOptions({"--recovery-wait-seconds=90", "--cordoned-ranks", "move", "--defrag=false",
                         "--defrag-max-concurrent-moves=3", "--defrag-min-interval-seconds=7",
                         "--defrag-cooldown-seconds", "120", "--defrag-grace-seconds=0",
                         "--defrag-move-timeout-seconds=300"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->recovery_wait_seconds, 90);
  EXPECT_EQ(o->cordoned_ranks, "move");
  EXPECT_FALSE(o->defrag);
  EXPECT_EQ(o->defrag_max_concurrent_moves, 3);
  EXPECT_EQ(o->defrag_min_interval_seconds, 7);
  EXPECT_EQ(o->defrag_cooldown_seconds, 120);
  EXPECT_EQ(o->defrag_grace_seconds, 0);
  EXPECT_EQ(o->defrag_move_timeout_seconds, 300);
  EXPECT_EQ(d->defrag_move_timeout_seconds, 600);
}

TEST(OptionsTest, HelpAndVersion) {
  EXPECT_TRUE(ParseOptions({"--help"})->help);
  EXPECT_TRUE(ParseOptions({"--version"})->version);
  EXPECT_NE(Usage().find("--spares-per-domain"), std::string::npos);
  EXPECT_NE(Usage().find("--spare-reserve"), std::string::npos);
}

TEST(OptionsTest, SplitHostPort) {
  std::string h;
  int p = 0;
  ASSERT_TRUE(SplitHostPort(":8080", &h, &p));
  EXPECT_EQ(h, "0.0.0.0");
  EXPECT_EQ(p, 8080);
  ASSERT_TRUE(SplitHostPort("[::1]:81", &h, &p));
  EXPECT_EQ(h, "::1");
  EXPECT_FALSE(SplitHostPort("host", &h, &p));
  EXPECT_FALSE(SplitHostPort("h:99999", &h, &p));
}

}  // namespace
}  // namespace nvl72::op
