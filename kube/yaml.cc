#include "kube/yaml.h"

#include <yaml-cpp/yaml.h>

namespace nvl72::kube {
namespace {

using nlohmann::json;

// Converts yaml-cpp nodes, counting them against kMaxYamlNodes (aliases are counted each time they
// are expanded).
class Converter {
 public:
  StatusOr<json> Convert(const YAML::Node& node, int depth) {
    if (++nodes_ > kMaxYamlNodes) {
      return InvalidArgumentError("YAML document expands past " + std::to_string(kMaxYamlNodes) +
                                  " nodes (aliases?)");
    }
    if (depth > kMaxYamlDepth) {
      return InvalidArgumentError("YAML nests deeper than " + std::to_string(kMaxYamlDepth) +
                                  " levels" + At(node));
    }
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return Scalar(node);
      case YAML::NodeType::Sequence:
        return Sequence(node, depth);
      case YAML::NodeType::Map:
        return Mapping(node, depth);
      default:  // Null and Undefined
        return json(nullptr);
    }
  }

 private:
  static std::string At(const YAML::Node& node) {
    const YAML::Mark m = node.Mark();
    if (m.is_null()) return "";
    return " at line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1);
  }

  // Plain scalars of YAML 1.2's core schema that are not strings; numbers stay strings.
  static json Scalar(const YAML::Node& node) {
    const std::string& s = node.Scalar();
    if (node.Tag() != "?") return s;  // quoted ("!") or explicitly tagged
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    return s;
  }

  StatusOr<json> Sequence(const YAML::Node& node, int depth) {
    json out = json::array();
    for (const YAML::Node& item : node) {
      auto v = Convert(item, depth + 1);
      if (!v.ok()) return v.status();
      out.push_back(std::move(v).value());
    }
    return out;
  }

  StatusOr<json> Mapping(const YAML::Node& node, int depth) {
    json out = json::object();
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        return InvalidArgumentError("a mapping key is not a scalar" + At(kv.first));
      }
      auto v = Convert(kv.second, depth + 1);
      if (!v.ok()) return v.status();
      out[kv.first.Scalar()] = std::move(v).value();
    }
    return out;
  }

  int nodes_ = 0;
};

}  // namespace

StatusOr<json> ParseYaml(const std::string& text) {
  try {
    YAML::Node root = YAML::Load(text);
    return Converter().Convert(root, 0);
  } catch (const YAML::Exception& e) {
    std::string where;
    if (!e.mark.is_null()) {
      where = " at line " + std::to_string(e.mark.line + 1) + ", column " +
              std::to_string(e.mark.column + 1);
    }
    return InvalidArgumentError("YAML" + where + ": " + e.msg);
  }
}

}  // namespace nvl72::kube
