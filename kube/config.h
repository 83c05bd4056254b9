// Config: how to reach and authenticate to an API server, from a kubeconfig file or from the
// in-cluster service account.
//
// Thread-safety: Config is a value. BearerToken() may be called concurrently (it only reads files).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/status.h"
#include "kube/exec_credential.h"

namespace nvl72::kube {

struct Config {
  // "https://host:port" (IPv6 hosts in brackets). "http://" is accepted only for tests.
  std::string server{};

  // Trust: PEM data wins over a file; with neither, the system trust store (OpenSSL's default
  // paths, which honour SSL_CERT_FILE / SSL_CERT_DIR). Verification is ON unless
  // insecure_skip_tls_verify.
  std::string ca_data{};
  std::string ca_file{};
  bool insecure_skip_tls_verify = false;
  // Overrides the host name sent in SNI and checked against the server certificate (kubeconfig
  // tls-server-name); the connection still goes to the server's host.
  std::string tls_server_name{};

  // Client certificate authentication (PEM): data wins over files.
  std::string client_cert_data{};
  std::string client_cert_file{};
  std::string client_key_data{};
  std::string client_key_file{};

  // Bearer token authentication. token_file wins over token; HttpClient re-reads it at most every
  // token_reread_interval (and after a 401) so rotated service-account tokens are picked up.
  std::string token{};
  std::string token_file{};
  std::chrono::seconds token_reread_interval{60};

  // Exec credential plugin (kubeconfig users of managed clusters): the token or client
  // certificate comes from running it (kube/exec_credential.h). Excludes token and certificates.
  std::optional<ExecConfig> exec{};

  // Namespace of the selected context (kubeconfig) or of the service account (in-cluster); may be
  // "".
  std::string default_namespace{};

  std::chrono::milliseconds connect_timeout{5000};
  // Timeout for one non-watch request (read and write). Watches use their own, longer timeout.
  std::chrono::milliseconds request_timeout{30000};
  std::string user_agent = "nvl72-kube/0.1";

  // The token to send now: contents of token_file read now (whitespace-trimmed) or `token`; "" if
  // none.
  // Returns kUnauthenticated if token_file is set but cannot be read.
  StatusOr<std::string> BearerToken() const;
  // A description safe to log: server, auth method, never secrets.
  std::string DebugString() const;
};

// Loads a kubeconfig (YAML or JSON). `context` "" means the file's current-context. File references
// (certificate-authority, client-certificate, client-key, tokenFile) are resolved relative to the
// kubeconfig's directory. Errors (kInvalidArgument / kNotFound) name the missing piece, e.g.
// "kubeconfig /x: context \"foo\" not found". Unsupported auth (auth-provider, username/password)
// is an error, not silently ignored. The YAML is read by yaml-cpp (kube/yaml.h).
StatusOr<Config> LoadKubeconfig(const std::string& path, const std::string& context = "");
// Same from text already in memory; `base_dir` resolves relative file paths.
StatusOr<Config> ParseKubeconfig(const std::string& text, const std::string& base_dir,
                                 const std::string& context = "", const std::string& origin = "");

// In-cluster config: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with the service
// account token file (re-read), CA and namespace under
// /var/run/secrets/kubernetes.io/serviceaccount. kFailedPrecondition when not running in a pod.
StatusOr<Config> InClusterConfig();
// Testable form: explicit host/port and service-account directory.
StatusOr<Config> InClusterConfigFrom(const std::string& host, const std::string& port,
                                     const std::string& sa_dir);

}  // namespace nvl72::kube
