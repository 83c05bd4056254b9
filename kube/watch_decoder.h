// JsonStreamDecoder: splits a byte stream of concatenated JSON values (a watch response body) into
// values, however the bytes are chunked: a value may span many chunks, a chunk may hold many
// values, and any whitespace (including newlines) may separate them.
//
// Only objects and arrays are accepted at the top level (that is all a watch stream holds);
// anything else, or malformed JSON inside a value, is a kInternal error and the decoder stays
// failed.
//
// Thread-safety: not thread-safe; one decoder per stream.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"
#include "kube/client.h"

namespace nvl72::kube {

class JsonStreamDecoder {
 public:
  // A single value larger than this is an error (protects against an unterminated stream).
  explicit JsonStreamDecoder(size_t max_value_bytes = 256u << 20)
      : max_value_bytes_(max_value_bytes) {}

  // Appends `chunk` and calls `on_value` for each value completed by it, in order. Stops at and
  // returns the first error, either the decoder's or a non-OK Status from `on_value`.
  Status Feed(std::string_view chunk, const std::function<Status(nlohmann::json&&)>& on_value);

  // True if bytes of an incomplete value are buffered (call at end of stream to detect truncation).
  bool HasPartialValue() const;
  size_t BufferedBytes() const { return buffer_.size() - consumed_; }

 private:
  Status Fail(std::string message);
  // One byte between values (scan_pos_ points at `c`): skips whitespace or opens a value; false,
  // consuming nothing, on anything else.
  bool ScanBetweenValues(char c);
  // One byte inside a value: true when it closes the value.
  bool ScanInValue(char c);
  // Parses the value that ends at scan_pos_ and hands it to `on_value`.
  Status EmitValue(const std::function<Status(nlohmann::json&&)>& on_value);

  std::string buffer_;
  size_t consumed_ = 0;  // bytes of buffer_ already handed out as values
  size_t scan_pos_ = 0;  // next byte to scan
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  bool failed_ = false;
  Status failure_;
  size_t max_value_bytes_;
};

// Turns one decoded watch value {"type":..., "object":...} into a WatchEvent. For type ERROR
// returns the Status carried by the object (StatusFromApiStatus: 410 -> kGone). Unknown types or a
// missing object -> kInternal.
StatusOr<WatchEvent> ParseWatchEvent(nlohmann::json&& value);

}  // namespace nvl72::kube
