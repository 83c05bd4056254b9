#include "kube/mini_yaml.h"

#include <cctype>
#include <vector>

namespace nvl72::kube {
namespace {

using nlohmann::json;

struct Line {
  int number;  // 1-based, for messages
  int indent;
  std::string text;  // without indentation, comment and trailing space
};

Status Error(int line, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "yaml line " + std::to_string(line) + ": " + what);
}

// Removes a comment ('#' at line start or after whitespace, outside quotes).
std::string StripComment(const std::string& s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) {
        if (quote == '\'' && i + 1 < s.size() && s[i + 1] == '\'') {
          ++i;
          continue;
        }
        quote = 0;
      } else if (quote == '"' && c == '\\') {
        ++i;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      if (i == 0 || std::isspace(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == ':' ||
          s[i - 1] == '-' || s[i - 1] == '[' || s[i - 1] == ',') {
        quote = c;
      }
    } else if (c == '#' && (i == 0 || std::isspace(static_cast<unsigned char>(s[i - 1])))) {
      return s.substr(0, i);
    }
  }
  return s;
}

std::string TrimRight(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return TrimRight(s.substr(b));
}

// Finds the ':' separating key and value (outside quotes, followed by space or end of line).
size_t FindKeyColon(const std::string& s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if ((c == '"' || c == '\'') && i == 0) {
      quote = c;
      continue;
    }
    if (c == ':' && (i + 1 == s.size() || s[i + 1] == ' ' || s[i + 1] == '\t')) return i;
  }
  return std::string::npos;
}

StatusOr<json> ParseScalar(const std::string& raw, int line);

StatusOr<json> ParseSingleQuoted(const std::string& s, int line) {
  if (s.size() < 2 || s.back() != '\'') return Error(line, "unterminated single-quoted string");
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] == '\'' && i + 2 < s.size() && s[i + 1] == '\'') ++i;
    out += s[i];
  }
  return json(out);
}

StatusOr<json> ParseFlowSequence(const std::string& s, int line) {
  if (s.back() != ']') return Error(line, "unterminated flow sequence");
  json arr = json::array();
  std::string inner = s.substr(1, s.size() - 2);
  size_t start = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    if (i == inner.size() || inner[i] == ',') {
      auto item = ParseScalar(inner.substr(start, i - start), line);
      if (!item.ok()) return item.status();
      arr.push_back(*item);
      start = i + 1;
    }
  }
  return arr;
}

// Flat flow mapping of scalars: {a: b, c: 'd'} (no nesting).
StatusOr<json> ParseFlowMapping(const std::string& s, int line) {
  if (s.back() != '}') return Error(line, "unterminated flow mapping");
  std::string inner = s.substr(1, s.size() - 2);
  if (inner.find_first_of("{[") != std::string::npos) {
    return Error(line, "nested flow collections are not supported");
  }
  json obj = json::object();
  size_t start = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    if (i == inner.size() || inner[i] == ',') {
      std::string item = Trim(inner.substr(start, i - start));
      start = i + 1;
      if (item.empty()) continue;
      size_t colon = FindKeyColon(item);
      if (colon == std::string::npos) return Error(line, "expected \"key: value\" in flow mapping");
      auto key = ParseScalar(item.substr(0, colon), line);
      auto value = ParseScalar(item.substr(colon + 1), line);
      if (!key.ok()) return key;
      if (!value.ok()) return value;
      obj[key->is_string() ? key->get<std::string>() : key->dump()] = *value;
    }
  }
  return obj;
}

// An unquoted scalar that is not a flow collection: a boolean, null or a string.
StatusOr<json> ParsePlainScalar(const std::string& s, int line) {
  if (s[0] == '&' || s[0] == '*' || s[0] == '!')
    return Error(line, "anchors, aliases and tags are not supported");
  if (s == "|" || s == ">" || s[0] == '|' || s[0] == '>')
    return Error(line, "block scalars are not supported");
  if (s == "true" || s == "True" || s == "TRUE") return json(true);
  if (s == "false" || s == "False" || s == "FALSE") return json(false);
  if (s == "null" || s == "~" || s == "Null" || s == "NULL") return json(nullptr);
  return json(s);
}

StatusOr<json> ParseScalar(const std::string& raw, int line) {
  std::string s = Trim(raw);
  if (s.empty()) return json(nullptr);
  if (s[0] == '"') {
    // Double-quoted: JSON string escapes are a subset of YAML's; parse as JSON.
    json v = json::parse(s, nullptr, false);
    if (v.is_discarded() || !v.is_string()) return Error(line, "malformed double-quoted string");
    return v;
  }
  if (s[0] == '\'') return ParseSingleQuoted(s, line);
  if (s == "{}") return json::object();
  if (s == "[]") return json::array();
  if (s[0] == '[') return ParseFlowSequence(s, line);
  if (s[0] == '{') return ParseFlowMapping(s, line);
  return ParsePlainScalar(s, line);
}

