// Kubeconfigs whose user is an exec credential plugin, in the shapes that the managed clusters'
// tools write (written here from their documented output: `aws eks update-kubeconfig`,
// `gcloud container clusters get-credentials`, `az aks get-credentials` + `kubelogin
// convert-kubeconfig`, `oci ce cluster create-kubeconfig`), and the exec section's validation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kube/config.h"

namespace nvl72::kube {
namespace {

namespace fs = std::filesystem;

// One cluster, context and user named `name`; `user` is the user's body, indented by 4.
std::string Kubeconfig(const std::string& name, const std::string& server,
                       const std::string& user) {
  return "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0EgUEVN\n"
         "    server: " +
         server + "\n  name: " + name + "\ncontexts:\n- context:\n    cluster: " + name +
         "\n    user: " + name + "\n  name: " + name + "\ncurrent-context: " + name +
         "\nkind: Config\npreferences: {}\nusers:\n- name: " + name + "\n  user:\n" + user;
}

TEST(KubeconfigExecTest, EksShape) {
  const std::string arn = "arn:aws:eks:us-west-2:111122223333:cluster/gb200";
  auto c = ParseKubeconfig(Kubeconfig(arn, "https://0A1B2C3D.gr7.us-west-2.eks.amazonaws.com",
                                      R"(    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --region
      - us-west-2
      - eks
      - get-token
      - --cluster-name
      - gb200
      - --output
      - json
      command: aws
      env:
      - name: AWS_PROFILE
        value: training
)"),
                           "/home/me/.kube");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->exec.has_value());
  EXPECT_EQ(c->exec->command, "aws");
  EXPECT_EQ(c->exec->args.size(), 8u);
  EXPECT_EQ(c->exec->args[3], "get-token");
  ASSERT_EQ(c->exec->env.size(), 1u);
  EXPECT_EQ(c->exec->env[0].first, "AWS_PROFILE");
  EXPECT_EQ(c->exec->env[0].second, "training");
  EXPECT_EQ(c->exec->interactive_mode, "IfAvailable");  // the v1beta1 default
  EXPECT_FALSE(c->exec->provide_cluster_info);
  EXPECT_EQ(c->exec->user, arn);
  EXPECT_EQ(c->DebugString().find("token"), std::string::npos);
  EXPECT_NE(c->DebugString().find("exec plugin aws"), std::string::npos);
}

TEST(KubeconfigExecTest, GkeShapeWithFoldedInstallHintAndClusterInfo) {
  auto c = ParseKubeconfig(Kubeconfig("gke_proj_us-central1_gb200", "https://34.1.2.3",
                                      R"(    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin for use with kubectl by following
        https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
      provideClusterInfo: true
)"),
                           "/k");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->exec->install_hint,
            "Install gke-gcloud-auth-plugin for use with kubectl by following "
            "https://cloud.google.com/kubernetes-engine/docs/how-to/"
            "cluster-access-for-kubectl#install_plugin");
  EXPECT_TRUE(c->exec->provide_cluster_info);
  EXPECT_EQ(c->exec->cluster["server"], "https://34.1.2.3");
  EXPECT_EQ(c->exec->cluster["certificate-authority-data"], "Q0EgUEVN");
}

TEST(KubeconfigExecTest, AksKubeloginShapeWithIndentedBlockScalar) {
  auto c = ParseKubeconfig(Kubeconfig("gb200", "https://gb200-dns-1a2b3c.hcp.eastus.azmk8s.io:443",
                                      R"(    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - get-token
      - --login
      - azurecli
      - --server-id
      - 00000000-1111-2222-3333-444444444444
      command: kubelogin
      env: null
      installHint: |2

        kubelogin is not installed which is required to connect to AAD enabled cluster.

        To learn more, please go to https://aka.ms/aks/kubelogin
      provideClusterInfo: false
)"),
                           "/k");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->exec->command, "kubelogin");
  EXPECT_EQ(c->exec->args[2], "azurecli");
  EXPECT_TRUE(c->exec->env.empty());
  EXPECT_EQ(c->exec->install_hint,
            "\nkubelogin is not installed which is required to connect to AAD enabled cluster.\n\n"
            "To learn more, please go to https://aka.ms/aks/kubelogin\n");
}

TEST(KubeconfigExecTest, OkeShapeV1WithInteractiveMode) {
  auto c = ParseKubeconfig(Kubeconfig("cluster-c1a2b3", "https://10.0.0.5:6443",
                                      R"(    exec:
      apiVersion: client.authentication.k8s.io/v1
      args: [ce, cluster, generate-token, --cluster-id, "ocid1.cluster.oc1.iad.aaaa", --region, us-ashburn-1]
      command: oci
      env: []
      interactiveMode: Never
)"),
                           "/k");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->exec->api_version, "client.authentication.k8s.io/v1");
  EXPECT_EQ(c->exec->args.size(), 7u);
  EXPECT_EQ(c->exec->interactive_mode, "Never");
}

TEST(KubeconfigExecTest, ClusterInfoReadsTheCaFileAndTheExtension) {
  char tmpl[] = "/tmp/nvl72-exec-config-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/ca.crt") << "CA";
  auto c = ParseKubeconfig(R"(clusters:
- name: c
  cluster:
    server: https://h:443
    certificate-authority: ca.crt
    tls-server-name: api.internal
    extensions:
    - name: other
      extension: {x: 1}
    - name: client.authentication.k8s.io/exec
      extension:
        audience: gb200
contexts:
- {name: x, context: {cluster: c, user: u}}
current-context: x
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/plugin
      interactiveMode: IfAvailable
      provideClusterInfo: true
)",
                           dir);
  fs::remove_all(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->exec->command, dir + "/./bin/plugin");  // relative to the kubeconfig, as kubectl
  EXPECT_EQ(c->exec->cluster["certificate-authority-data"], "Q0E=");  // base64("CA")
  EXPECT_EQ(c->exec->cluster["tls-server-name"], "api.internal");
  EXPECT_EQ(c->exec->cluster["config"]["audience"], "gb200");
}

TEST(KubeconfigExecTest, BadExecSectionsAreClearErrors) {
  struct Case {
    std::string exec;
    std::string expect;
  } cases[] = {
      {"      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: a\n",
       "is not client.authentication.k8s.io/v1 or v1beta1"},
      {"      apiVersion: client.authentication.k8s.io/v1beta1\n", "no command"},
      {"      apiVersion: client.authentication.k8s.io/v1\n      command: a\n",
       "interactiveMode \"\" is not Never, IfAvailable or Always (v1 requires it)"},
      {"      apiVersion: client.authentication.k8s.io/v1\n      command: a\n"
       "      interactiveMode: Sometimes\n",
       "interactiveMode \"Sometimes\""},
      {"      apiVersion: client.authentication.k8s.io/v1beta1\n      command: a\n"
       "      env:\n      - value: x\n",
       "an env entry has no name"},
      {"      apiVersion: client.authentication.k8s.io/v1beta1\n      command: a\n"
       "      args: get-token\n",
       "args is not a list"},
  };
  for (const Case& c : cases) {
    auto r = ParseKubeconfig(Kubeconfig("n", "https://h", "    exec:\n" + c.exec), "/d", "", "/k");
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("user \"n\": exec"), std::string::npos) << r.status();
  }
  auto both = ParseKubeconfig(
      Kubeconfig("n", "https://h",
                 "    token: t\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                 "      command: a\n"),
      "/d");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("cannot be combined"), std::string::npos);
}

}  // namespace
}  // namespace nvl72::kube
