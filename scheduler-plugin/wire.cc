#include "scheduler-plugin/wire.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <exception>

namespace nvl72::extender {
namespace {

constexpr std::string_view kJobLabel = "nvl72.dev/job";
constexpr std::string_view kRankLabel = "nvl72.dev/rank";
constexpr std::string_view kNodeAnnotation = "nvl72.dev/node";

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// The member of `obj` whose key equals `name` ignoring case (exact match preferred), or nullptr.
const Json* FindFieldIgnoreCase(const Json& obj, std::string_view name) {
  if (!obj.is_object()) return nullptr;
  if (auto it = obj.find(std::string(name)); it != obj.end()) return &*it;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (EqualsIgnoreCase(it.key(), name)) return &*it;
  }
  return nullptr;
}

int ParseRank(std::string_view s) {
  int v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return -1;
  return v;
}

// Per-container GPU request: requests win over limits.
struct ContainerGpu {
  int64_t request = -1;
  int64_t limit = -1;
  int64_t Effective() const { return request >= 0 ? request : (limit >= 0 ? limit : 0); }
};

int EffectiveGpus(const std::vector<ContainerGpu>& containers,
                  const std::vector<ContainerGpu>& init_containers) {
  int64_t sum = 0, init_max = 0;
  for (const auto& c : containers) sum += c.Effective();
  for (const auto& c : init_containers) init_max = std::max(init_max, c.Effective());
  return static_cast<int>(std::min<int64_t>(std::max(sum, init_max), 1 << 20));
}

// ---------------------------------------------------------------------------------------------
// SAX handler for ExtenderArgs. Tracks the path of keys from the root; array elements are "[]".
// The top-level key is matched ignoring case; the pod's own fields use their exact json tags.

class ArgsSax : public nlohmann::json_sax<Json> {
 public:
  ArgsSax(ExtenderArgs* out, std::string_view gpu_resource)
      : out_(out), gpu_resource_(gpu_resource) {}

  const std::string& error() const { return error_; }
  bool saw_pod() const { return saw_pod_; }

  void Finish() {
    out_->pod.gpus = EffectiveGpus(containers_, init_containers_);
  }

