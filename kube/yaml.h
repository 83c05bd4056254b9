// ParseYaml: one YAML document (YAML 1.2, so JSON too) into JSON, with yaml-cpp.
//
// Scalars stay strings, except plain (unquoted) true/false and null/~/empty, which are typed as
// YAML 1.2's core schema types them: a kubeconfig's `insecure-skip-tls-verify: true` is a bool and
// its `name: "true"` a string. Anchors and aliases are expanded; a document that expands past
// kMaxYamlNodes nodes (an alias bomb) or nests deeper than kMaxYamlDepth is an error, as is a
// mapping key that is not a scalar. Only the first document of a stream is read. Errors name the
// line and column (1-based).
// Thread-safety: pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace nvl72::kube {

inline constexpr int kMaxYamlNodes = 100000;
inline constexpr int kMaxYamlDepth = 200;

StatusOr<nlohmann::json> ParseYaml(const std::string& text);

}  // namespace nvl72::kube
