// Fuzz target: NVL72Job parsing. Arbitrary bytes that parse as JSON are fed to the spec parser and
// to the status.placement reader; every accepted spec must also give a well-formed gang request.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "model/job_spec.h"
#include "placement/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json doc =
      nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  auto spec =
      nvl72::model::ParseJobSpec(doc.is_object() && doc.contains("spec") ? doc["spec"] : doc);
  if (spec.ok()) {
    const auto request = nvl72::model::ToGangRequest(*spec, "fuzz/job");
    // An accepted spec must never yield a request the placement core calls invalid.
    if (!nvl72::placement::ValidateGangRequest(request).empty()) std::abort();
  }
  auto placement = nvl72::model::PlacementOf(doc);
  (void)placement.ok();
  return 0;
}