  bool null() override { return Scalar(Kind::kNull, {}, 0); }
  bool boolean(bool) override { return Scalar(Kind::kOther, {}, 0); }
  bool number_integer(number_integer_t v) override { return Scalar(Kind::kNumber, {}, v); }
  bool number_unsigned(number_unsigned_t v) override {
    return Scalar(Kind::kNumber, {}, static_cast<int64_t>(std::min<number_unsigned_t>(v, 1u << 30)));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (v < 0 || v != static_cast<double>(static_cast<int64_t>(v))) return Scalar(Kind::kBadNumber, {}, 0);
    return Scalar(Kind::kNumber, {}, static_cast<int64_t>(v));
  }
  bool string(string_t& v) override { return Scalar(Kind::kString, v, 0); }
  bool binary(binary_t&) override { return Scalar(Kind::kOther, {}, 0); }

  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      root_seen_ = true;
    } else {
      if (!CheckContainerType(/*is_object=*/true)) return false;
      if (InPod() && depth_ == 4 && Is(2, "spec") && IsArrayElem(4)) {
        // A container object starts: [pod, spec, containers|initContainers, []].
        if (Is(3, "containers")) containers_.emplace_back();
        if (Is(3, "initContainers")) init_containers_.emplace_back();
      }
      if (depth_ == 1 && top_ == Top::kPod) saw_pod_ = true;
      if (depth_ == 1 && top_ == Top::kNodes) out_->has_nodes = true;
    }
    Push(false);
    return true;
  }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    f.key = k;
    if (depth_ == 1) {
      if (EqualsIgnoreCase(k, "pod")) {
        top_ = Top::kPod;
      } else if (EqualsIgnoreCase(k, "nodenames")) {
        top_ = Top::kNodeNames;
      } else if (EqualsIgnoreCase(k, "nodes")) {
        top_ = Top::kNodes;
      } else {
        top_ = Top::kOther;
      }
    }
    return true;
  }
  bool end_object() override {
    Pop();
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return Fail("request body must be a JSON object");
    if (!CheckContainerType(/*is_object=*/false)) return false;
    if (depth_ == 1 && top_ == Top::kNodeNames) out_->node_cache_capable = true;
    Push(true);
    return true;
  }
  bool end_array() override {
    Pop();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    if (error_.empty()) error_ = "malformed JSON at byte " + std::to_string(position) + ": " + ex.what();
    return false;
  }

 private:
  enum class Top { kNone, kPod, kNodeNames, kNodes, kOther };
  enum class Kind { kNull, kString, kNumber, kBadNumber, kOther };
  struct Frame {
    bool is_array = false;
    std::string key;  // current key of an object frame
  };

  void Push(bool is_array) {
    stack_.push_back(Frame{is_array, {}});
    depth_ = static_cast<int>(stack_.size());
  }
  void Pop() {
    if (!stack_.empty()) stack_.pop_back();
    depth_ = static_cast<int>(stack_.size());
  }

  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  // Path element i (1-based: 1 = the top-level key) equals `s`.
  bool Is(int i, std::string_view s) const {
    const Frame& f = stack_[static_cast<size_t>(i - 1)];
    return !f.is_array && f.key == s;
  }
  bool IsArrayElem(int i) const { return stack_[static_cast<size_t>(i - 1)].is_array; }
  bool InPod() const { return depth_ >= 1 && top_ == Top::kPod; }

  // Type checks for containers directly under the top-level keys.
  bool CheckContainerType(bool is_object) {
    if (depth_ == 1) {
      if (top_ == Top::kPod && !is_object) return Fail("Pod must be an object");
      if (top_ == Top::kNodeNames && is_object) return Fail("NodeNames must be an array of strings");
      if (top_ == Top::kNodes && !is_object) return Fail("Nodes must be an object");
    }
    if (depth_ == 2 && top_ == Top::kNodeNames) return Fail("NodeNames must be an array of strings");
    return true;
  }

  bool Scalar(Kind kind, std::string_view s, int64_t n) {
    if (depth_ == 0) return Fail("request body must be a JSON object");
    if (depth_ == 1) {
      if (kind != Kind::kNull && (top_ == Top::kPod || top_ == Top::kNodes)) {
        return Fail(top_ == Top::kPod ? "Pod must be an object" : "Nodes must be an object");
      }
      if (kind != Kind::kNull && top_ == Top::kNodeNames) {
        return Fail("NodeNames must be an array of strings");
      }
      return true;
    }
    if (top_ == Top::kNodeNames) {
      if (depth_ == 2) {
        if (kind != Kind::kString) return Fail("NodeNames must be an array of strings");
        out_->node_names.emplace_back(s);
      }
      return true;
    }
    if (top_ == Top::kNodes) {
      // [Nodes, items, [], metadata, name]
      if (depth_ == 5 && Is(2, "items") && IsArrayElem(3) && Is(4, "metadata") && Is(5, "name") &&
          kind == Kind::kString) {
        out_->node_names.emplace_back(s);
      }
      return true;
    }
    if (top_ != Top::kPod) return true;
    PodInfo& pod = out_->pod;
    if (depth_ == 3 && Is(2, "metadata")) {
      if (kind != Kind::kString) return true;
      if (Is(3, "name")) pod.name = s;
      else if (Is(3, "namespace")) pod.ns = s;
      else if (Is(3, "uid")) pod.uid = s;
    } else if (depth_ == 4 && Is(2, "metadata") && kind == Kind::kString) {
      if (Is(3, "labels")) {
        if (Is(4, kJobLabel)) pod.job = s;
        else if (Is(4, kRankLabel)) pod.rank = ParseRank(s);
      } else if (Is(3, "annotations") && Is(4, kNodeAnnotation)) {
        pod.planned_node = s;
      }
    } else if (depth_ == 3 && Is(2, "spec") && Is(3, "nodeName") && kind == Kind::kString) {
      pod.node_name = s;
    } else if (depth_ == 7 && Is(2, "spec") && IsArrayElem(4) && Is(5, "resources") &&
               Is(7, gpu_resource_)) {
      // [Pod, spec, containers|initContainers, [], resources, requests|limits, <gpu>]
      const bool init = Is(3, "initContainers");
      if (!init && !Is(3, "containers")) return true;
      std::vector<ContainerGpu>& list = init ? init_containers_ : containers_;
      if (list.empty()) return true;
      int64_t q = 0;
      bool ok = false;
      if (kind == Kind::kString) ok = ParseCountQuantity(s, &q);
      if (kind == Kind::kNumber) ok = n >= 0, q = n;
      if (!ok) return Fail("Pod: unparsable quantity for " + std::string(gpu_resource_));
      if (Is(6, "requests")) list.back().request = q;
      else if (Is(6, "limits")) list.back().limit = q;
    }
    return true;
  }

  ExtenderArgs* out_;
  std::string_view gpu_resource_;
  std::vector<Frame> stack_;
  int depth_ = 0;
  Top top_ = Top::kNone;
  bool root_seen_ = false;
  bool saw_pod_ = false;
  std::vector<ContainerGpu> containers_;
  std::vector<ContainerGpu> init_containers_;
  std::string error_;
};

