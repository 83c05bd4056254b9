#include "model/feasibility.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

namespace nvl72::model {
namespace {

using Json = nlohmann::json;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Go's strconv.ParseInt(s, 10, 64): an optional sign, then at least one decimal digit, in range.
bool ParseDecimalInt64(std::string_view s, int64_t* out) {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (s.empty() || !IsDigit(s.front())) return false;  // "+-1" is no number
  }
  if (s.empty()) return false;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  *out = value;
  return true;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t diff = 0;
  if (!__builtin_sub_overflow(a, b, &diff)) return diff;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

// ------------------------------------------------------------------------------------------------
// Quantities, read as apimachinery's ParseQuantity reads them.

// A quantity taken apart: the digits of its number without the decimal point, how many of them
// stood after the point, and the suffix.
struct QuantityText {
  bool negative = false;
  std::string digits;
  int64_t fraction_digits = 0;
  std::string_view suffix;
};

size_t SkipDigits(std::string_view s, size_t pos) {
  while (pos < s.size() && IsDigit(s[pos])) ++pos;
  return pos;
}

// The grammar [+-]?[0-9]*(.[0-9]*)?[eEinumkKMGTP]*[+-]?[0-9]*, all of the text. As in the API, a
// number part without digits reads as zero: ".", "+" and "Gi" are quantities of 0.
bool SplitQuantity(std::string_view text, QuantityText* out) {
  if (text.empty()) return false;
  size_t pos = 0;
  if (text[0] == '+' || text[0] == '-') {
    out->negative = text[0] == '-';
    ++pos;
  }
  const size_t int_end = SkipDigits(text, pos);
  out->digits.assign(text.substr(pos, int_end - pos));
  pos = int_end;
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_end = SkipDigits(text, pos + 1);
    out->digits.append(text.substr(pos + 1, frac_end - pos - 1));
    out->fraction_digits = static_cast<int64_t>(frac_end - pos - 1);
    pos = frac_end;
  }
  const size_t suffix_start = pos;
  while (pos < text.size() &&
         std::string_view("eEinumkKMGTP").find(text[pos]) != std::string_view::npos) {
    ++pos;
  }
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) ++pos;
  if (SkipDigits(text, pos) != text.size()) return false;
  out->suffix = text.substr(suffix_start);
  return true;
}

// The value of a suffix: 10^exp10 * 2^exp2.
struct SuffixScale {
  int64_t exp10 = 0;
  int exp2 = 0;
};

