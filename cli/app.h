// kubectl-nvl72: argument parsing and the commands, over an injected Kubernetes client.
//
//   kubectl nvl72 racks                rack map: one line per NVLink domain
//   kubectl nvl72 jobs [-A]            NVL72Jobs and their placements
//   kubectl nvl72 explain JOB          where a job runs and why, or why it waits
//
// main.cc connects to the API server (kubeconfig or in-cluster); tests pass a FakeClient.
// Exit codes: 0 ok, 1 an API or lookup error, 2 a usage error.
// Thread-safety: Run() is reentrant; it only uses the client it is given.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "placement/policy.h"

namespace nvl72::cli {

struct Options {
  std::string command;            // racks | jobs | explain | version | help
  std::vector<std::string> args;  // positional arguments after the command
  std::string kubeconfig;         // --kubeconfig; "" = $KUBECONFIG, ~/.kube/config, in-cluster
  std::string context;            // --context; "" = current-context
  std::string ns;                 // -n/--namespace; "" = the context's namespace, else "default"
  bool all_namespaces = false;    // -A/--all-namespaces (jobs)
  int spares_per_domain = 2;      // --spares-per-domain: must match the operator's
  placement::SpareReserve spare_reserve = placement::SpareReserve::kSoft;  // --spare-reserve: same
  std::string domain_label;           // --domain-label; "" = nvidia.com/gpu.clique
  std::string domain_label_fallback;  // --domain-label-fallback
};

// Parses argv without the program name. Errors are kInvalidArgument with a one-line message.
StatusOr<Options> ParseArgs(std::span<const std::string> args);

std::string Usage();

// A connection to an API server.
struct Connection {
  std::unique_ptr<kube::Client> owned;  // may be null when `client` is owned elsewhere (tests)
  kube::Client* client = nullptr;
  std::string default_namespace;  // of the kubeconfig context or service account; may be ""
};

// Connects as the options say (called only for commands that need the cluster).
using Connector = std::function<StatusOr<Connection>(const Options&)>;

// The connector of the real binary: --kubeconfig, else the first file of $KUBECONFIG, else
// ~/.kube/config, else the in-cluster service account.
StatusOr<Connection> ConnectFromKubeconfig(const Options& options);

// Runs the command line `args` (without the program name); output to `out`, errors to `err`.
int Run(std::span<const std::string> args, const Connector& connect, std::ostream& out,
        std::ostream& err);

}  // namespace nvl72::cli