void AppendReasonMap(std::string& out, const char* field,
                     const std::vector<std::pair<std::string_view, std::string>>& entries) {
  out += '"';
  out += field;
  out += "\":{";
  bool first = true;
  for (const auto& [node, reason] : entries) {
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, node);
    out += ':';
    AppendJsonString(out, reason);
  }
  out += '}';
}

StatusOr<Json> ParseDom(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("malformed JSON");
  if (!j.is_object()) return InvalidArgumentError("request body must be a JSON object");
  return j;
}

std::string StringField(const Json& obj, std::string_view name, bool* bad) {
  const Json* v = FindFieldIgnoreCase(obj, name);
  if (v == nullptr || v->is_null()) return "";
  if (!v->is_string()) {
    *bad = true;
    return "";
  }
  return v->get<std::string>();
}

}  // namespace

bool ParseCountQuantity(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || v < 0) return false;
  std::string_view rest(p, static_cast<size_t>(s.data() + s.size() - p));
  // Allow a zero fraction ("4.0") and the decimal SI suffixes a count may carry.
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && rest[i] == '0') ++i;
    if (i == 1 && rest.size() == 1) return false;
    rest.remove_prefix(i);
  }
  int64_t mult = 1;
  if (rest == "k") mult = 1000;
  else if (rest == "M") mult = 1000000;
  else if (!rest.empty()) return false;
  if (v > (int64_t{1} << 40) / mult) return false;
  *out = v * mult;
  return true;
}

