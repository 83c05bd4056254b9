// Fuzz target: kubeconfig parsing (YAML or JSON) from arbitrary text. File references resolve
// against a directory that does not exist, so nothing outside the input is read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = nvl72::kube::ParseKubeconfig(text, "/nonexistent-nvl72-fuzz", "", "fuzz");
  if (config.ok()) (void)config->DebugString();
  return 0;
}
