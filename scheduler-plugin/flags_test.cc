#include "scheduler-plugin/flags.h"

#include <gtest/gtest.h>

namespace nvl72::extender {
namespace {

TEST(FlagsTest, Defaults) {
  auto f = ParseFlags({});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->server.host, "127.0.0.1");
  EXPECT_EQ(f->server.port, 8888);
  EXPECT_EQ(f->extender.policy, "nvl72");
  EXPECT_EQ(f->extender.spares_per_domain, 2);
  EXPECT_TRUE(f->extender.keep_off_spares);
  EXPECT_EQ(f->domain_label, "nvidia.com/gpu.clique");
  EXPECT_TRUE(f->kubeconfig.empty());
}

TEST(FlagsTest, ValuesInBothForms) {
  auto f = ParseFlags({"--kubeconfig",
                       "/k",
                       "--listen=0.0.0.0:9443",
                       "--tls-cert",
                       "c",
                       "--tls-key=k",
                       "--client-ca",
                       "ca",
                       "--policy=spread",
                       "--spares-per-domain",
                       "0",
                       "--keep-off-spares=false",
                       "--domain-label",
                       "rack",
                       "--prefix",
                       "nvl72/",
                       "--workers=3",
                       "--log-level",
                       "debug",
                       "--log-format=json"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kubeconfig, "/k");
  EXPECT_EQ(f->server.host, "0.0.0.0");
  EXPECT_EQ(f->server.port, 9443);
  EXPECT_EQ(f->server.client_ca, "ca");
  EXPECT_EQ(f->extender.policy, "spread");
  EXPECT_EQ(f->extender.spares_per_domain, 0);
  EXPECT_FALSE(f->extender.keep_off_spares);
  EXPECT_EQ(f->domain_label, "rack");
  EXPECT_EQ(f->server.prefix, "/nvl72");
  EXPECT_EQ(f->server.workers, 3);
  EXPECT_EQ(f->log_level, "debug");
  EXPECT_EQ(f->log_format, "json");
}

TEST(FlagsTest, ListenForms) {
  std::string h;
  int p = 0;
  ASSERT_TRUE(ParseListen("[::1]:80", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_EQ(p, 80);
  ASSERT_TRUE(ParseListen(":0", &h, &p).ok());
  EXPECT_EQ(h, "0.0.0.0");
  EXPECT_FALSE(ParseListen("nohost", &h, &p).ok());
  EXPECT_FALSE(ParseListen("h:99999", &h, &p).ok());
}

TEST(FlagsTest, Errors) {
  EXPECT_FALSE(ParseFlags({"--bogus"}).ok());
  EXPECT_FALSE(ParseFlags({"--policy"}).ok());
  EXPECT_FALSE(ParseFlags({"--spares-per-domain", "-1"}).ok());
  EXPECT_FALSE(ParseFlags({"--keep-off-spares=maybe"}).ok());
  EXPECT_FALSE(ParseFlags({"--tls-cert", "c"}).ok());
  EXPECT_FALSE(ParseFlags({"--client-ca", "ca"}).ok());
  EXPECT_FALSE(ParseFlags({"--log-level", "loud"}).ok());
  EXPECT_FALSE(ParseFlags({"--log-format", "xml"}).ok());
  EXPECT_FALSE(ParseFlags({"--score-normalization", "log"}).ok());
  EXPECT_EQ(ParseFlags({"--score-normalization=linear"})->extender.normalization,
            ScoreNormalization::kLinear);
  EXPECT_TRUE(ParseFlags({"--help"})->help);
  EXPECT_TRUE(ParseFlags({"--version"})->version);
  EXPECT_NE(Usage().find("--listen"), std::string::npos);
}

}  // namespace
}  // namespace nvl72::extender
