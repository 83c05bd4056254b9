// Fuzz target: the watch-stream decoder fed arbitrary bytes in arbitrary chunks, and every value it
// completes parsed as a watch event. The first input byte picks the chunk size, so the fuzzer also
// explores splits of one value across chunks.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kube/watch_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  nvl72::kube::JsonStreamDecoder decoder(1 << 20);
  while (!rest.empty()) {
    const std::string_view piece = rest.substr(0, chunk);
    rest.remove_prefix(piece.size());
    nvl72::Status st = decoder.Feed(piece, [](nlohmann::json&& value) {
      auto event = nvl72::kube::ParseWatchEvent(std::move(value));
      return event.ok() ? nvl72::Status::Ok() : event.status();
    });
    if (!st.ok()) break;
  }
  (void)decoder.HasPartialValue();
  return 0;
}
