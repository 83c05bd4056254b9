#include "scheduler-plugin/wire.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <exception>
#include <unordered_map>

#include "common/numbers.h"
#include "kube/object.h"
#include "model/names.h"

namespace nvl72::extender {
namespace {

// ASCII bytes that stand for themselves inside a JSON string: one table load per byte instead of
// three compares (node names are scanned and written ~10,000 times per filter + prioritize pair).
// Bytes >= 0x80 take the slow path, where the parser checks that they form valid UTF-8.
constexpr std::array<bool, 256> kPlainJsonByte = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

// Length of the valid UTF-8 sequence at s[0..n), or 0 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF).
size_t Utf8SequenceLength(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  size_t len = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, cp = c & 0x07u;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (s[i] & 0x3Fu);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return len;
}
inline bool PlainJsonByte(char c) { return kPlainJsonByte[static_cast<unsigned char>(c)]; }

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
// A minimal, validating JSON scanner for the top level of ExtenderArgs. The filter/prioritize body
// is mostly NodeNames (5,000 short strings at scale): those are read straight into strings; the Pod
// and the full-mode Nodes are small or rare and go through nlohmann's DOM; anything else is skipped
// (still validated).

class Scanner {
 public:
  explicit Scanner(std::string_view s)
      : p_(s.data()), begin_(s.data()), end_(s.data() + s.size()) {}

  void Ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool Eat(char c) {
    Ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    Ws();
    return p_ < end_ && *p_ == c;
  }
  bool AtEnd() {
    Ws();
    return p_ == end_;
  }
  const char* pos() const { return p_; }
  // Moves past `n` bytes known to be a complete, valid value. REQUIRES: n <= bytes left.
  void Advance(size_t n) { p_ += n; }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }

  // A string literal, unescaped into `out`.
  bool String(std::string* out) {
    Ws();
    if (p_ >= end_ || *p_ != '"') return false;
    ++p_;
    const char* start = p_;
    // A local cursor: through the member, every char read may alias p_ itself (char aliasing), so
    // the compiler would store and reload it per character.
    const char* q = p_;
    while (q < end_ && PlainJsonByte(*q)) ++q;
    p_ = q;
    if (p_ < end_ && *p_ == '"') {  // fast path: no escapes
      out->assign(start, p_);
      ++p_;
      return true;
    }
    out->assign(start, p_);
    return StringRest(out);
  }

