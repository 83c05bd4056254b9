// ParseMiniYaml: the subset of YAML that kubeconfig files use, into JSON.
//
// Supported: block mappings and block sequences (including sequences at the same indentation as
// their parent key, as kubectl writes them), plain / 'single' / "double"-quoted scalars, comments,
// flow sequences and flat flow mappings of scalars ([a, b], {a: b}), "---" document start, and
// JSON documents (a JSON file is parsed as JSON). Scalars stay strings, except that
// true/false/null are typed. Not supported (error): anchors, tags, block scalars (| >), multi-docs,
// nested flow collections.
// Internal to kube/ (config.cc); not a general YAML parser.
// Thread-safety: pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace nvl72::kube {

StatusOr<nlohmann::json> ParseMiniYaml(const std::string& text);

}  // namespace nvl72::kube