bool InterpretSuffix(std::string_view suffix, SuffixScale* scale) {
  static constexpr std::pair<std::string_view, int> kDecimal[] = {
      {"n", -9}, {"u", -6}, {"m", -3}, {"", 0},   {"k", 3},
      {"M", 6},  {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};
  static constexpr std::pair<std::string_view, int> kBinary[] = {
      {"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  for (const auto& [name, exp] : kDecimal) {
    if (suffix != name) continue;
    scale->exp10 = exp;
    return true;
  }
  for (const auto& [name, exp] : kBinary) {
    if (suffix != name) continue;
    scale->exp2 = exp;
    return true;
  }
  // "e3", "E-2": a decimal exponent. ("E" alone is exa, matched above.)
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    return ParseDecimalInt64(suffix.substr(1), &scale->exp10);
  }
  return false;
}

// digits *= factor, on decimal digits (most significant first).
void MultiplyDecimal(std::string& digits, int factor) {
  int carry = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    const int v = (*it - '0') * factor + carry;
    *it = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  for (; carry > 0; carry /= 10) digits.insert(digits.begin(), static_cast<char>('0' + carry % 10));
}

// The smallest integer >= digits * 10^exp10 (digits non-empty, no leading zero), or false when
// that is above INT64_MAX.
bool CeilScaled(std::string_view digits, int64_t exp10, uint64_t* out) {
  const auto size = static_cast<int64_t>(digits.size());
  constexpr int64_t kMaxDigits = 19;  // 10^19 > INT64_MAX
  std::string_view whole = digits;
  bool has_fraction = false;
  if (exp10 >= 0) {
    if (size + exp10 > kMaxDigits) return false;
  } else if (-exp10 >= size) {
    whole = "0";
    has_fraction = true;  // a positive value below 1
  } else {
    whole = digits.substr(0, static_cast<size_t>(size + exp10));
    const std::string_view fraction = digits.substr(whole.size());
    has_fraction = fraction.find_first_not_of('0') != std::string_view::npos;
    if (static_cast<int64_t>(whole.size()) > kMaxDigits) return false;
  }
  uint64_t value = 0;
  std::from_chars(whole.data(), whole.data() + whole.size(), value);
  for (int64_t i = 0; i < exp10; ++i) value *= 10;
  if (has_fraction) ++value;
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = value;
  return true;
}

std::string_view TrimAsciiSpace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// ------------------------------------------------------------------------------------------------
// Resource lists (sorted by name).

// Where `name` is or would go in `list`.
size_t Position(const ResourceList& list, std::string_view name) {
  const auto it =
      std::lower_bound(list.begin(), list.end(), name,
                       [](const auto& entry, std::string_view n) { return entry.first < n; });
  return static_cast<size_t>(it - list.begin());
}

ResourceList::iterator Find(ResourceList& list, std::string_view name) {
  return list.begin() + static_cast<ptrdiff_t>(Position(list, name));
}

bool Has(const ResourceList& list, std::string_view name) {
  const size_t i = Position(list, name);
  return i < list.size() && list[i].first == name;
}

void Set(ResourceList& list, std::string_view name, int64_t amount) {
  const auto it = Find(list, name);
  if (it != list.end() && it->first == name) {
    it->second = amount;
  } else {
    list.emplace(it, std::string(name), amount);
  }
}

// list[r] = max(list[r], other[r]) for every r of `other`; a resource `list` lacks is taken as is.
void MaxResources(ResourceList& list, const ResourceList& other) {
  for (const auto& [name, amount] : other) {
    const auto it = Find(list, name);
    if (it == list.end() || it->first != name) {
      list.emplace(it, name, amount);
    } else {
      it->second = std::max(it->second, amount);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Label syntax, as labels.NewRequirement validates a node selector requirement.

bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A label name, or a non-empty label value: ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], <= 63.
bool IsLabelName(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool IsLabelValue(std::string_view s) { return s.empty() || IsLabelName(s); }

// An RFC 1123 subdomain: lowercase [a-z0-9]([-a-z0-9]*[a-z0-9])? parts joined by dots, <= 253.
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  const auto lower_alnum = [](char c) { return IsDigit(c) || (c >= 'a' && c <= 'z'); };
  size_t start = 0;
  while (true) {
    const size_t dot = std::min(s.find('.', start), s.size());
    const std::string_view part = s.substr(start, dot - start);
    if (part.empty() || !lower_alnum(part.front()) || !lower_alnum(part.back())) return false;
    if (!std::all_of(part.begin(), part.end(),
                     [&](char c) { return lower_alnum(c) || c == '-'; })) {
      return false;
    }
    if (dot == s.size()) return true;
    start = dot + 1;
  }
}

// A label key: a name with an optional "<dns subdomain>/" prefix.
bool IsQualifiedName(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return IsLabelName(s);
  const std::string_view name = s.substr(slash + 1);
  return name.find('/') == std::string_view::npos && IsDnsSubdomain(s.substr(0, slash)) &&
         IsLabelName(name);
}

// ------------------------------------------------------------------------------------------------
// Node selector requirements.

const std::string* LabelOf(const NodeFacts& node, std::string_view key) {
  for (const auto& [k, v] : node.labels) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Contains(const std::vector<std::string>& values, std::string_view value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// Whether labels.NewRequirement accepts `r`: a term with a requirement it refuses matches nothing.
bool LabelRequirementValid(const NodeSelectorRequirement& r) {
  if (!IsQualifiedName(r.key)) return false;
  if (!std::all_of(r.values.begin(), r.values.end(), IsLabelValue)) return false;
  if (r.op == "In" || r.op == "NotIn") return !r.values.empty();
  if (r.op == "Exists" || r.op == "DoesNotExist") return r.values.empty();
  if (r.op == "Gt" || r.op == "Lt") {
    int64_t bound = 0;
    return r.values.size() == 1 && ParseDecimalInt64(r.values[0], &bound);
  }
  return false;
}

// REQUIRES: LabelRequirementValid(r).
bool LabelRequirementMatches(const NodeSelectorRequirement& r, const NodeFacts& node) {
  const std::string* label = LabelOf(node, r.key);
  if (r.op == "In") return label != nullptr && Contains(r.values, *label);
  if (r.op == "NotIn") return label == nullptr || !Contains(r.values, *label);
  if (r.op == "Exists") return label != nullptr;
  if (r.op == "DoesNotExist") return label == nullptr;
  int64_t have = 0;
  int64_t bound = 0;
  if (label == nullptr || !ParseDecimalInt64(*label, &have)) return false;
  ParseDecimalInt64(r.values[0], &bound);
  return r.op == "Gt" ? have > bound : have < bound;
}

bool FieldRequirementValid(const NodeSelectorRequirement& r) {
  return (r.op == "In" || r.op == "NotIn") && r.values.size() == 1;
}

// A node has one field, metadata.name; any other field reads as "".
bool FieldRequirementMatches(const NodeSelectorRequirement& r, const NodeFacts& node) {
  const std::string_view field = r.key == "metadata.name" ? std::string_view(node.name) : "";
  return (field == r.values[0]) == (r.op == "In");
}

bool TermMatches(const NodeSelectorTerm& term, const NodeFacts& node) {
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  for (const auto& r : term.match_expressions) {
    if (!LabelRequirementValid(r) || !LabelRequirementMatches(r, node)) return false;
  }
  for (const auto& r : term.match_fields) {
    if (!FieldRequirementValid(r)) return false;
  }
  // kube-scheduler skips matchFields for a node without a name (no fields at all).
  if (node.name.empty()) return true;
  return std::all_of(term.match_fields.begin(), term.match_fields.end(),
                     [&](const auto& r) { return FieldRequirementMatches(r, node); });
}

const std::pair<std::string, std::string>* FirstUnmatchedSelector(const PodConstraints& pod,
                                                                  const NodeFacts& node) {
  for (const auto& pair : pod.node_selector) {
    const std::string* label = LabelOf(node, pair.first);
    if (label == nullptr || *label != pair.second) return &pair;
  }
  return nullptr;
}

bool ToleratedByAny(const std::vector<Toleration>& tolerations, const Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(),
                     [&](const Toleration& t) { return Tolerates(t, taint); });
}

// ------------------------------------------------------------------------------------------------
// Reading a pod spec. Readers note the first malformed field and skip what they cannot read, so
// that PodRequests (lenient) and PodConstraintsOf (strict) share one reading.

class Problems {
 public:
  void Add(const std::string& path, std::string_view what) {
    if (first_.ok()) first_ = InvalidArgumentError(path + ": " + std::string(what));
  }
  const Status& first() const { return first_; }

 private:
  Status first_;
};

std::string Indexed(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// obj[key], or nullptr when `obj` is no object or the member is absent or null.
const Json* Member(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

const Json* Typed(const Json& obj, const char* key, const std::string& path, Problems& problems,
                  bool (Json::*is_type)() const noexcept, std::string_view type) {
  const Json* member = Member(obj, key);
  if (member == nullptr || (member->*is_type)()) return member;
  problems.Add(path + "." + key, "must be " + std::string(type));
  return nullptr;
}

const Json* ObjectAt(const Json& obj, const char* key, const std::string& path, Problems& p) {
  return Typed(obj, key, path, p, &Json::is_object, "an object");
}

const Json* ArrayAt(const Json& obj, const char* key, const std::string& path, Problems& p) {
  return Typed(obj, key, path, p, &Json::is_array, "an array");
}

std::string StringAt(const Json& obj, const char* key, const std::string& path, Problems& p) {
  const Json* s = Typed(obj, key, path, p, &Json::is_string, "a string");
  return s == nullptr ? std::string() : s->get<std::string>();
}

// A map of strings (labels, nodeSelector), sorted by key.
std::vector<std::pair<std::string, std::string>> StringMapAt(const Json& obj, const char* key,
                                                             const std::string& path, Problems& p) {
  std::vector<std::pair<std::string, std::string>> out;
  const Json* map = ObjectAt(obj, key, path, p);
  if (map == nullptr) return out;
  const std::string map_path = path + "." + key + ".";
  for (const auto& [k, v] : map->items()) {
    if (v.is_string()) {
      out.emplace_back(k, v.get<std::string>());
    } else {
      p.Add(map_path + k, "must be a string");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

ResourceList ResourceListAt(const Json& obj, const char* key, const std::string& path,
                            Problems& p) {
  ResourceList out;
  const Json* map = ObjectAt(obj, key, path, p);
  if (map == nullptr) return out;
  const std::string map_path = path + "." + key + ".";
  for (const auto& [name, quantity] : map->items()) {
    int64_t milli = 0;
    if (ParseMilliQuantity(quantity, &milli)) {
      Set(out, name, milli);
    } else {
      p.Add(map_path + name, "must be a quantity");
    }
  }
  return out;
}

struct ContainerRequests {
  ResourceList requests;  // with limits standing in for missing requests
  bool sidecar = false;   // an init container with restartPolicy Always
};

ContainerRequests ReadContainer(const Json& container, const std::string& path, Problems& p) {
  ContainerRequests out;
  if (!container.is_object()) {
    p.Add(path, "must be an object");
    return out;
  }
  if (const Json* resources = ObjectAt(container, "resources", path, p)) {
    const std::string res_path = path + ".resources";
    out.requests = ResourceListAt(*resources, "requests", res_path, p);
    for (const auto& [name, amount] : ResourceListAt(*resources, "limits", res_path, p)) {
      if (!Has(out.requests, name)) Set(out.requests, name, amount);
    }
  }
  out.sidecar = StringAt(container, "restartPolicy", path, p) == "Always";
  return out;
}

std::vector<ContainerRequests> ReadContainers(const Json& spec, const char* key, Problems& p) {
  std::vector<ContainerRequests> out;
  if (const Json* list = ArrayAt(spec, key, "spec", p)) {
    const std::string path = std::string("spec.") + key;
    for (size_t i = 0; i < list->size(); ++i) {
      out.push_back(ReadContainer((*list)[i], Indexed(path, i), p));
    }
  }
  return out;
}

// The sidecar formula of KEP-753: containers and sidecars run together; each ordinary init
// container runs alone with the sidecars started before it.
ResourceList AggregateContainerRequests(const std::vector<ContainerRequests>& containers,
                                        const std::vector<ContainerRequests>& init_containers) {
  ResourceList total;
  for (const auto& c : containers) AddResources(total, c.requests);
  ResourceList sidecars;
  ResourceList init_peak;
  for (const auto& c : init_containers) {
    if (c.sidecar) {
      AddResources(total, c.requests);
      AddResources(sidecars, c.requests);  // `total` already covers the sidecars' own peak
    } else {
      ResourceList while_running = c.requests;
      AddResources(while_running, sidecars);
      MaxResources(init_peak, while_running);
    }
  }
  MaxResources(total, init_peak);
  return total;
}

bool IsHugePages(std::string_view name) { return name.starts_with("hugepages-"); }

bool IsPodLevelResource(std::string_view name) {
  return name == "cpu" || name == "memory" || IsHugePages(name);
}

// spec.resources replaces the containers' total for cpu, memory and hugepages-*. The API server
// defaults a missing pod-level request from a pod-level limit, except for cpu and memory that the
// containers ask for: there the containers' total stands (defaultPodRequests).
void ApplyPodLevelRequests(const Json& spec, ResourceList& requests, Problems& p) {
  const Json* resources = ObjectAt(spec, "resources", "spec", p);
  if (resources == nullptr) return;
  ResourceList pod_requests = ResourceListAt(*resources, "requests", "spec.resources", p);
  for (const auto& [name, limit] : ResourceListAt(*resources, "limits", "spec.resources", p)) {
    if (!IsPodLevelResource(name) || Has(pod_requests, name)) continue;
    if (!IsHugePages(name) && Has(requests, name)) continue;
    Set(pod_requests, name, limit);
  }
  for (const auto& [name, amount] : pod_requests) {
    if (IsPodLevelResource(name)) Set(requests, name, amount);
  }
}

ResourceList ReadPodRequests(const Json& spec, Problems& p) {
  const auto containers = ReadContainers(spec, "containers", p);
  const auto init_containers = ReadContainers(spec, "initContainers", p);
  ResourceList requests = AggregateContainerRequests(containers, init_containers);
  ApplyPodLevelRequests(spec, requests, p);
  AddResources(requests, ResourceListAt(spec, "overhead", "spec", p));
  return requests;
}

Toleration ReadToleration(const Json& item, const std::string& path, Problems& p) {
  Toleration t;
  if (!item.is_object()) {
    p.Add(path, "must be an object");
    return t;
  }
  t.key = StringAt(item, "key", path, p);
  t.value = StringAt(item, "value", path, p);
  t.effect = StringAt(item, "effect", path, p);
  const std::string op = StringAt(item, "operator", path, p);
  if (op == "Exists") {
    t.op = op;
  } else if (!op.empty() && op != "Equal") {
    // Lt / Gt need the alpha gate TaintTolerationComparisonOperators (off by default in 1.37).
    p.Add(path + ".operator", "must be Equal or Exists (got \"" + op + "\")");
  }
  return t;
}

std::vector<Toleration> ReadTolerations(const Json& spec, Problems& p) {
  std::vector<Toleration> out;
  if (const Json* list = ArrayAt(spec, "tolerations", "spec", p)) {
    for (size_t i = 0; i < list->size(); ++i) {
      out.push_back(ReadToleration((*list)[i], Indexed("spec.tolerations", i), p));
    }
  }
  return out;
}

NodeSelectorRequirement ReadRequirement(const Json& item, const std::string& path, bool on_fields,
                                        Problems& p) {
  NodeSelectorRequirement r;
  if (!item.is_object()) {
    p.Add(path, "must be an object");
    return r;
  }
  r.key = StringAt(item, "key", path, p);
  r.op = StringAt(item, "operator", path, p);
  static const std::vector<std::string> kLabelOps = {"In",           "NotIn", "Exists",
                                                     "DoesNotExist", "Gt",    "Lt"};
  static const std::vector<std::string> kFieldOps = {"In", "NotIn"};
  if (!Contains(on_fields ? kFieldOps : kLabelOps, r.op)) {
    p.Add(path + ".operator", std::string(on_fields ? "must be In or NotIn" : "unknown operator") +
                                  " (got \"" + r.op + "\")");
  }
  if (const Json* values = ArrayAt(item, "values", path, p)) {
    for (size_t i = 0; i < values->size(); ++i) {
      if ((*values)[i].is_string()) {
        r.values.push_back((*values)[i].get<std::string>());
      } else {
        p.Add(Indexed(path + ".values", i), "must be a string");
      }
    }
  }
  return r;
}

std::vector<NodeSelectorRequirement> ReadRequirements(const Json& term, const char* key,
                                                      const std::string& path, Problems& p) {
  std::vector<NodeSelectorRequirement> out;
  if (const Json* list = ArrayAt(term, key, path, p)) {
    const std::string list_path = path + "." + key;
    const bool on_fields = std::string_view(key) == "matchFields";
    for (size_t i = 0; i < list->size(); ++i) {
      out.push_back(ReadRequirement((*list)[i], Indexed(list_path, i), on_fields, p));
    }
  }
  return out;
}

std::vector<NodeSelectorTerm> ReadRequiredTerms(const Json& spec, Problems& p) {
  const Json* affinity = ObjectAt(spec, "affinity", "spec", p);
  const Json* node = affinity ? ObjectAt(*affinity, "nodeAffinity", "spec.affinity", p) : nullptr;
  const Json* required = node ? ObjectAt(*node, "requiredDuringSchedulingIgnoredDuringExecution",
                                         "spec.affinity.nodeAffinity", p)
                              : nullptr;
  if (required == nullptr) return {};
  const std::string path =
      "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
  std::vector<NodeSelectorTerm> terms;
  if (const Json* list = ArrayAt(*required, "nodeSelectorTerms", path, p)) {
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string term_path = Indexed(path + ".nodeSelectorTerms", i);
      if (!(*list)[i].is_object()) {
        p.Add(term_path, "must be an object");
        continue;
      }
      terms.push_back({ReadRequirements((*list)[i], "matchExpressions", term_path, p),
                       ReadRequirements((*list)[i], "matchFields", term_path, p)});
    }
  }
  // A required selector without terms matches no node in kube-scheduler (the API server refuses
  // it, a template is not checked): one empty term, which matches nothing, says the same.
  if (terms.empty()) terms.emplace_back();
  return terms;
}

std::vector<Taint> ReadTaints(const Json& spec, Problems& p) {
  std::vector<Taint> out;
  if (const Json* list = ArrayAt(spec, "taints", "spec", p)) {
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string path = Indexed("spec.taints", i);
      const Json& item = (*list)[i];
      if (!item.is_object()) continue;
      out.push_back({StringAt(item, "key", path, p), StringAt(item, "value", path, p),
                     StringAt(item, "effect", path, p)});
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// NodeResourcesFit.

// The resources NodeResourcesFit compares: cpu, memory, ephemeral-storage and the scalar ones
// (extended resources, hugepages-*, attachable-volumes-*, *kubernetes.io/*). It ignores the rest
// ("pods" in a request, "storage", other names without a domain).
bool CheckedByFit(std::string_view name) {
  if (name == "cpu" || name == "memory" || name == "ephemeral-storage") return true;
  if (IsHugePages(name) || name.starts_with("attachable-volumes-")) return true;
  if (name.find("kubernetes.io/") != std::string_view::npos) return true;
  if (name.find('/') == std::string_view::npos || name.starts_with("requests.")) return false;
  return IsQualifiedName("requests." + std::string(name));
}

// The unit kube-scheduler compares in: millicores for cpu, whole units (rounded away from zero,
// as Quantity.Value()) for the rest. Usage is a sum, so fractional amounts of pods already on the
// node are rounded once instead of pod by pod: only sub-unit memory like "100m" can tell.
int64_t KubeUnits(std::string_view name, int64_t milli) {
  if (name == "cpu") return milli;
  const int64_t rest = milli % 1000;
  return milli / 1000 + (rest > 0 ? 1 : rest < 0 ? -1 : 0);
}

// Units with up to three decimals: 8000 -> "8", 2250 -> "2.25".
std::string FormatUnits(int64_t milli) {
  const bool negative = milli < 0;
  const uint64_t magnitude =
      negative ? 0 - static_cast<uint64_t>(milli) : static_cast<uint64_t>(milli);
  std::string out = (negative ? "-" : "") + std::to_string(magnitude / 1000);
  if (const uint64_t fraction = magnitude % 1000; fraction != 0) {
    std::string digits = std::to_string(1000 + fraction).substr(1);
    digits.erase(digits.find_last_not_of('0') + 1);
    out += "." + digits;
  }
  return out;
}

// Cores for cpu, Gi / Mi for whole bytes when exact, plain units otherwise.
std::string FormatAmount(std::string_view name, int64_t milli) {
  const bool bytes = name == "memory" || name == "ephemeral-storage" || IsHugePages(name);
  if (bytes && milli != 0 && milli % 1000 == 0) {
    const int64_t n = milli / 1000;
    if (n % (int64_t{1} << 30) == 0) return std::to_string(n >> 30) + "Gi";
    if (n % (int64_t{1} << 20) == 0) return std::to_string(n >> 20) + "Mi";
  }
  return FormatUnits(milli);
}

// "cpu: requests 8, 2 of 16 free" when the request of `name` does not fit, else "".
std::string Shortfall(std::string_view name, int64_t request, const NodeFacts& node,
                      const NodeUsage& usage) {
  const int64_t allocatable = AmountOf(node.allocatable, name);
  const int64_t used = AmountOf(usage.requested, name);
  const int64_t want = KubeUnits(name, request);
  // A zero request is never checked, not even against a resource the node lacks.
  if (want <= 0 || want <= SaturatingSub(KubeUnits(name, allocatable), KubeUnits(name, used))) {
    return "";
  }
  return std::string(name) + ": requests " + FormatAmount(name, request) + ", " +
         FormatAmount(name, SaturatingSub(allocatable, used)) + " of " +
         FormatAmount(name, allocatable) + " free";
}

// Everything NodeResourcesFit finds missing, "; "-joined, in its order: pods, cpu, memory,
// ephemeral-storage, then the scalar resources (by name here; kube's map order is random).
// Whether every request fits, in numbers only (the common case: no text is built).
bool ResourcesFit(const PodConstraints& pod, const NodeFacts& node, const NodeUsage& usage) {
  if (int64_t{usage.pods} + 1 > KubeUnits("pods", AmountOf(node.allocatable, "pods"))) return false;
  for (const auto& [name, amount] : pod.requests) {
    const int64_t want = KubeUnits(name, amount);
    if (want <= 0 || !CheckedByFit(name)) continue;
    const int64_t allocatable = AmountOf(node.allocatable, name);
    const int64_t used = AmountOf(usage.requested, name);
    if (want > SaturatingSub(KubeUnits(name, allocatable), KubeUnits(name, used))) return false;
  }
  return true;
}

std::string ResourceShortfalls(const PodConstraints& pod, const NodeFacts& node,
                               const NodeUsage& usage) {
  if (ResourcesFit(pod, node, usage)) return "";
  std::vector<std::string> reasons;
  const int64_t allowed_pods = KubeUnits("pods", AmountOf(node.allocatable, "pods"));
  if (int64_t{usage.pods} + 1 > allowed_pods) {
    reasons.push_back("too many pods: " + std::to_string(usage.pods) + " of " +
                      std::to_string(allowed_pods));
  }
  static constexpr std::string_view kFirst[] = {"cpu", "memory", "ephemeral-storage"};
  for (std::string_view name : kFirst) {
    reasons.push_back(Shortfall(name, AmountOf(pod.requests, name), node, usage));
  }
  for (const auto& [name, amount] : pod.requests) {
    if (std::find(std::begin(kFirst), std::end(kFirst), name) != std::end(kFirst)) continue;
    if (CheckedByFit(name)) reasons.push_back(Shortfall(name, amount, node, usage));
  }
  std::string out;
  for (const auto& reason : reasons) {
    if (reason.empty()) continue;
    out += (out.empty() ? "" : "; ") + reason;
  }
  return out;
}

}  // namespace

bool ParseMilliQuantity(std::string_view text, int64_t* milli) {
  QuantityText q;
  SuffixScale scale;
  if (!SplitQuantity(text, &q) || !InterpretSuffix(q.suffix, &scale)) return false;
  std::string digits = q.digits.substr(std::min(q.digits.find_first_not_of('0'), q.digits.size()));
  if (digits.empty()) {
    *milli = 0;
    return true;
  }
  for (int e = scale.exp2; e > 0; e -= 10) MultiplyDecimal(digits, 1024);
  // Bounded so that the sum cannot overflow; beyond it the value is far out of range either way.
  // (apimachinery truncates the exponent to int32 instead, "1e4294967296" being 1 there.)
  constexpr int64_t kFar = int64_t{1} << 40;
  const int64_t exp10 = std::clamp(scale.exp10, -kFar, kFar) - q.fraction_digits + 3;
  uint64_t magnitude = 0;
  if (!CeilScaled(digits, exp10, &magnitude)) return false;
  *milli = q.negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

bool ParseMilliQuantity(const nlohmann::json& value, int64_t* milli) {
  // As Quantity.UnmarshalJSON: a string is trimmed; a number is read from its text.
  if (value.is_string()) {
    return ParseMilliQuantity(TrimAsciiSpace(value.get_ref<const std::string&>()), milli);
  }
  return value.is_number() && ParseMilliQuantity(value.dump(), milli);
}

int64_t AmountOf(const ResourceList& list, std::string_view name) {
  const size_t i = Position(list, name);
  return i < list.size() && list[i].first == name ? list[i].second : 0;
}

void AddResources(ResourceList& list, const ResourceList& other) {
  for (const auto& [name, amount] : other)
    Set(list, name, SaturatingAdd(AmountOf(list, name), amount));
}

void SubtractResources(ResourceList& list, const ResourceList& other) {
  for (const auto& [name, amount] : other)
    Set(list, name, SaturatingSub(AmountOf(list, name), amount));
}

std::string Taint::ToString() const {
  return key + (value.empty() ? "" : "=" + value) + ":" + effect;
}

bool Tolerates(const Toleration& toleration, const Taint& taint) {
  if (!toleration.effect.empty() && toleration.effect != taint.effect) return false;
  // An empty key matches every key whatever the operator (validation allows it only with Exists).
  if (!toleration.key.empty() && toleration.key != taint.key) return false;
  if (toleration.op.empty() || toleration.op == "Equal") return toleration.value == taint.value;
  // Lt / Gt tolerate nothing while their alpha gate is off, as it is by default.
  return toleration.op == "Exists";
}

ResourceList PodRequests(const nlohmann::json& pod_spec) {
  Problems ignored;
  return ReadPodRequests(pod_spec, ignored);
}

StatusOr<PodConstraints> PodConstraintsOf(const nlohmann::json& pod_spec,
                                          const std::vector<std::string>& skip_resources) {
  if (!pod_spec.is_object()) return InvalidArgumentError("spec: must be an object");
  Problems problems;
  PodConstraints out;
  out.node_selector = StringMapAt(pod_spec, "nodeSelector", "spec", problems);
  out.required_terms = ReadRequiredTerms(pod_spec, problems);
  out.tolerations = ReadTolerations(pod_spec, problems);
  out.requests = ReadPodRequests(pod_spec, problems);
  std::erase_if(out.requests, [&](const auto& r) { return Contains(skip_resources, r.first); });
  if (!problems.first().ok()) return problems.first();
  return out;
}

NodeFacts NodeFactsOf(const nlohmann::json& node) {
  Problems ignored;  // a node is what it is: read what can be read
  NodeFacts facts;
  static const Json kNull;
  const Json* metadata = Member(node, "metadata");
  const Json* spec = Member(node, "spec");
  const Json* status = Member(node, "status");
  facts.name = StringAt(metadata ? *metadata : kNull, "name", "metadata", ignored);
  facts.labels = StringMapAt(metadata ? *metadata : kNull, "labels", "metadata", ignored);
  facts.taints = ReadTaints(spec ? *spec : kNull, ignored);
  const Json* unschedulable = spec ? Member(*spec, "unschedulable") : nullptr;
  facts.unschedulable =
      unschedulable != nullptr && unschedulable->is_boolean() && unschedulable->get<bool>();
  facts.allocatable = ResourceListAt(status ? *status : kNull, "allocatable", "status", ignored);
  return facts;
}

std::string_view MisfitName(Misfit misfit) {
  switch (misfit) {
    case Misfit::kNone:
      return "";
    case Misfit::kUnschedulable:
      return "NodeUnschedulable";
    case Misfit::kTaint:
      return "TaintToleration";
    case Misfit::kNodeSelector:
      return "NodeSelector";
    case Misfit::kNodeAffinity:
      return "NodeAffinity";
    case Misfit::kResources:
      return "NodeResourcesFit";
  }
  return "";
}

bool MatchesNodeSelector(const PodConstraints& pod, const NodeFacts& node) {
  return FirstUnmatchedSelector(pod, node) == nullptr;
}

bool MatchesRequiredAffinity(const PodConstraints& pod, const NodeFacts& node) {
  if (pod.required_terms.empty()) return true;
  return std::any_of(pod.required_terms.begin(), pod.required_terms.end(),
                     [&](const NodeSelectorTerm& term) { return TermMatches(term, node); });
}

const Taint* UntoleratedTaint(const PodConstraints& pod, const NodeFacts& node) {
  for (const Taint& taint : node.taints) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    if (!ToleratedByAny(pod.tolerations, taint)) return &taint;
  }
  return nullptr;
}

Fit CheckNode(const PodConstraints& pod, const NodeFacts& node, const NodeUsage& usage) {
  static const Taint kUnschedulableTaint{"node.kubernetes.io/unschedulable", "", "NoSchedule"};
  if (node.unschedulable && !ToleratedByAny(pod.tolerations, kUnschedulableTaint)) {
    return {Misfit::kUnschedulable, "spec.unschedulable"};
  }
  if (const Taint* taint = UntoleratedTaint(pod, node)) {
    return {Misfit::kTaint, "taint " + taint->ToString()};
  }
  if (const auto* pair = FirstUnmatchedSelector(pod, node)) {
    return {Misfit::kNodeSelector, "nodeSelector " + pair->first + "=" + pair->second};
  }
  if (!MatchesRequiredAffinity(pod, node)) {
    return {Misfit::kNodeAffinity, "no term of the required node affinity matches"};
  }
  if (std::string shortfalls = ResourceShortfalls(pod, node, usage); !shortfalls.empty()) {
    return {Misfit::kResources, std::move(shortfalls)};
  }
  return {};
}

}  // namespace nvl72::model
