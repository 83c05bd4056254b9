#include "kube/object.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <set>
#include <vector>

#include "common/rfc3339.h"

namespace nvl72::kube {
namespace {

const Json& Null() {
  static const Json* null = new Json();
  return *null;
}

const Json& Meta(const Json& obj) {
  if (!obj.is_object()) return Null();
  auto it = obj.find("metadata");
  return it != obj.end() && it->is_object() ? *it : Null();
}

std::string StringField(const Json& obj, const char* field) {
  if (!obj.is_object()) return "";
  auto it = obj.find(field);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

std::map<std::string, std::string> StringMap(const Json& obj, const char* field) {
  std::map<std::string, std::string> out;
  if (!obj.is_object()) return out;
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_object()) return out;
  for (auto& [k, v] : it->items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits on commas that are not inside parentheses.
std::vector<std::string_view> SplitRequirements(std::string_view sel) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= sel.size(); ++i) {
    if (i == sel.size() || (sel[i] == ',' && depth == 0)) {
      out.push_back(Trim(sel.substr(start, i - start)));
      start = i + 1;
    } else if (sel[i] == '(') {
      ++depth;
    } else if (sel[i] == ')') {
      --depth;
    }
  }
  return out;
}

bool ValidLabelToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '/')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string Name(const Json& obj) { return StringField(Meta(obj), "name"); }
std::string Namespace(const Json& obj) { return StringField(Meta(obj), "namespace"); }
std::string Uid(const Json& obj) { return StringField(Meta(obj), "uid"); }
std::string ResourceVersion(const Json& obj) { return StringField(Meta(obj), "resourceVersion"); }

int64_t Generation(const Json& obj) {
  const Json& m = Meta(obj);
  if (!m.is_object()) return 0;
  auto it = m.find("generation");
  return it != m.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

bool HasFinalizer(const Json& obj, std::string_view finalizer) {
  const Json& m = Meta(obj);
  if (!m.is_object()) return false;
  auto it = m.find("finalizers");
  if (it == m.end() || !it->is_array()) return false;
  for (const auto& v : *it) {
    if (v.is_string() && v.get_ref<const std::string&>() == finalizer) return true;
  }
  return false;
}

std::string ControllerUid(const Json& obj) {
  const Json& m = Meta(obj);
  if (!m.is_object()) return "";
  auto it = m.find("ownerReferences");
  if (it == m.end() || !it->is_array()) return "";
  for (const auto& ref : *it) {
    if (!ref.is_object()) continue;
    auto c = ref.find("controller");
    if (c != ref.end() && c->is_boolean() && c->get<bool>()) return ref.value("uid", "");
  }
  return "";
}

bool IsBeingDeleted(const Json& obj) {
  const Json& m = Meta(obj);
  if (!m.is_object()) return false;
  auto it = m.find("deletionTimestamp");
  return it != m.end() && !it->is_null();
}

std::map<std::string, std::string> Labels(const Json& obj) {
  return StringMap(Meta(obj), "labels");
}
std::map<std::string, std::string> Annotations(const Json& obj) {
  return StringMap(Meta(obj), "annotations");
}

const Json& AtPath(const Json& obj, std::string_view json_pointer) {
  const Json* cur = &obj;
  size_t pos = 0;
  if (json_pointer.empty()) return obj;
  if (json_pointer[0] != '/') return Null();
  while (pos < json_pointer.size()) {
    size_t next = json_pointer.find('/', pos + 1);
    std::string token(json_pointer.substr(
        pos + 1, next == std::string_view::npos ? std::string_view::npos : next - pos - 1));
    // RFC 6901 unescaping.
    for (size_t i = 0; (i = token.find('~', i)) != std::string::npos; ++i) {
      if (i + 1 < token.size() && token[i + 1] == '1')
        token.replace(i, 2, "/");
      else if (i + 1 < token.size() && token[i + 1] == '0')
        token.replace(i, 2, "~");
    }
    if (cur->is_object()) {
      auto it = cur->find(token);
      if (it == cur->end()) return Null();
      cur = &*it;
    } else if (cur->is_array()) {
      char* end = nullptr;
      unsigned long idx = std::strtoul(token.c_str(), &end, 10);
      if (token.empty() || *end != '\0' || idx >= cur->size()) return Null();
      cur = &(*cur)[idx];
    } else {
      return Null();
    }
    if (next == std::string_view::npos) break;
    pos = next;
  }
  return *cur;
}

std::string MakeKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key(ns);
  key += '/';
  key += name;
  return key;
}

std::string KeyOf(const Json& obj) { return MakeKey(Namespace(obj), Name(obj)); }

std::pair<std::string, std::string> SplitKey(std::string_view key) {
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

namespace {

using LabelMap = std::map<std::string, std::string>;

Status MalformedRequirement(std::string_view req) {
  return Status(StatusCode::kInvalidArgument,
                "malformed label selector requirement \"" + std::string(req) + "\"");
}

// Set-based: "key in (a,b)", "key notin (a)"; `paren` is the position of '('.
StatusOr<bool> MatchesSetRequirement(std::string_view req, size_t paren, const LabelMap& labels) {
  if (req.back() != ')') return MalformedRequirement(req);
  std::string_view head = Trim(req.substr(0, paren));
  size_t sp = head.find_last_of(" \t");
  if (sp == std::string_view::npos) return MalformedRequirement(req);
  std::string_view key = Trim(head.substr(0, sp));
  std::string_view op = Trim(head.substr(sp + 1));
  if (!ValidLabelToken(key) || (op != "in" && op != "notin")) return MalformedRequirement(req);
  std::set<std::string> values;
  std::string_view inner = req.substr(paren + 1, req.size() - paren - 2);
  size_t start = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    if (i == inner.size() || inner[i] == ',') {
      values.insert(std::string(Trim(inner.substr(start, i - start))));
      start = i + 1;
    }
  }
  auto it = labels.find(std::string(key));
  bool in = it != labels.end() && values.count(it->second) > 0;
  return op == "in" ? in : !in;
}

// Equality-based: "key=value", "key==value", "key!=value"; `op_pos` is the first '!' or '='.
StatusOr<bool> MatchesEqualityRequirement(std::string_view req, size_t op_pos,
                                          const LabelMap& labels) {
  std::string_view key = Trim(req.substr(0, op_pos));
  bool negate = false;
  size_t value_pos;
  if (req.substr(op_pos, 2) == "!=") {
    negate = true;
    value_pos = op_pos + 2;
  } else if (req.substr(op_pos, 2) == "==") {
    value_pos = op_pos + 2;
  } else if (req[op_pos] == '=') {
    value_pos = op_pos + 1;
  } else {
    return MalformedRequirement(req);
  }
  std::string_view value = Trim(req.substr(value_pos));
  if (!ValidLabelToken(key)) return MalformedRequirement(req);
  auto it = labels.find(std::string(key));
  bool eq = it != labels.end() && it->second == value;
  return negate ? !eq : eq;
}

// Whether `labels` satisfy one non-empty requirement of a selector.
StatusOr<bool> MatchesRequirement(std::string_view req, const LabelMap& labels) {
  size_t paren = req.find('(');
  if (paren != std::string_view::npos) return MatchesSetRequirement(req, paren, labels);
  if (req[0] == '!') {  // "!key": the label is absent
    std::string_view key = Trim(req.substr(1));
    if (!ValidLabelToken(key)) return MalformedRequirement(req);
    return labels.count(std::string(key)) == 0;
  }
  size_t op_pos = req.find_first_of("!=");
  if (op_pos == std::string_view::npos) {  // "key": the label is present
    if (!ValidLabelToken(req)) return MalformedRequirement(req);
    return labels.count(std::string(req)) > 0;
  }
  return MatchesEqualityRequirement(req, op_pos, labels);
}

}  // namespace

StatusOr<bool> MatchesLabelSelector(const Json& obj, std::string_view selector) {
  selector = Trim(selector);
  if (selector.empty()) return true;
  auto labels = Labels(obj);
  // Validate every requirement even after a mismatch: a malformed selector is always an error.
  bool matched = true;
  for (std::string_view req : SplitRequirements(selector)) {
    if (req.empty())
      return Status(StatusCode::kInvalidArgument, "empty requirement in label selector");
    auto req_matched = MatchesRequirement(req, labels);
    if (!req_matched.ok()) return req_matched.status();
    if (!*req_matched) matched = false;
  }
  return matched;
}

namespace {
std::string FormatWithFraction(std::chrono::system_clock::time_point t, bool micro) {
  auto since = t.time_since_epoch();
  auto secs = std::chrono::floor<std::chrono::seconds>(since);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(since - secs).count();
  std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  if (micro) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(us));
  } else {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}
}  // namespace

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  return FormatWithFraction(t, true);
}
std::string FormatTime(std::chrono::system_clock::time_point t) {
  return FormatWithFraction(t, false);
}

StatusOr<std::chrono::system_clock::time_point> ParseTime(std::string_view s) {
  return ParseRfc3339(s);
}

Json ObjectReferenceFor(const Json& obj) {
  Json ref = Json::object();
  auto put = [&](const char* k, const std::string& v) {
    if (!v.empty()) ref[k] = v;
  };
  put("apiVersion", StringField(obj, "apiVersion"));
  put("kind", StringField(obj, "kind"));
  put("namespace", Namespace(obj));
  put("name", Name(obj));
  put("uid", Uid(obj));
  put("resourceVersion", ResourceVersion(obj));
  return ref;
}

void DropManagedFields(Json& obj) {
  if (!obj.is_object()) return;
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return;
  md->erase("managedFields");
}

}  // namespace nvl72::kube
