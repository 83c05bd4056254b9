#include "scheduler-plugin/flags.h"

#include <charconv>
#include <functional>
#include <map>

namespace nvl72::extender {
namespace {

bool ParseInt(const std::string& s, long long lo, long long hi, long long* out) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

std::string Usage() {
  return R"(nvl72-extender: kube-scheduler HTTP extender that keeps GPU gangs inside one NVLink domain.

Usage: nvl72-extender [flags]

  --kubeconfig FILE          kubeconfig of the API server (default: in-cluster service account)
  --context NAME             kubeconfig context (default: current-context)
  --listen HOST:PORT         address of the verbs, /healthz, /readyz and /metrics (default 127.0.0.1:8888)
  --prefix PATH              URL path prefix of the verbs, e.g. /nvl72 (default: none: POST /filter)
  --tls-cert FILE            serve HTTPS with this PEM certificate (needs --tls-key)
  --tls-key FILE             PEM private key of --tls-cert
  --client-ca FILE           require client certificates signed by this PEM CA (mTLS)
  --policy NAME              scoring policy: nvl72 (default), spread, first-fit, domain-best-fit
  --score-normalization M    rank (default: policy order kept across score tiers) or linear
                             (placement::NormalizeScores)
  --spares-per-domain N      empty nodes per NVLink domain held as spares (default 2)
  --keep-off-spares[=BOOL]   keep non-gang GPU pods off designated spare nodes (default true)
  --domain-label KEY         node label naming the NVLink domain (default nvidia.com/gpu.clique)
  --domain-label-fallback K  label used when --domain-label is missing (default none)
  --gpu-resource NAME        extended resource counted as GPUs (default nvidia.com/gpu)
  --workers N                HTTP worker threads (default 8)
  --max-body-bytes N         largest accepted request body (default 33554432)
  --request-timeout-ms N     longest wait for the next bytes of a request, or for the client to
                             take the reply (default 10000); a whole request must arrive within
                             twice this (at least 10 s); idle connections close after 60 s, or
                             after 200 ms when another connection waits for a worker
  --min-rebuild-interval-ms N  debounce of cluster view rebuilds after changes (default 100)
  --log-level LEVEL          debug, info, warning, error (default info)
  --log-format FORMAT        text | json (one JSON object per line; default text)
  --help                     this text
  --version                  print the version
)";
}

Status ParseListen(const std::string& value, std::string* host, int* port) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos)
    return InvalidArgumentError("--listen: want HOST:PORT, got \"" + value + "\"");
  std::string h = value.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) h = "0.0.0.0";
  long long p = 0;
  if (!ParseInt(value.substr(colon + 1), 0, 65535, &p)) {
    return InvalidArgumentError("--listen: bad port in \"" + value + "\"");
  }
  *host = h;
  *port = static_cast<int>(p);
  return Status::Ok();
}