bool ParseCountQuantity(const Json& value, int64_t* out) {
  if (value.is_string()) return ParseCountQuantity(std::string_view(value.get_ref<const std::string&>()), out);
  if (value.is_number_unsigned() || value.is_number_integer()) {
    const auto v = value.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d < 0 || d != static_cast<double>(static_cast<int64_t>(d))) return false;
    *out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

PodInfo PodInfoFromJson(const Json& pod, std::string_view gpu_resource) {
  PodInfo info;
  if (!pod.is_object()) return info;
  auto str = [](const Json& obj, const char* key) -> std::string {
    if (!obj.is_object()) return "";
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
  };
  static const Json kEmpty = Json::object();
  auto obj = [](const Json& o, const char* key) -> const Json& {
    if (!o.is_object()) return kEmpty;
    auto it = o.find(key);
    return it != o.end() && (it->is_object() || it->is_array()) ? *it : kEmpty;
  };
  const Json& meta = obj(pod, "metadata");
  info.name = str(meta, "name");
  info.ns = str(meta, "namespace");
  info.uid = str(meta, "uid");
  const Json& labels = obj(meta, "labels");
  info.job = str(labels, std::string(kJobLabel).c_str());
  if (std::string r = str(labels, std::string(kRankLabel).c_str()); !r.empty()) info.rank = ParseRank(r);
  info.planned_node = str(obj(meta, "annotations"), std::string(kNodeAnnotation).c_str());
  const Json& spec = obj(pod, "spec");
  info.node_name = str(spec, "nodeName");
  auto gpus_of = [&](const Json& list) {
    std::vector<ContainerGpu> out;
    if (!list.is_array()) return out;
    for (const Json& c : list) {
      ContainerGpu g;
      const Json& res = obj(c, "resources");
      for (const char* which : {"requests", "limits"}) {
        const Json& m = obj(res, which);
        if (!m.is_object()) continue;
        auto it = m.find(std::string(gpu_resource));
        int64_t q = 0;
        if (it != m.end() && ParseCountQuantity(*it, &q)) {
          (std::string_view(which) == "requests" ? g.request : g.limit) = q;
        }
      }
      out.push_back(g);
    }
    return out;
  };
  info.gpus = EffectiveGpus(gpus_of(obj(spec, "containers")), gpus_of(obj(spec, "initContainers")));
  return info;
}

StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body, std::string_view gpu_resource) {
  ExtenderArgs args;
  ArgsSax sax(&args, gpu_resource);
  bool ok = false;
  try {
    ok = Json::sax_parse(body.begin(), body.end(), &sax);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("malformed JSON: ") + e.what());
  }
  if (!ok) return InvalidArgumentError(sax.error().empty() ? "malformed JSON" : sax.error());
  if (!sax.saw_pod()) return InvalidArgumentError("missing Pod");
  sax.Finish();
  return args;
}

StatusOr<BindingArgs> ParseBindingArgs(std::string_view body) {
  auto j = ParseDom(body);
  if (!j.ok()) return j.status();
  BindingArgs a;
  bool bad = false;
  a.pod_name = StringField(*j, "PodName", &bad);
  a.pod_namespace = StringField(*j, "PodNamespace", &bad);
  a.pod_uid = StringField(*j, "PodUID", &bad);
  a.node = StringField(*j, "Node", &bad);
  if (bad) return InvalidArgumentError("PodName, PodNamespace, PodUID and Node must be strings");
  if (a.pod_name.empty() || a.pod_namespace.empty() || a.node.empty()) {
    return InvalidArgumentError("PodName, PodNamespace and Node are required");
  }
  return a;
}

