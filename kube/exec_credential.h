// Exec credential plugins (client.authentication.k8s.io v1 and v1beta1), as client-go runs them:
// `aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`, `oci ce cluster generate-token`.
//
// A kubeconfig user's `exec` section names a command; the client runs it with `args`, its own
// environment plus `env`, and KUBERNETES_EXEC_INFO (an ExecCredential whose spec says whether the
// run is interactive and, with provideClusterInfo, describes the cluster). The command prints an
// ExecCredential whose status holds a bearer token or a client certificate and key, and maybe an
// expirationTimestamp. The credential is kept until that time; the plugin runs again after it and
// after the API server answers 401.
//
// Interactive runs (the plugin gets our standard input): interactiveMode Never: never;
// IfAvailable: when standard input is a terminal; Always: required (error without a terminal, as
// in the operator). A non-interactive run gets /dev/null as input, its own process group (killed
// whole on timeout) and its standard error captured for the error message; an interactive one
// shares our terminal and has no time limit shorter than kExecInteractiveTimeout.
//
// Errors name the plugin and the kubeconfig user; they never contain the plugin's standard output
// (it may hold a token).
//
// Thread-safety: the free functions are pure or self-contained; ExecAuthenticator is thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kube/clock.h"

namespace nvl72::kube {

inline constexpr std::chrono::seconds kExecInteractiveTimeout{600};

struct ExecConfig {
  std::string api_version{};  // "client.authentication.k8s.io/v1" or ".../v1beta1"
  std::string command{};      // a relative path with a '/' is resolved against the kubeconfig's dir
  std::vector<std::string> args{};
  std::vector<std::pair<std::string, std::string>> env{};
  std::string install_hint{};
  bool provide_cluster_info = false;
  std::string interactive_mode{};  // "Never", "IfAvailable" or "Always"
  // spec.cluster of KUBERNETES_EXEC_INFO when provide_cluster_info (server, tls-server-name,
  // insecure-skip-tls-verify, certificate-authority-data, proxy-url, config).
  nlohmann::json cluster = nlohmann::json::object();
  std::string user{};  // the kubeconfig user, for messages
  // Limit of a non-interactive run (an interactive one gets kExecInteractiveTimeout).
  std::chrono::milliseconds timeout{30000};

  // `exec plugin "aws" of user "arn:..."`: how errors name the plugin.
  std::string Describe() const;
};

struct ExecCredential {
  std::string token{};
  std::string client_cert_pem{};
  std::string client_key_pem{};
  std::optional<std::chrono::system_clock::time_point> expiry{};
};

// Whether a run is interactive, given whether standard input is a terminal; kFailedPrecondition
// for Always without one.
StatusOr<bool> ExecInteractive(const ExecConfig& config, bool stdin_is_terminal);

// The KUBERNETES_EXEC_INFO value for a run.
std::string ExecInfo(const ExecConfig& config, bool interactive);

// Reads the plugin's standard output.
StatusOr<ExecCredential> ParseExecCredential(const std::string& out, const ExecConfig& config);

// Runs the plugin once (in this process's environment and terminal) and reads its credential.
// kNotFound (with the install hint) when the command does not exist, kDeadlineExceeded on timeout,
// kUnauthenticated when it fails or prints no credential.
StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& config);

// The credential of one kubeconfig user, cached until it expires or the API server refuses it.
class ExecAuthenticator {
 public:
  using Runner = std::function<StatusOr<ExecCredential>(const ExecConfig&)>;
  using CredentialPtr = std::shared_ptr<const ExecCredential>;

  explicit ExecAuthenticator(ExecConfig config, Clock* clock = RealClock(),
                             Runner runner = RunExecPlugin);

  // The cached credential, or a new one when there is none or it has expired. Concurrent callers
  // wait for one run.
  StatusOr<CredentialPtr> Get();
  // After the API server refused `used` (401): runs the plugin again, unless another caller already
  // replaced `used`.
  Status Refresh(const CredentialPtr& used);
  // How many times the plugin ran (for tests and metrics).
  int runs() const;
  const ExecConfig& config() const { return config_; }

 private:
  Status RunLocked();

  const ExecConfig config_;
  Clock* const clock_;
  const Runner runner_;
  mutable std::mutex mu_;
  CredentialPtr cached_;
  int runs_ = 0;
};

}  // namespace nvl72::kube
