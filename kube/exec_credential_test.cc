#include "kube/exec_credential.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace nvl72::kube {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kV1 = "client.authentication.k8s.io/v1";

ExecConfig Plugin(const std::string& command) {
  ExecConfig c;
  c.api_version = kV1;
  c.command = command;
  c.interactive_mode = "Never";
  c.user = "me";
  return c;
}

std::string Credential(const std::string& status) {
  return R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":)" +
         status + "}";
}

TEST(ExecCredentialTest, ParsesTokenCertificateAndExpiry) {
  ExecConfig c = Plugin("p");
  auto t = ParseExecCredential(
      Credential(R"({"token":"tok","expirationTimestamp":"2026-12-07T10:00:00Z"})"), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->token, "tok");
  ASSERT_TRUE(t->expiry.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t->expiry), 1796637600);
  auto cert = ParseExecCredential(
      Credential(R"({"clientCertificateData":"CERT","clientKeyData":"KEY"})"), c);
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_EQ(cert->client_cert_pem, "CERT");
  EXPECT_FALSE(cert->expiry.has_value());
}

TEST(ExecCredentialTest, BadOutputIsAnErrorThatNamesThePluginAndHidesTheOutput) {
  ExecConfig c = Plugin("aws");
  struct Case {
    std::string out;
    std::string expect;
  } cases[] = {
      {"token: secret-abc\n", "printed no ExecCredential JSON (18 bytes"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",)"
       R"("status":{"token":"secret-abc"}})",
       "printed apiVersion \"client.authentication.k8s.io/v1beta1\", but the kubeconfig asks"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Secret"})", "not ExecCredential"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})",
       "printed no status"},
      {Credential("{}"), "neither a token nor a client certificate and key"},
      {Credential(R"({"clientCertificateData":"secret-abc"})"), "only one of"},
      {Credential(R"({"token":"secret-abc","expirationTimestamp":"soon"})"), "expirationTimestamp"},
      {Credential(R"({"token":7})"), "not a string"},
  };
  for (const Case& k : cases) {
    auto r = ParseExecCredential(k.out, c);
    ASSERT_FALSE(r.ok()) << k.expect;
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(r.status().message().find(k.expect), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("exec plugin \"aws\" of user \"me\""), std::string::npos);
    EXPECT_EQ(r.status().message().find("secret-abc"), std::string::npos) << r.status();
  }
}

TEST(ExecCredentialTest, InteractiveModesAndExecInfo) {
  ExecConfig c = Plugin("p");
  EXPECT_FALSE(*ExecInteractive(c, true));
  c.interactive_mode = "IfAvailable";
  EXPECT_TRUE(*ExecInteractive(c, true));
  EXPECT_FALSE(*ExecInteractive(c, false));
  c.interactive_mode = "Always";
  EXPECT_TRUE(*ExecInteractive(c, true));
  auto no_tty = ExecInteractive(c, false);
  ASSERT_FALSE(no_tty.ok());
  EXPECT_NE(no_tty.status().message().find("interactiveMode Always"), std::string::npos);

  auto info = nlohmann::json::parse(ExecInfo(c, false));
  EXPECT_EQ(info["apiVersion"], kV1);
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_FALSE(info["spec"].contains("cluster"));
  c.provide_cluster_info = true;
  c.cluster = {{"server", "https://h"}};
  info = nlohmann::json::parse(ExecInfo(c, true));
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://h");
  EXPECT_EQ(info["spec"]["interactive"], true);
}

// Real plugins: shell scripts in a temporary directory.
class RunExecPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nvl72-exec-plugin-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Script(const std::string& name, const std::string& body) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string dir_;
};