StatusOr<PreemptionArgs> ParsePreemptionArgs(std::string_view body, std::string_view gpu_resource) {
  auto j = ParseDom(body);
  if (!j.ok()) return j.status();
  PreemptionArgs a;
  const Json* pod = FindFieldIgnoreCase(*j, "Pod");
  if (pod == nullptr || !pod->is_object()) return InvalidArgumentError("missing Pod");
  a.pod = PodInfoFromJson(*pod, gpu_resource);
  auto read_map = [&](std::string_view field, bool meta) -> Status {
    const Json* m = FindFieldIgnoreCase(*j, field);
    if (m == nullptr || m->is_null()) return Status::Ok();
    if (!m->is_object()) return InvalidArgumentError(std::string(field) + " must be an object");
    for (auto it = m->begin(); it != m->end(); ++it) {
      NodeVictims v;
      if (it->is_null()) {
        a.victims.emplace_back(it.key(), std::move(v));
        continue;
      }
      if (!it->is_object()) return InvalidArgumentError(std::string(field) + " values must be objects");
      if (const Json* n = FindFieldIgnoreCase(*it, "NumPDBViolations"); n && n->is_number_integer()) {
        v.num_pdb_violations = n->get<int64_t>();
      }
      const Json* pods = FindFieldIgnoreCase(*it, "Pods");
      if (pods != nullptr && !pods->is_null()) {
        if (!pods->is_array()) return InvalidArgumentError(std::string(field) + ".Pods must be an array");
        for (const Json& p : *pods) {
          std::string uid;
          if (meta) {
            const Json* u = FindFieldIgnoreCase(p, "UID");
            if (u != nullptr && u->is_string()) uid = u->get<std::string>();
          } else {
            uid = PodInfoFromJson(p, gpu_resource).uid;
          }
          if (uid.empty()) return InvalidArgumentError(std::string(field) + ": a victim without a UID");
          v.pod_uids.push_back(std::move(uid));
        }
      }
      a.victims.emplace_back(it.key(), std::move(v));
    }
    return Status::Ok();
  };
  // The meta form wins when both are present (the scheduler sends one of them).
  if (const Json* m = FindFieldIgnoreCase(*j, "NodeNameToMetaVictims"); m && !m->is_null()) {
    NVL72_RETURN_IF_ERROR(read_map("NodeNameToMetaVictims", true));
  } else {
    NVL72_RETURN_IF_ERROR(read_map("NodeNameToVictims", false));
  }
  return a;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          std::array<char, 8> buf{};
          std::snprintf(buf.data(), buf.size(), "\\u%04x", static_cast<unsigned>(c));
          out += buf.data();
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string SerializeFilterResult(const FilterReply& reply) {
  std::string out;
  size_t estimate = 96 + reply.error.size();
  for (auto n : reply.passed) estimate += n.size() + 3;
  for (const auto& [n, r] : reply.failed) estimate += n.size() + r.size() + 6;
  for (const auto& [n, r] : reply.unresolvable) estimate += n.size() + r.size() + 6;
  out.reserve(estimate);
  out += "{\"Nodes\":null,\"NodeNames\":[";
  bool first = true;
  for (auto n : reply.passed) {
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, n);
  }
  out += "],";
  AppendReasonMap(out, "FailedNodes", reply.failed);
  out += ',';
  AppendReasonMap(out, "FailedAndUnresolvableNodes", reply.unresolvable);
  out += ",\"Error\":";
  AppendJsonString(out, reply.error);
  out += '}';
  return out;
}

std::string SerializeFilterResultFullNodes(const std::vector<const Json*>& passed_nodes,
                                           const FilterReply& reply) {
  std::string out = "{\"Nodes\":{\"items\":[";
  bool first = true;
  for (const Json* n : passed_nodes) {
    if (!first) out += ',';
    first = false;
    out += n->dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  out += "]},\"NodeNames\":null,";
  AppendReasonMap(out, "FailedNodes", reply.failed);
  out += ',';
  AppendReasonMap(out, "FailedAndUnresolvableNodes", reply.unresolvable);
  out += ",\"Error\":";
  AppendJsonString(out, reply.error);
  out += '}';
  return out;
}

std::string SerializeHostPriorityList(const std::vector<std::string>& hosts,
                                      const std::vector<int>& scores) {
  std::string out;
  out.reserve(hosts.size() * 40 + 2);
  out += '[';
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i) out += ',';
    out += "{\"Host\":";
    AppendJsonString(out, hosts[i]);
    out += ",\"Score\":";
    out += std::to_string(i < scores.size() ? scores[i] : 0);
    out += '}';
  }
  out += ']';
  return out;
}

std::string SerializeBindingResult(std::string_view error) {
  std::string out = "{\"Error\":";
  AppendJsonString(out, error);
  out += '}';
  return out;
}

std::string SerializePreemptionResult(
    const std::vector<std::pair<std::string, NodeVictims>>& victims) {
  std::string out = "{\"NodeNameToMetaVictims\":{";
  bool first = true;
  for (const auto& [node, v] : victims) {
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, node);
    out += ":{\"Pods\":[";
    for (size_t i = 0; i < v.pod_uids.size(); ++i) {
      if (i) out += ',';
      out += "{\"UID\":";
      AppendJsonString(out, v.pod_uids[i]);
      out += '}';
    }
    out += "],\"NumPDBViolations\":";
    out += std::to_string(v.num_pdb_violations);
    out += '}';
  }
  out += "}}";
  return out;
}

std::string ErrorBody(std::string_view message) {
  // Parser messages may quote raw bytes of the request: keep the reply valid UTF-8.
  std::string clean(message);
  for (char& c : clean) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return SerializeBindingResult(clean);
}

}  // namespace nvl72::extender
