#include "cli/app.h"

#include <charconv>
#include <cstdlib>
#include <filesystem>

#include "cli/views.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "kube/http_client.h"
#include "kube/object.h"
#include "model/names.h"

#ifndef NVL72_VERSION
#define NVL72_VERSION "dev"
#endif

namespace nvl72::cli {
namespace {

const kube::ResourceRef& Nvl72Jobs() {
  static const kube::ResourceRef kRef = kube::ResourceRef::Custom(
      std::string(model::kGroup), std::string(model::kVersion), std::string(model::kPlural),
      std::string(model::kKind), /*namespaced=*/true);
  return kRef;
}

// Every object of a resource in all namespaces. A missing CRD reads as no jobs.
StatusOr<std::vector<Json>> ListEverything(kube::Client& client, const kube::ResourceRef& resource,
                                           bool missing_is_empty) {
  kube::ListOptions options;
  options.limit = 500;
  auto list = kube::ListAll(client, resource, "", options);
  if (!list.ok()) {
    if (missing_is_empty && kube::IsNotFound(list.status())) return std::vector<Json>{};
    return Status(list.status().code(),
                  "listing " + resource.DisplayName() + ": " + list.status().message());
  }
  return std::move(list->items);
}

StatusOr<ClusterView> LoadView(kube::Client& client, const Options& options) {
  auto nodes = ListEverything(client, kube::kNodes, false);
  if (!nodes.ok()) return nodes.status();
  auto pods = ListEverything(client, kube::kPods, false);
  if (!pods.ok()) return pods.status();
  auto jobs = ListEverything(client, Nvl72Jobs(), true);
  if (!jobs.ok()) return jobs.status();
  ViewOptions view_options;
  view_options.spares_per_domain = options.spares_per_domain;
  view_options.spare_reserve = options.spare_reserve;
  if (!options.domain_label.empty()) view_options.cluster.domain_label = options.domain_label;
  view_options.cluster.domain_label_fallback = options.domain_label_fallback;
  return BuildView(*nodes, std::move(*pods), std::move(*jobs), view_options);
}

bool ParseInt(const std::string& s, int* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

std::string Usage() {
  return R"(kubectl nvl72: NVLink-domain placement of NVL72Jobs on GB200 NVL72 racks

Usage:
  kubectl nvl72 racks                  rack map: one line per NVLink domain
  kubectl nvl72 jobs [-A]              NVL72Jobs of the namespace (-A: all) and where they run
  kubectl nvl72 explain JOB            where JOB runs and why, or why it waits
  kubectl nvl72 version

Flags:
  --kubeconfig FILE          kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)
  --context NAME             kubeconfig context (default: current-context)
  -n, --namespace NS         namespace (default: the context's, else "default")
  -A, --all-namespaces       jobs of every namespace
  --spares-per-domain N      spare nodes held back per domain, as the operator's flag (default 2)
  --spare-reserve MODE       soft | hard, as the operator's flag (default soft)
  --domain-label KEY         node label naming the NVLink domain (default nvidia.com/gpu.clique)
  --domain-label-fallback KEY  label used when a node lacks the domain label
  -h, --help                 this help

Rack map glyphs, one per node: '#' gang rank, '+' used by other pods, '.' free,
's' designated spare, 'X' failed (NotReady, cordoned or tainted).
)";
}

namespace {

// A flag as written: "--name=value" carries its value; otherwise the value of a flag that takes
// one is the next argument.
struct FlagArg {
  std::string flag;
  std::string value;
  bool has_value = false;
};

FlagArg SplitFlag(const std::string& a) {
  FlagArg f{a, "", false};
  if (a.rfind("--", 0) == 0) {
    size_t eq = a.find('=');
    if (eq != std::string::npos) f = {a.substr(0, eq), a.substr(eq + 1), true};
  }
  return f;
}

// Applies the flag args[i] to `o`, advancing `i` past a value given as the next argument. --help
// and --version set the command and `stop`: the rest of the line is not read.
Status ApplyFlag(std::span<const std::string> args, size_t& i, Options& o, bool& stop) {
  const std::string& a = args[i];
  FlagArg f = SplitFlag(a);
  const std::string& flag = f.flag;
  auto take = [&](std::string* dst) -> Status {
    if (!f.has_value) {
      if (i + 1 >= args.size()) return InvalidArgumentError(flag + " needs a value");
      f.value = args[++i];
    }
    *dst = f.value;
    return Status::Ok();
  };
  if (flag == "-h" || flag == "--help") {
    o.command = "help";
    stop = true;
  } else if (flag == "--version") {
    o.command = "version";
    stop = true;
  } else if (flag == "--kubeconfig") {
    return take(&o.kubeconfig);
  } else if (flag == "--context") {
    return take(&o.context);
  } else if (flag == "-n" || flag == "--namespace") {
    NVL72_RETURN_IF_ERROR(take(&o.ns));
    if (o.ns.empty()) return InvalidArgumentError(flag + " needs a non-empty value");
  } else if (flag == "-A" || flag == "--all-namespaces") {
    o.all_namespaces = true;
  } else if (flag == "--domain-label") {
    return take(&o.domain_label);
  } else if (flag == "--domain-label-fallback") {
    return take(&o.domain_label_fallback);
  } else if (flag == "--spares-per-domain") {
    std::string v;
    NVL72_RETURN_IF_ERROR(take(&v));
    if (!ParseInt(v, &o.spares_per_domain) || o.spares_per_domain < 0) {
      return InvalidArgumentError("--spares-per-domain must be a non-negative integer, got '" + v +
                                  "'");
    }
  } else if (flag == "--spare-reserve") {
    std::string v;
    NVL72_RETURN_IF_ERROR(take(&v));
    if (!placement::ParseSpareReserve(v, &o.spare_reserve)) {
      return InvalidArgumentError("--spare-reserve must be soft or hard, got '" + v + "'");
    }
  } else {
    return InvalidArgumentError("unknown flag " + a);
  }
  return Status::Ok();
}

// The command must be known and get the arguments it takes.
Status CheckCommand(const Options& o) {
  if (o.command == "racks" || o.command == "jobs" || o.command == "version" ||
      o.command == "help") {
    if (!o.args.empty())
      return InvalidArgumentError(o.command + " takes no arguments, got '" + o.args[0] + "'");
  } else if (o.command == "explain") {
    if (o.args.size() != 1) return InvalidArgumentError("explain needs exactly one NVL72Job name");
  } else {
    return InvalidArgumentError("unknown command '" + o.command + "'");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Options> ParseArgs(std::span<const std::string> args) {
  Options o;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() <= 1 || a[0] != '-') {  // "-" alone is an argument, not a flag
      positional.push_back(a);
      continue;
    }
    bool stop = false;
    NVL72_RETURN_IF_ERROR(ApplyFlag(args, i, o, stop));
    if (stop) return o;
  }
  if (positional.empty()) {
    o.command = "help";
    return o;
  }
  o.command = positional[0];
  o.args.assign(positional.begin() + 1, positional.end());
  NVL72_RETURN_IF_ERROR(CheckCommand(o));
  return o;
}

StatusOr<Connection> ConnectFromKubeconfig(const Options& options) {
  std::string path = options.kubeconfig;
  if (path.empty()) {
    if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
      std::string list = env;
      path = list.substr(0, list.find(':'));
    }
  }
  if (path.empty()) {
    if (const char* home = std::getenv("HOME"); home != nullptr) {
      std::string def = std::string(home) + "/.kube/config";
      std::error_code ec;
      if (std::filesystem::exists(def, ec)) path = def;
    }
  }
  StatusOr<kube::Config> config =
      path.empty() ? kube::InClusterConfig() : kube::LoadKubeconfig(path, options.context);
  if (!config.ok()) {
    if (path.empty()) {
      return Status(config.status().code(),
                    "no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a pod: " +
                        config.status().message());
    }
    return config.status();
  }
  config->user_agent = std::string("kubectl-nvl72/") + NVL72_VERSION;
  auto client = kube::HttpClient::Create(*config);
  if (!client.ok()) return client.status();
  Connection c;
  c.owned = std::move(*client);
  c.client = c.owned.get();
  c.default_namespace = config->default_namespace;
  return c;
}

int Run(std::span<const std::string> args, const Connector& connect, std::ostream& out,
        std::ostream& err) {
  auto options = ParseArgs(args);
  if (!options.ok()) {
    err << "error: " << options.status().message() << "\n\n" << Usage();
    return 2;
  }
  if (options->command == "help") {
    out << Usage();
    return 0;
  }
  if (options->command == "version") {
    out << "kubectl-nvl72 " << NVL72_VERSION << "\n";
    return 0;
  }
  auto conn = connect(*options);
  if (!conn.ok()) {
    err << "error: " << conn.status().message() << "\n";
    return 1;
  }
  std::string ns = options->ns;
  if (ns.empty()) ns = conn->default_namespace.empty() ? "default" : conn->default_namespace;

  auto view = LoadView(*conn->client, *options);
  if (!view.ok()) {
    err << "error: " << view.status().message() << "\n";
    return 1;
  }
  if (options->command == "racks") {
    out << RenderRacks(*view, ns);
    return 0;
  }
  if (options->command == "jobs") {
    out << RenderJobs(*view, options->all_namespaces ? "" : ns);
    return 0;
  }
  // explain
  const std::string& name = options->args[0];
  for (const auto& job : view->jobs) {
    if (kube::Namespace(job) == ns && kube::Name(job) == name) {
      out << RenderExplain(*view, job);
      return 0;
    }
  }
  err << "error: NVL72Job " << ns << "/" << name << " not found\n";
  return 1;
}

}  // namespace nvl72::cli