class Parser {
 public:
  explicit Parser(std::vector<Line> lines) : lines_(std::move(lines)) {}

  StatusOr<json> ParseDocument() {
    if (lines_.empty()) return json::object();
    auto v = ParseNode(lines_[0].indent);
    if (!v.ok()) return v;
    if (pos_ < lines_.size()) return Error(lines_[pos_].number, "unexpected indentation");
    return v;
  }

 private:
  bool IsSeqItem(const Line& l) const { return l.text == "-" || l.text.rfind("- ", 0) == 0; }

  StatusOr<json> ParseNode(int indent) {
    const Line& l = lines_[pos_];
    if (IsSeqItem(l)) return ParseSequence(indent);
    if (FindKeyColon(l.text) != std::string::npos) return ParseMapping(indent);
    ++pos_;
    return ParseScalar(l.text, l.number);
  }

  StatusOr<json> ParseSequence(int indent) {
    json arr = json::array();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent && IsSeqItem(lines_[pos_])) {
      Line& l = lines_[pos_];
      std::string rest = l.text.size() > 1 ? l.text.substr(2) : "";
      size_t lead = 0;
      while (lead < rest.size() && rest[lead] == ' ') ++lead;
      rest = rest.substr(lead);
      if (rest.empty()) {
        ++pos_;
        if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
          auto v = ParseNode(lines_[pos_].indent);
          if (!v.ok()) return v;
          arr.push_back(*v);
        } else {
          arr.push_back(nullptr);
        }
        continue;
      }
      if (FindKeyColon(rest) != std::string::npos || (rest.rfind("- ", 0) == 0)) {
        // "- key: value": the item is a node whose first line starts after "- ".
        l.indent = indent + 2 + static_cast<int>(lead);
        l.text = rest;
        auto v = ParseNode(l.indent);
        if (!v.ok()) return v;
        arr.push_back(*v);
        continue;
      }
      ++pos_;
      auto v = ParseScalar(rest, l.number);
      if (!v.ok()) return v;
      arr.push_back(*v);
    }
    return arr;
  }

  StatusOr<json> ParseMapping(int indent) {
    json obj = json::object();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent && !IsSeqItem(lines_[pos_])) {
      const Line& l = lines_[pos_];
      size_t colon = FindKeyColon(l.text);
      if (colon == std::string::npos) return Error(l.number, "expected \"key: value\"");
      auto key = ParseScalar(l.text.substr(0, colon), l.number);
      if (!key.ok()) return key;
      std::string k = key->is_string() ? key->get<std::string>() : key->dump();
      std::string rest = Trim(l.text.substr(colon + 1));
      int number = l.number;
      ++pos_;
      if (!rest.empty()) {
        auto v = ParseScalar(rest, number);
        if (!v.ok()) return v;
        obj[k] = *v;
      } else if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
        auto v = ParseNode(lines_[pos_].indent);
        if (!v.ok()) return v;
        obj[k] = *v;
      } else if (pos_ < lines_.size() && lines_[pos_].indent == indent && IsSeqItem(lines_[pos_])) {
        auto v = ParseSequence(indent);
        if (!v.ok()) return v;
        obj[k] = *v;
      } else {
        obj[k] = nullptr;
      }
    }
    if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
      return Error(lines_[pos_].number, "unexpected indentation");
    }
    return obj;
  }

  std::vector<Line> lines_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<nlohmann::json> ParseMiniYaml(const std::string& text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    json v = json::parse(text, nullptr, false);
    if (v.is_discarded()) return Status(StatusCode::kInvalidArgument, "malformed JSON document");
    return v;
  }
  std::vector<Line> lines;
  size_t start = 0;
  int number = 0;
  bool seen_doc_start = false;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    if (raw.find('\t') != std::string::npos && raw.find_first_not_of('\t') == 0) {
      return Error(number, "tab used for indentation");
    }
    std::string content = TrimRight(StripComment(raw));
    size_t ind = content.find_first_not_of(' ');
    if (ind == std::string::npos) continue;
    if (content == "---") {
      if (seen_doc_start || !lines.empty())
        return Error(number, "multiple documents are not supported");
      seen_doc_start = true;
      continue;
    }
    lines.push_back(Line{number, static_cast<int>(ind), content.substr(ind)});
    if (end == text.size()) break;
  }
  return Parser(std::move(lines)).ParseDocument();
}

}  // namespace nvl72::kube
