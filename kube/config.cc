#include "kube/config.h"

#include <openssl/evp.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kube/yaml.h"

namespace nvl72::kube {
namespace {

using nlohmann::json;

StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(StatusCode::kNotFound, what + " file \"" + path + "\" cannot be read");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TrimSpace(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

StatusOr<std::string> Base64Decode(const std::string& in, const std::string& what) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (char c : in) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    size_t v = kAlphabet.find(c);
    if (v == std::string::npos || padding > 0) {
      return Status(StatusCode::kInvalidArgument, what + " is not valid base64");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (padding > 2) return Status(StatusCode::kInvalidArgument, what + " is not valid base64");
  return out;
}

std::string Base64Encode(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

const json* FindNamed(const json& doc, const char* list, const std::string& name,
                      const char* inner) {
  auto it = doc.find(list);
  if (it == doc.end() || !it->is_array()) return nullptr;
  for (const json& entry : *it) {
    if (!entry.is_object()) continue;
    // A name that is not a string (YAML `name: false`) never matches; value() would throw on it.
    auto n = entry.find("name");
    if (n != entry.end() && n->is_string() && n->get_ref<const std::string&>() == name) {
      auto in = entry.find(inner);
      if (in != entry.end() && in->is_object()) return &*in;
      static const json* empty = new json(json::object());
      return empty;
    }
  }
  return nullptr;
}

std::string Str(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  // A non-string value is shown as JSON; invalid UTF-8 inside it must not throw (fuzzer).
  return it->dump(-1, ' ', false, json::error_handler_t::replace);
}

bool Bool(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return false;
  if (it->is_boolean()) return it->get<bool>();
  return it->is_string() && it->get<std::string>() == "true";
}

// Sets *data from the base64 field `data_key`, else *file from the path field `file_key` (relative
// to `base_dir`). `owner` ("cluster \"x\"") names the entry in errors.
Status DataOrFile(const json& entry, const char* data_key, const char* file_key,
                  const std::string& owner, const std::string& base_dir, std::string* data,
                  std::string* file) {
  if (std::string d = Str(entry, data_key); !d.empty()) {
    auto pem = Base64Decode(d, std::string(data_key) + " of " + owner);
    if (!pem.ok()) return pem.status();
    *data = *pem;
  } else if (std::string f = Str(entry, file_key); !f.empty()) {
    *file = ResolvePath(base_dir, f);
  }
  return Status::Ok();
}

// Fills the server and TLS settings of `config` from a kubeconfig cluster entry. Errors carry only
// what is wrong (the caller says where).
Status ApplyCluster(const json& cluster, const std::string& cluster_name,
                    const std::string& base_dir, Config* config) {
  config->server = Str(cluster, "server");
  if (config->server.empty())
    return InvalidArgumentError("cluster \"" + cluster_name + "\" has no server");
  config->insecure_skip_tls_verify = Bool(cluster, "insecure-skip-tls-verify");
  config->tls_server_name = Str(cluster, "tls-server-name");
  NVL72_RETURN_IF_ERROR(DataOrFile(cluster, "certificate-authority-data", "certificate-authority",
                                   "cluster \"" + cluster_name + "\"", base_dir, &config->ca_data,
                                   &config->ca_file));
  if (config->insecure_skip_tls_verify && (!config->ca_data.empty() || !config->ca_file.empty())) {
    return InvalidArgumentError(
        "cluster \"" + cluster_name +
        "\": insecure-skip-tls-verify cannot be combined with a certificate authority");
  }
  return Status::Ok();
}

// args (strings) and env (name/value pairs, names required) of an exec section.
Status ExecLists(const json& exec, const std::string& user, ExecConfig* c) {
  auto bad = [&](const std::string& what) {
    return InvalidArgumentError("user \"" + user + "\": exec: " + what);
  };
  if (auto args = exec.find("args"); args != exec.end() && !args->is_null()) {
    if (!args->is_array()) return bad("args is not a list");
    for (const json& a : *args) {
      if (!a.is_string()) return bad("args holds a value that is not a string");
      c->args.push_back(a.get<std::string>());
    }
  }
  if (auto env = exec.find("env"); env != exec.end() && !env->is_null()) {
    if (!env->is_array()) return bad("env is not a list");
    for (const json& e : *env) {
      if (!e.is_object() || Str(e, "name").empty()) return bad("an env entry has no name");
      c->env.emplace_back(Str(e, "name"), Str(e, "value"));
    }
  }
  return Status::Ok();
}

// The `exec` section of user `user` (client-go's validation and defaults: v1beta1 defaults
// interactiveMode to IfAvailable, v1 requires it; v1alpha1 is gone). Errors carry only what is
// wrong.
StatusOr<ExecConfig> ParseExec(const json& exec, const std::string& user,
                               const std::string& base_dir) {
  auto bad = [&](const std::string& what) {
    return InvalidArgumentError("user \"" + user + "\": exec: " + what);
  };
  if (!exec.is_object()) return bad("not a mapping");
  ExecConfig c;
  c.user = user;
  c.api_version = Str(exec, "apiVersion");
  if (c.api_version != "client.authentication.k8s.io/v1" &&
      c.api_version != "client.authentication.k8s.io/v1beta1") {
    return bad("apiVersion \"" + c.api_version +
               "\" is not client.authentication.k8s.io/v1 or v1beta1");
  }
  c.command = Str(exec, "command");
  if (c.command.empty()) return bad("no command");
  if (c.command.find('/') != std::string::npos) c.command = ResolvePath(base_dir, c.command);
  NVL72_RETURN_IF_ERROR(ExecLists(exec, user, &c));
  c.install_hint = Str(exec, "installHint");
  c.provide_cluster_info = Bool(exec, "provideClusterInfo");
  c.interactive_mode = Str(exec, "interactiveMode");
  if (c.interactive_mode.empty() && c.api_version.ends_with("/v1beta1")) {
    c.interactive_mode = "IfAvailable";
  }
  if (c.interactive_mode != "Never" && c.interactive_mode != "IfAvailable" &&
      c.interactive_mode != "Always") {
    return bad("interactiveMode \"" + c.interactive_mode +
               "\" is not Never, IfAvailable or Always (v1 requires it)");
  }
  return c;
}

// Fills the credentials of `config` from the kubeconfig user `user_name`. Errors carry only what is
// wrong (the caller says where).
Status ApplyUser(const json& doc, const std::string& user_name, const std::string& base_dir,
                 Config* config) {
  const json* user = FindNamed(doc, "users", user_name, "user");
  if (user == nullptr) return InvalidArgumentError("user \"" + user_name + "\" not found");
  for (const char* unsupported : {"auth-provider", "username", "password"}) {
    if (user->contains(unsupported)) {
      return InvalidArgumentError("user \"" + user_name + "\": \"" + unsupported +
                                  "\" authentication is not supported (use a token, tokenFile, "
                                  "client certificate or exec plugin)");
    }
  }
  const std::string owner = "user \"" + user_name + "\"";
  NVL72_RETURN_IF_ERROR(DataOrFile(*user, "client-certificate-data", "client-certificate", owner,
                                   base_dir, &config->client_cert_data, &config->client_cert_file));
  NVL72_RETURN_IF_ERROR(DataOrFile(*user, "client-key-data", "client-key", owner, base_dir,
                                   &config->client_key_data, &config->client_key_file));
  bool has_cert = !config->client_cert_data.empty() || !config->client_cert_file.empty();
  bool has_key = !config->client_key_data.empty() || !config->client_key_file.empty();
  if (has_cert != has_key) {
    return InvalidArgumentError("user \"" + user_name +
                                "\": client certificate and client key must be given together");
  }
  config->token = Str(*user, "token");
  config->token_file = ResolvePath(base_dir, Str(*user, "tokenFile"));
  if (auto exec = user->find("exec"); exec != user->end() && !exec->is_null()) {
    if (has_cert || !config->token.empty() || !config->token_file.empty()) {
      return InvalidArgumentError(
          "user \"" + user_name +
          "\": exec cannot be combined with a token, tokenFile or client certificate");
    }
    auto parsed = ParseExec(*exec, user_name, base_dir);
    if (!parsed.ok()) return parsed.status();
    config->exec = std::move(parsed).value();
  }
  return Status::Ok();
}

// spec.cluster of the exec plugin's KUBERNETES_EXEC_INFO, from the kubeconfig cluster entry (the
// CA file's contents inline, as client-go sends them; `config` from the cluster's extension
// "client.authentication.k8s.io/exec").
Status ExecClusterInfo(const json& cluster, const Config& config, json* out) {
  json info = {{"server", config.server}};
  if (!config.tls_server_name.empty()) info["tls-server-name"] = config.tls_server_name;
  if (config.insecure_skip_tls_verify) info["insecure-skip-tls-verify"] = true;
  std::string ca = config.ca_data;
  if (ca.empty() && !config.ca_file.empty()) {
    auto read = ReadFile(config.ca_file, "certificate-authority");
    if (!read.ok()) return read.status();
    ca = *read;
  }
  if (!ca.empty()) info["certificate-authority-data"] = Base64Encode(ca);
  if (std::string proxy = Str(cluster, "proxy-url"); !proxy.empty()) info["proxy-url"] = proxy;
  if (Bool(cluster, "disable-compression")) info["disable-compression"] = true;
  auto ext = cluster.find("extensions");
  if (ext != cluster.end() && ext->is_array()) {
    for (const json& e : *ext) {
      if (e.is_object() && Str(e, "name") == "client.authentication.k8s.io/exec" &&
          e.contains("extension")) {
        info["config"] = e["extension"];
      }
    }
  }
  *out = std::move(info);
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> Config::BearerToken() const {
  if (!token_file.empty()) {
    auto contents = ReadFile(token_file, "token");
    if (!contents.ok()) {
      return Status(StatusCode::kUnauthenticated, contents.status().message());
    }
    return TrimSpace(*contents);
  }
  return token;
}

std::string Config::DebugString() const {
  std::string auth;
  if (exec)
    auth = "exec plugin " + exec->command;
  else if (!token_file.empty())
    auth = "token file " + token_file;
  else if (!token.empty())
    auth = "token (inline)";
  if (!client_cert_data.empty() || !client_cert_file.empty()) {
    auth += auth.empty() ? "client certificate" : " + client certificate";
  }
  if (auth.empty()) auth = "anonymous";
  std::string tls = insecure_skip_tls_verify ? "TLS verification DISABLED"
                    : !ca_data.empty()       ? "CA (inline)"
                    : !ca_file.empty()       ? "CA " + ca_file
                                             : "system trust store";
  return "server " + server + ", " + auth + ", " + tls;
}

StatusOr<Config> ParseKubeconfig(const std::string& text, const std::string& base_dir,
                                 const std::string& context, const std::string& origin) {
  const std::string where = "kubeconfig" + (origin.empty() ? std::string() : " " + origin);
  auto bad = [&](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, where + ": " + what);
  };
  auto doc = ParseYaml(text);
  if (!doc.ok()) return bad(doc.status().message());
  if (!doc->is_object()) return bad("not a mapping");

  std::string ctx_name = context.empty() ? Str(*doc, "current-context") : context;
  if (ctx_name.empty()) return bad("no context given and current-context is not set");
  const json* ctx = FindNamed(*doc, "contexts", ctx_name, "context");
  if (ctx == nullptr) return bad("context \"" + ctx_name + "\" not found");
  std::string cluster_name = Str(*ctx, "cluster");
  std::string user_name = Str(*ctx, "user");
  if (cluster_name.empty()) return bad("context \"" + ctx_name + "\" names no cluster");
  const json* cluster = FindNamed(*doc, "clusters", cluster_name, "cluster");
  if (cluster == nullptr) return bad("cluster \"" + cluster_name + "\" not found");

  Config config;
  config.default_namespace = Str(*ctx, "namespace");
  if (Status s = ApplyCluster(*cluster, cluster_name, base_dir, &config); !s.ok()) {
    return bad(s.message());
  }
  if (!user_name.empty()) {
    if (Status s = ApplyUser(*doc, user_name, base_dir, &config); !s.ok()) return bad(s.message());
  }
  if (config.exec && config.exec->provide_cluster_info) {
    if (Status s = ExecClusterInfo(*cluster, config, &config.exec->cluster); !s.ok()) {
      return bad(s.message());
    }
  }
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return bad("server \"" + config.server + "\" must start with https://");
  }
  return config;
}

StatusOr<Config> LoadKubeconfig(const std::string& path, const std::string& context) {
  if (path.empty()) return Status(StatusCode::kInvalidArgument, "kubeconfig path is empty");
  auto text = ReadFile(path, "kubeconfig");
  if (!text.ok()) return text.status();
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty()) dir = "/";
  return ParseKubeconfig(*text, dir, context, path);
}

StatusOr<Config> InClusterConfigFrom(const std::string& host, const std::string& port,
                                     const std::string& sa_dir) {
  if (host.empty() || port.empty()) {
    return Status(
        StatusCode::kFailedPrecondition,
        "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT unset");
  }
  Config config;
  bool ipv6 = host.find(':') != std::string::npos;
  config.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  config.token_file = sa_dir + "/token";
  auto token = ReadFile(config.token_file, "service account token");
  if (!token.ok()) return Status(StatusCode::kFailedPrecondition, token.status().message());
  config.ca_file = sa_dir + "/ca.crt";
  auto ca = ReadFile(config.ca_file, "service account CA");
  if (!ca.ok()) return Status(StatusCode::kFailedPrecondition, ca.status().message());
  if (auto ns = ReadFile(sa_dir + "/namespace", "namespace"); ns.ok()) {
    config.default_namespace = TrimSpace(*ns);
  }
  return config;
}

StatusOr<Config> InClusterConfig() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  return InClusterConfigFrom(host ? host : "", port ? port : "",
                             "/var/run/secrets/kubernetes.io/serviceaccount");
}

}  // namespace nvl72::kube
