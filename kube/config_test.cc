#include "kube/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace nvl72::kube {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nvl72-kube-config-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

// base64("CA PEM"), base64("CERT"), base64("KEY")
const char* kInline = R"(apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: Q0EgUEVN
    server: https://127.0.0.1:6443
  name: local
- name: other
  cluster:
    server: "https://[::1]:7443"   # quoted, with a comment
    insecure-skip-tls-verify: true
contexts:
- context:
    cluster: local
    user: admin
    namespace: team-a
  name: admin@local
- name: reader@other
  context: {cluster: other, user: reader}
current-context: admin@local
preferences: {}
users:
- name: admin
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: reader
  user:
    token: 'abc''def'
)";

TEST_F(ConfigTest, InlineDataAndCurrentContext) {
  auto c = ParseKubeconfig(kInline, dir_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_data, "CA PEM");
  EXPECT_EQ(c->client_cert_data, "CERT");
  EXPECT_EQ(c->client_key_data, "KEY");
  EXPECT_EQ(c->default_namespace, "team-a");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_TRUE(c->token.empty());
}

TEST_F(ConfigTest, FlowContextTokenAndInsecure) {
  auto c = ParseKubeconfig(kInline, dir_, "reader@other");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://[::1]:7443");
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->token, "abc'def");
  auto token = c->BearerToken();
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "abc'def");
}

TEST_F(ConfigTest, FilesResolvedRelativeToKubeconfigAndTokenFileReRead) {
  Write("ca.crt", "CA");
  Write("token", "  first-token\n");
  std::string path = Write("kubeconfig", R"(
apiVersion: v1
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:443
    certificate-authority: ca.crt
contexts:
- name: x
  context:
    cluster: c
    user: u
current-context: x
users:
- name: u
  user:
    tokenFile: token
    client-certificate: /abs/client.crt
    client-key: sub/client.key
)");
  auto c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_file, dir_ + "/ca.crt");
  EXPECT_EQ(c->token_file, dir_ + "/token");
  EXPECT_EQ(c->client_cert_file, "/abs/client.crt");
  EXPECT_EQ(c->client_key_file, dir_ + "/sub/client.key");
  auto t = c->BearerToken();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "first-token");
  Write("token", "rotated\n");
  EXPECT_EQ(*c->BearerToken(), "rotated");
  // DebugString never shows the token.
  EXPECT_EQ(c->DebugString().find("rotated"), std::string::npos);
  fs::remove(dir_ + "/token");
  EXPECT_EQ(c->BearerToken().status().code(), StatusCode::kUnauthenticated);
}

TEST_F(ConfigTest, JsonKubeconfig) {
  auto c = ParseKubeconfig(
      R"({"clusters":[{"name":"c","cluster":{"server":"https://h:1","insecure-skip-tls-verify":true}}],
          "contexts":[{"name":"x","context":{"cluster":"c"}}],"current-context":"x"})",
      dir_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://h:1");
}

TEST_F(ConfigTest, MissingPiecesAreClearErrors) {
  struct Case {
    std::string context;
    std::string text;
    std::string expect;
  } cases[] = {
      {"nope", kInline, "context \"nope\" not found"},
      {"", "clusters: []\n", "current-context is not set"},
      {"", "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: gone\n",
       "cluster \"gone\" not found"},
      {"",
       "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
       "clusters:\n- name: c\n  cluster:\n    server: https://h\n",
       "user \"u\" not found"},
      {"",
       "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n"
       "clusters:\n- name: c\n  cluster:\n    certificate-authority-data: QQ==\n",
       "has no server"},
      {"",
       "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
       "clusters:\n- name: c\n  cluster:\n    server: https://h\nusers:\n- name: u\n  user:\n"
       "    auth-provider:\n      name: gcp\n",
       "\"auth-provider\" authentication is not supported"},
      {"",
       "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
       "clusters:\n- name: c\n  cluster:\n    server: https://h\nusers:\n- name: u\n  user:\n"
       "    client-certificate-data: QQ==\n",
       "must be given together"},
      {"",
       "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n"
       "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
       "    certificate-authority-data: '!!notbase64'\n",
       "not valid base64"},
      {"",
       "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n"
       "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
       "    certificate-authority-data: QQ==\n    insecure-skip-tls-verify: true\n",
       "cannot be combined"},
      {"",
       "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n"
       "clusters:\n- name: c\n  cluster:\n    server: ftp://h\n",
       "must start with https://"},
      // Found by the kubeconfig fuzzer: a non-string name threw out of the parser (terminate).
      {"",
       "current-context: x\ncontexts:\n- name: false\n  context: {cluster: c}\n- name: x\n"
       "  context:\n    cluster: c\nclusters:\n- name: 7\n  cluster: {server: https://h}\n",
       "cluster \"c\" not found"},
  };
  for (const Case& c : cases) {
    auto r = ParseKubeconfig(c.text, dir_, c.context, "/k");
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("kubeconfig /k"), std::string::npos);
  }
  auto missing = LoadKubeconfig(dir_ + "/does-not-exist");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does-not-exist"), std::string::npos);
}

TEST_F(ConfigTest, InClusterConfig) {
  EXPECT_EQ(InClusterConfigFrom("", "", dir_).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(InClusterConfigFrom("10.0.0.1", "443", dir_).status().code(),
            StatusCode::kFailedPrecondition);  // no token file
  Write("token", "sa-token\n");
  Write("ca.crt", "CA");
  Write("namespace", "nvl72-system\n");
  auto c = InClusterConfigFrom("fd00::1", "443", dir_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  EXPECT_EQ(c->ca_file, dir_ + "/ca.crt");
  EXPECT_EQ(c->default_namespace, "nvl72-system");
  EXPECT_EQ(*c->BearerToken(), "sa-token");
  auto v4 = InClusterConfigFrom("10.0.0.1", "6443", dir_);
  EXPECT_EQ(v4->server, "https://10.0.0.1:6443");
}

}  // namespace
}  // namespace nvl72::kube