TEST_F(RunExecPluginTest, PassesArgsEnvAndExecInfoAndReadsTheToken) {
  // The token is built from what the plugin was given, so the test sees all of it.
  ExecConfig c = Plugin(Script("plugin", R"(
info=$(printf %s "$KUBERNETES_EXEC_INFO" | tr -d '"{}:, ')
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s|%s|%s|%s"}}' "$1" "$2" "$PROFILE" "$info"
)"));
  c.args = {"get-token", "two words"};
  c.env = {{"PROFILE", "training"}};
  auto cred = RunExecPlugin(c);
  ASSERT_TRUE(cred.ok()) << cred.status();
  EXPECT_EQ(cred->token,
            "get-token|two words|training|"
            "apiVersionclient.authentication.k8s.io/v1kindExecCredentialspecinteractivefalse");
}

TEST_F(RunExecPluginTest, MissingCommandGivesTheInstallHint) {
  ExecConfig c = Plugin("nvl72-no-such-plugin");
  c.install_hint = "Install it with: apt install nvl72-no-such-plugin";
  auto r = RunExecPlugin(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("executable \"nvl72-no-such-plugin\" not found"),
            std::string::npos);
  EXPECT_NE(r.status().message().find("Install it with"), std::string::npos);
}

TEST_F(RunExecPluginTest, FailureReportsExitCodeAndLastStderrLine) {
  auto r =
      RunExecPlugin(Plugin(Script("fails",
                                  "echo 'token secret-abc' ; echo 'first' >&2; echo 'expired SSO' "
                                  "'session' >&2; exit 3\n")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(r.status().message().find("failed with exit code 3: expired SSO session"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(r.status().message().find("secret-abc"), std::string::npos);
}

TEST_F(RunExecPluginTest, HangingPluginIsKilledWithItsChildren) {
  const std::string marker = dir_ + "/child-alive";
  ExecConfig c = Plugin(Script("hangs", "(sleep 2; touch " + marker + ") &\nsleep 30\n"));
  c.timeout = 300ms;
  auto t0 = std::chrono::steady_clock::now();
  auto r = RunExecPlugin(c);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("no answer within 0.3 s"), std::string::npos) << r.status();
  std::this_thread::sleep_for(2500ms);
  EXPECT_FALSE(fs::exists(marker));  // the whole process group went
}

TEST_F(RunExecPluginTest, AlwaysWithoutTerminalDoesNotRun) {
  if (isatty(STDIN_FILENO) == 1) GTEST_SKIP() << "standard input is a terminal";
  const std::string marker = dir_ + "/ran";
  ExecConfig c = Plugin(Script("p", "touch " + marker + "\n"));
  c.interactive_mode = "Always";
  auto r = RunExecPlugin(c);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(marker));
}

// ExecAuthenticator with a counting runner and a fake clock.
class ExecAuthenticatorTest : public ::testing::Test {
 protected:
  ExecAuthenticator::Runner Runner() {
    return [this](const ExecConfig&) -> StatusOr<ExecCredential> {
      int n = ++runs_;
      if (fail_) return Status(StatusCode::kUnauthenticated, "plugin failed");
      ExecCredential c;
      c.token = "t" + std::to_string(n);
      if (ttl_.count() > 0) c.expiry = clock_.WallNow() + ttl_;
      return c;
    };
  }
  FakeClock clock_;
  std::atomic<int> runs_{0};
  bool fail_ = false;
  std::chrono::seconds ttl_{0};
};

TEST_F(ExecAuthenticatorTest, CachesUntilExpiry) {
  ttl_ = 60s;
  ExecAuthenticator a(Plugin("p"), &clock_, Runner());
  EXPECT_EQ((*a.Get())->token, "t1");
  clock_.Advance(59s);
  EXPECT_EQ((*a.Get())->token, "t1");
  clock_.Advance(1s);
  EXPECT_EQ((*a.Get())->token, "t2");
  EXPECT_EQ(a.runs(), 2);
}

TEST_F(ExecAuthenticatorTest, WithoutExpiryOnlyA401RunsItAgainOnce) {
  ExecAuthenticator a(Plugin("p"), &clock_, Runner());
  auto first = *a.Get();
  clock_.Advance(std::chrono::hours(24 * 365));
  EXPECT_EQ(*a.Get(), first);
  ASSERT_TRUE(a.Refresh(first).ok());
  EXPECT_EQ((*a.Get())->token, "t2");
  ASSERT_TRUE(a.Refresh(first).ok());  // a second caller with the old one: already replaced
  EXPECT_EQ(a.runs(), 2);
}

TEST_F(ExecAuthenticatorTest, ConcurrentCallersShareOneRun) {
  ExecAuthenticator a(Plugin("p"), &clock_, Runner());
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { EXPECT_TRUE(a.Get().ok()); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.runs(), 1);
}

TEST_F(ExecAuthenticatorTest, FailureIsReturnedAndRetriedNextTime) {
  fail_ = true;
  ExecAuthenticator a(Plugin("p"), &clock_, Runner());
  EXPECT_EQ(a.Get().status().code(), StatusCode::kUnauthenticated);
  fail_ = false;
  EXPECT_EQ((*a.Get())->token, "t2");
}

}  // namespace
}  // namespace nvl72::kube