  // Skips one value of any type, validating its syntax. Nesting is limited to kMaxDepth.
  bool Skip(int depth = 0) {
    if (depth > kMaxDepth) return false;
    Ws();
    if (p_ >= end_) return false;
    switch (*p_) {
      case '{': {
        ++p_;
        if (Eat('}')) return true;
        do {
          if (!String(&scratch_) || !Eat(':') || !Skip(depth + 1)) return false;
        } while (Eat(','));
        return Eat('}');
      }
      case '[': {
        ++p_;
        if (Eat(']')) return true;
        do {
          if (!Skip(depth + 1)) return false;
        } while (Eat(','));
        return Eat(']');
      }
      case '"':
        return SkipString();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  // A string literal, validated but not kept: plain bytes are only scanned (node names are all
  // plain); a literal with escapes or non-ASCII bytes goes through String().
  bool SkipString() {
    const char* q = p_ + 1;
    while (q < end_ && PlainJsonByte(*q)) ++q;
    if (q < end_ && *q == '"') {
      p_ = q + 1;
      return true;
    }
    return String(&scratch_);
  }

  bool Literal(std::string_view lit) {
    Ws();
    if (static_cast<size_t>(end_ - p_) < lit.size() || std::string_view(p_, lit.size()) != lit)
      return false;
    p_ += lit.size();
    return true;
  }

 private:
  static constexpr int kMaxDepth = 256;

  // The rest of a string literal after its plain prefix (already in `out`), up to and past the
  // closing quote: escapes and non-ASCII bytes, unescaped into `out`.
  bool StringRest(std::string* out) {
    while (p_ < end_) {
      const char c = *p_++;
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (static_cast<unsigned char>(c) >= 0x80) {  // JSON text is UTF-8 (RFC 8259): check it
        const char* seq = p_ - 1;
        const size_t len = Utf8SequenceLength(reinterpret_cast<const unsigned char*>(seq),
                                              static_cast<size_t>(end_ - seq));
        if (len == 0) return false;
        out->append(seq, len);
        p_ = seq + len;
        continue;
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (!Escape(out)) return false;
    }
    return false;
  }

  // The escape after a backslash, unescaped into `out`.
  bool Escape(std::string* out) {
    if (p_ >= end_) return false;
    const char e = *p_++;
    switch (e) {
      case '"':
        out->push_back('"');
        break;
      case '\\':
        out->push_back('\\');
        break;
      case '/':
        out->push_back('/');
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'u':
        return UnicodeEscape(out);
      default:
        return false;
    }
    return true;
  }

  // The XXXX of a \uXXXX escape (and a second \uXXXX after a high surrogate), appended as UTF-8.
  bool UnicodeEscape(std::string* out) {
    uint32_t cp = 0;
    if (!Hex4(&cp)) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      uint32_t lo = 0;
      if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') return false;
      p_ += 2;
      if (!Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return false;
    }
    AppendUtf8(out, cp);
    return true;
  }

  bool Hex4(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      r <<= 4;
      if (c >= '0' && c <= '9')
        r |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        r |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        r |= static_cast<uint32_t>(c - 'A' + 10);
      else
        return false;
    }
    *v = r;
    return true;
  }
  static void AppendUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  bool Number() {
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (p_ >= end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    return p_ > start;
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  std::string scratch_;
};

// Lower-case ASCII copy, for the case-insensitive top-level field names.
std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

void AppendReasonMap(std::string& out, const char* field,
                     const std::vector<std::pair<std::string_view, std::string_view>>& entries,
                     bool literal_names) {
  out += '"';
  out += field;
  out += "\":{";
  bool first = true;
  // Thousands of nodes share a handful of reasons: escape each once, not once per node.
  // Keyed by the reason's address; the stored length tells two views of one buffer apart.
  std::unordered_map<const char*, std::pair<size_t, std::string>> escaped;
  std::string_view last_reason;
  const std::string* last_json = nullptr;
  for (const auto& [node, reason] : entries) {
    if (!first) out += ',';
    first = false;
    if (literal_names) {
      out.append(node);
    } else {
      AppendJsonString(out, node);
    }
    out += ':';
    if (last_json == nullptr || reason.data() != last_reason.data() ||
        reason.size() != last_reason.size()) {
      auto [it, inserted] = escaped.try_emplace(reason.data());
      auto& [length, json] = it->second;
      if (inserted || length != reason.size()) {
        length = reason.size();
        json.clear();
        AppendJsonString(json, reason);
      }
      last_reason = reason;
      last_json = &json;
    }
    out += *last_json;
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
  if (rest == "k")
    mult = 1000;
  else if (rest == "M")
    mult = 1000000;
  else if (!rest.empty())
    return false;
  if (v > (int64_t{1} << 40) / mult) return false;
  *out = v * mult;
  return true;
}

bool ParseCountQuantity(const Json& value, int64_t* out) {
  if (value.is_string())
    return ParseCountQuantity(std::string_view(value.get_ref<const std::string&>()), out);
  if (value.is_number_unsigned() || value.is_number_integer()) {
    const auto v = value.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  if (value.is_number_float()) {
    int64_t v = 0;
    if (!WholeDoubleToInt64(value.get<double>(), &v) || v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

namespace {
PodInfo PodInfoFromJsonChecked(const Json& pod, std::string_view gpu_resource, bool* bad_quantity);
}  // namespace

PodInfo PodInfoFromJson(const Json& pod, std::string_view gpu_resource) {
  bool bad = false;
  return PodInfoFromJsonChecked(pod, gpu_resource, &bad);
}

namespace {
PodInfo PodInfoFromJsonChecked(const Json& pod, std::string_view gpu_resource, bool* bad_quantity) {
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
  info.job = str(labels, std::string(model::kJobLabel).c_str());
  if (std::string r = str(labels, std::string(model::kRankLabel).c_str()); !r.empty())
    info.rank = ParseRank(r);
  info.planned_node = str(obj(meta, "annotations"), std::string(model::kNodeAnnotation).c_str());
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
        if (it == m.end()) continue;
        if (ParseCountQuantity(*it, &q)) {
          (std::string_view(which) == "requests" ? g.request : g.limit) = q;
        } else {
          *bad_quantity = true;
        }
      }
      out.push_back(g);
    }
    return out;
  };
  info.gpus = EffectiveGpus(gpus_of(obj(spec, "containers")), gpus_of(obj(spec, "initContainers")));
  return info;
}
}  // namespace

namespace {
// Parses the NodeNames array at the scanner (at its '['): the names and their literals, in one
// pass. nullptr if it is not an array of strings. `expected` sizes the vectors up front (growing
// them moves every name again and again).
// Flattened (all it calls inlined into it): GCC's inlining budget for this file runs out, and which
// calls still got inlined here (the string moves of a growing vector among them) changed with edits
// elsewhere in the file; measured with callgrind at 5,000 names.
[[gnu::flatten]] std::shared_ptr<NodeNameList> ParseNodeNamesArray(Scanner& sc, size_t expected,
                                                                   size_t bytes_left) {
  auto list = std::make_shared<NodeNameList>();
  list->names.reserve(expected);
  list->literal_end.reserve(expected);
  list->literals.reserve(bytes_left);
  if (!sc.Eat('[')) return nullptr;
  if (!sc.Eat(']')) {
    do {
      sc.Ws();
      const char* begin = sc.pos();
      list->names.emplace_back();
      if (!sc.String(&list->names.back())) return nullptr;
      list->literals.append(begin, sc.pos());
      list->literal_end.push_back(static_cast<uint32_t>(list->literals.size()));
    } while (sc.Eat(','));
    if (!sc.Eat(']')) return nullptr;
  }
  return list;
}

// kInvalidArgument "`what` (at byte N)", N the scanner's offset.
Status BadAt(const Scanner& sc, const std::string& what) {
  return InvalidArgumentError(what + " (at byte " + std::to_string(sc.offset()) + ")");
}

// The full-mode node list: metadata.name of each Nodes.items entry, into `args`.
Status ReadNodesItems(const Scanner& sc, const Json& nodes, ExtenderArgs* args) {
  args->has_nodes = true;
  std::vector<std::string> names;
  const Json& items = kube::AtPath(nodes, "/items");
  if (!items.is_null() && !items.is_array()) return BadAt(sc, "Nodes.items must be an array");
  if (items.is_array()) {
    for (const Json& n : items) {
      const Json& name = kube::AtPath(n, "/metadata/name");
      if (!name.is_string()) return BadAt(sc, "Nodes.items entries need metadata.name");
      names.push_back(name.get<std::string>());
    }
  }
  args->SetNodeNames(std::move(names));
  return Status::Ok();
}

// The value of the field "Pod" or "Nodes" at the scanner (`field`: its name in lower case, `key`:
// as sent): null, or an object, parsed as a DOM.
Status ReadPodOrNodes(Scanner& sc, const std::string& key, const std::string& field,
                      std::string_view gpu_resource, ExtenderArgs* args, bool* saw_pod) {
  if (sc.Peek('n')) {
    if (!sc.Literal("null")) return BadAt(sc, "malformed JSON");
    if (field == "pod") *saw_pod = false;
    return Status::Ok();
  }
  if (!sc.Peek('{'))
    return BadAt(sc, field == "pod" ? "Pod must be an object" : "Nodes must be an object");
  const char* start = sc.pos();
  if (!sc.Skip()) return BadAt(sc, "malformed JSON in " + key);
  const Json value = Json::parse(start, sc.pos(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return BadAt(sc, "malformed JSON in " + key);
  if (field != "pod") return ReadNodesItems(sc, value, args);
  bool bad_quantity = false;
  args->pod = PodInfoFromJsonChecked(value, gpu_resource, &bad_quantity);
  if (bad_quantity) return BadAt(sc, "Pod: unparsable quantity for " + std::string(gpu_resource));
  *saw_pod = true;
  return Status::Ok();
}

// The value of the field "NodeNames" at the scanner: null or an array of strings, taken from
// `cache` when it repeats a recent one (else parsed and put in `cache`).
Status ReadNodeNames(Scanner& sc, std::string_view body, NodeNamesCache* cache,
                     ExtenderArgs* args) {
  if (sc.Peek('n')) {
    if (!sc.Literal("null")) return BadAt(sc, "malformed JSON");
    return Status::Ok();
  }
  if (!sc.Peek('[')) return BadAt(sc, "NodeNames must be an array of strings");
  args->node_cache_capable = true;
  const char* begin = sc.pos();
  const size_t at = sc.offset();
  // A byte-identical repeat of a recent array (kube-scheduler sends the same names cycle after
  // cycle) is taken as it is: those bytes were validated when first parsed.
  size_t known = 0;
  if (cache != nullptr) {
    if (auto hit = cache->FindPrefixOf(body.substr(at), &known)) {
      sc.Advance(known);
      args->nodes = std::move(hit);
      args->node_names_cached = true;
      return Status::Ok();
    }
  }
  // Arrays in a burst differ by a few names: size the new one like the last one seen.
  const size_t last = cache != nullptr ? cache->LastSize() : 0;
  std::shared_ptr<NodeNameList> parsed =
      ParseNodeNamesArray(sc, last + last / 16 + 8, body.size() - at);
  if (parsed == nullptr) {
    return InvalidArgumentError("NodeNames must be an array of strings (at byte " +
                                std::to_string(at) + ")");
  }
  if (cache != nullptr)
    cache->Insert(std::string_view(begin, static_cast<size_t>(sc.pos() - begin)), parsed);
  args->nodes = std::move(parsed);
  return Status::Ok();
}

}  // namespace

StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body, std::string_view gpu_resource,
                                         NodeNamesCache* cache) {
  ExtenderArgs args;
  Scanner sc(body);
  if (!sc.Eat('{')) return BadAt(sc, "request body must be a JSON object");
  bool saw_pod = false;
  std::string key;
  if (!sc.Eat('}')) {
    do {
      if (!sc.String(&key) || !sc.Eat(':')) {
        return BadAt(sc, "malformed JSON: expected a field name");
      }
      const std::string field = Lower(key);
      if (field == "pod" || field == "nodes") {
        NVL72_RETURN_IF_ERROR(ReadPodOrNodes(sc, key, field, gpu_resource, &args, &saw_pod));
      } else if (field == "nodenames") {
        NVL72_RETURN_IF_ERROR(ReadNodeNames(sc, body, cache, &args));
      } else if (!sc.Skip()) {
        return BadAt(sc, "malformed JSON in " + key);
      }
    } while (sc.Eat(','));
    if (!sc.Eat('}')) return BadAt(sc, "malformed JSON: expected , or }");
  }
  if (!sc.AtEnd()) return BadAt(sc, "malformed JSON: data after the request object");
  if (!saw_pod) return InvalidArgumentError("missing Pod");
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
      if (!it->is_object())
        return InvalidArgumentError(std::string(field) + " values must be objects");
      if (const Json* n = FindFieldIgnoreCase(*it, "NumPDBViolations");
          n && n->is_number_integer()) {
        v.num_pdb_violations = n->get<int64_t>();
      }
      const Json* pods = FindFieldIgnoreCase(*it, "Pods");
      if (pods != nullptr && !pods->is_null()) {
        if (!pods->is_array())
          return InvalidArgumentError(std::string(field) + ".Pods must be an array");
        for (const Json& p : *pods) {
          std::string uid;
          if (meta) {
            const Json* u = FindFieldIgnoreCase(p, "UID");
            if (u != nullptr && u->is_string()) uid = u->get<std::string>();
          } else {
            uid = PodInfoFromJson(p, gpu_resource).uid;
          }
          if (uid.empty())
            return InvalidArgumentError(std::string(field) + ": a victim without a UID");
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
  size_t plain = 0;
  while (plain < s.size() && PlainJsonByte(s[plain])) ++plain;
  out.append(s.data(), plain);  // node names and reasons: usually everything
  s.remove_prefix(plain);
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
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
    if (reply.names_are_literals) {
      out.append(n);
    } else {
      AppendJsonString(out, n);
    }
  }
  out += "],";
  AppendReasonMap(out, "FailedNodes", reply.failed, reply.names_are_literals);
  out += ',';
  AppendReasonMap(out, "FailedAndUnresolvableNodes", reply.unresolvable, reply.names_are_literals);
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
  AppendReasonMap(out, "FailedNodes", reply.failed, reply.names_are_literals);
  out += ',';
  AppendReasonMap(out, "FailedAndUnresolvableNodes", reply.unresolvable, reply.names_are_literals);
  out += ",\"Error\":";
  AppendJsonString(out, reply.error);
  out += '}';
  return out;
}

namespace {
// [{"Host":<host i>,"Score":<score i>},...]; `append_host(out, i)` writes host i as a JSON string.
template <typename AppendHost>
std::string HostPriorities(size_t hosts, size_t reserve, const std::vector<int>& scores,
                           AppendHost append_host) {
  std::string out;
  out.reserve(reserve);
  out += '[';
  constexpr std::string_view kHost = "{\"Host\":";
  constexpr std::string_view kScore = ",\"Score\":";
  std::array<char, 16> num{};
  for (size_t i = 0; i < hosts; ++i) {
    if (i) out += ',';
    out.append(kHost);
    append_host(out, i);
    out.append(kScore);
    const auto [end, ec] =
        std::to_chars(num.data(), num.data() + num.size(), i < scores.size() ? scores[i] : 0);
    out.append(num.data(), static_cast<size_t>(end - num.data()));
    out += '}';
  }
  out += ']';
  return out;
}
}  // namespace

std::string SerializeHostPriorityList(const std::vector<std::string>& hosts,
                                      const std::vector<int>& scores) {
  size_t estimate = 2;
  for (const auto& h : hosts) estimate += h.size() + 32;
  return HostPriorities(hosts.size(), estimate, scores,
                        [&](std::string& out, size_t i) { AppendJsonString(out, hosts[i]); });
}

std::string SerializeHostPriorities(const NodeNameList& hosts, const std::vector<int>& scores) {
  return HostPriorities(hosts.size(), 2 + hosts.literals.size() + hosts.size() * 24, scores,
                        [&](std::string& out, size_t i) { out.append(hosts.Literal(i)); });
}

std::shared_ptr<NodeNameList> NodeNameList::FromNames(std::vector<std::string> names) {
  auto list = std::make_shared<NodeNameList>();
  list->literal_end.reserve(names.size());
  for (const std::string& n : names) {
    AppendJsonString(list->literals, n);
    list->literal_end.push_back(static_cast<uint32_t>(list->literals.size()));
  }
  list->names = std::move(names);
  return list;
}

std::shared_ptr<NodeNameList> NodeNameList::Subset(std::span<const int> indices,
                                                   std::string* raw) const {
  auto list = std::make_shared<NodeNameList>();
  list->names.reserve(indices.size());
  list->literal_end.reserve(indices.size());
  raw->clear();
  raw->reserve(literals.size() + indices.size() + 2);
  *raw += '[';
  uint32_t end = 0;
  for (int i : indices) {
    const auto k = static_cast<size_t>(i);
    const std::string_view lit = Literal(k);
    if (end > 0) *raw += ',';
    raw->append(lit);
    list->names.push_back(names[k]);
    end += static_cast<uint32_t>(lit.size());
    list->literal_end.push_back(end);
  }
  *raw += ']';
  // The literals back to back: the array without its brackets and commas.
  list->literals.reserve(end);
  for (int i : indices) list->literals.append(Literal(static_cast<size_t>(i)));
  return list;
}

std::shared_ptr<const NodeNameList> NodeNamesCache::FindPrefixOf(std::string_view text,
                                                                 size_t* length) const {
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!text.starts_with(entries_[i].raw)) continue;
    *length = entries_[i].raw.size();
    std::rotate(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(i),
                entries_.begin() + static_cast<std::ptrdiff_t>(i) + 1);  // most recent first
    ++hits_;
    return entries_.front().list;
  }
  return nullptr;
}

void NodeNamesCache::Insert(std::string_view raw, std::shared_ptr<const NodeNameList> list) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].raw != raw) continue;
    entries_[i].list = std::move(list);  // the same bytes again: refresh, do not hold them twice
    std::rotate(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(i),
                entries_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    return;
  }
  Entry e{std::string(raw), std::move(list)};
  if (entries_.size() >= capacity_) entries_.pop_back();
  entries_.insert(entries_.begin(), std::move(e));
}

size_t NodeNamesCache::LastSize() const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.empty() ? 0 : entries_.front().list->size();
}

int64_t NodeNamesCache::hits() const {
  std::lock_guard<std::mutex> l(mu_);
  return hits_;
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