namespace {

using Setter = std::function<Status(const std::string&)>;

// The flags: where each one's value goes. Parsing and checks are in the setters.
struct FlagTable {
  std::map<std::string, Setter> valued;
  std::map<std::string, bool*> booleans;
};

Setter Str(std::string* dst) {
  return [dst](const std::string& v) {
    *dst = v;
    return Status::Ok();
  };
}

template <typename T>
Setter Num(const char* name, long long lo, long long hi, T* dst) {
  return [=](const std::string& v) {
    long long x = 0;
    if (!ParseInt(v, lo, hi, &x)) {
      return InvalidArgumentError(std::string(name) + ": want an integer in " + std::to_string(lo) +
                                  ".." + std::to_string(hi) + ", got \"" + v + "\"");
    }
    *dst = static_cast<T>(x);
    return Status::Ok();
  };
}

// A setter calling `set(value, dst)`.
template <typename T>
Setter With(Status (*set)(const std::string&, T*), T* dst) {
  return [set, dst](const std::string& v) { return set(v, dst); };
}

Setter Listen(ServerOptions* server) {
  return [server](const std::string& v) { return ParseListen(v, &server->host, &server->port); };
}

Status SetPrefix(const std::string& v, std::string* dst) {
  std::string p = v;
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p = "/" + p;
  *dst = p;
  return Status::Ok();
}

Status SetScoreNormalization(const std::string& v, ScoreNormalization* dst) {
  if (v == "rank") {
    *dst = ScoreNormalization::kRank;
  } else if (v == "linear") {
    *dst = ScoreNormalization::kLinear;
  } else {
    return InvalidArgumentError("--score-normalization: want rank or linear, got \"" + v + "\"");
  }
  return Status::Ok();
}

Status SetLogLevel(const std::string& v, std::string* dst) {
  if (v != "debug" && v != "info" && v != "warning" && v != "error") {
    return InvalidArgumentError("--log-level: want debug, info, warning or error, got \"" + v +
                                "\"");
  }
  *dst = v;
  return Status::Ok();
}

Status SetLogFormat(const std::string& v, std::string* dst) {
  if (v != "text" && v != "json") {
    return InvalidArgumentError("--log-format: want text or json, got \"" + v + "\"");
  }
  *dst = v;
  return Status::Ok();
}

// The table of flags, writing into `f` (and `*request_timeout_ms`, applied to `f` afterwards).
FlagTable MakeFlagTable(Flags& f, int* request_timeout_ms) {
  FlagTable t;
  t.valued = {
      {"--kubeconfig", Str(&f.kubeconfig)},
      {"--context", Str(&f.context)},
      {"--listen", Listen(&f.server)},
      {"--prefix", With(SetPrefix, &f.server.prefix)},
      {"--tls-cert", Str(&f.server.tls_cert)},
      {"--tls-key", Str(&f.server.tls_key)},
      {"--client-ca", Str(&f.server.client_ca)},
      {"--policy", Str(&f.extender.policy)},
      {"--score-normalization", With(SetScoreNormalization, &f.extender.normalization)},
      {"--spares-per-domain", Num("--spares-per-domain", 0, 1000, &f.extender.spares_per_domain)},
      {"--domain-label", Str(&f.domain_label)},
      {"--domain-label-fallback", Str(&f.domain_label_fallback)},
      {"--gpu-resource", Str(&f.extender.gpu_resource)},
      {"--workers", Num("--workers", 1, 1024, &f.server.workers)},
      {"--max-body-bytes", Num("--max-body-bytes", 1024, 1LL << 32, &f.server.max_body_bytes)},
      {"--request-timeout-ms", Num("--request-timeout-ms", 1, 600000, request_timeout_ms)},
      {"--min-rebuild-interval-ms",
       Num("--min-rebuild-interval-ms", 0, 60000, &f.min_rebuild_interval_ms)},
      {"--log-level", With(SetLogLevel, &f.log_level)},
      {"--log-format", With(SetLogFormat, &f.log_format)},
  };
  t.booleans = {{"--keep-off-spares", &f.extender.keep_off_spares},
                {"--help", &f.help},
                {"-h", &f.help},
                {"--version", &f.version}};
  return t;
}

// A boolean flag: bare, "=true" or "=false".
Status SetBoolean(const std::string& name, bool has_value, const std::string& value, bool* dst) {
  if (!has_value || value == "true") {
    *dst = true;
  } else if (value == "false") {
    *dst = false;
  } else {
    return InvalidArgumentError(name + ": want true or false, got \"" + value + "\"");
  }
  return Status::Ok();
}

// Applies every flag of `args` through `table`, in order; the first error.
Status ApplyFlags(const std::vector<std::string>& args, const FlagTable& table) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos && name.starts_with("--")) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (auto b = table.booleans.find(name); b != table.booleans.end()) {
      NVL72_RETURN_IF_ERROR(SetBoolean(name, has_value, value, b->second));
      continue;
    }
    auto v = table.valued.find(name);
    if (v == table.valued.end()) {
      return InvalidArgumentError("unknown flag " + name + " (see --help)");
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return InvalidArgumentError(name + " needs a value");
      value = args[++i];
    }
    NVL72_RETURN_IF_ERROR(v->second(value));
  }
  return Status::Ok();
}

Status CheckTls(const ServerOptions& server) {
  if (server.tls_cert.empty() != server.tls_key.empty()) {
    return InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!server.client_ca.empty() && server.tls_cert.empty()) {
    return InvalidArgumentError("--client-ca needs --tls-cert and --tls-key");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Flags> ParseFlags(const std::vector<std::string>& args) {
  Flags f;
  int request_timeout_ms = 10000;
  NVL72_RETURN_IF_ERROR(ApplyFlags(args, MakeFlagTable(f, &request_timeout_ms)));
  f.server.read_timeout = std::chrono::milliseconds(request_timeout_ms);
  f.server.write_timeout = std::chrono::milliseconds(request_timeout_ms);
  NVL72_RETURN_IF_ERROR(CheckTls(f.server));
  return f;
}

}  // namespace nvl72::extender
