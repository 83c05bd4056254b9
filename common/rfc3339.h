// RFC 3339 times as the Kubernetes API writes them (metav1.Time "2026-12-07T18:00:00Z",
// metav1.MicroTime with a fraction, or an explicit offset): one parser for the kube client and the
// model, which must not depend on the client. Thread-safety: pure function.
#pragma once

#include <chrono>
#include <string_view>

#include "common/status.h"

namespace nvl72 {

// InvalidArgument naming the text when it is not "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)";
// a fraction keeps microseconds.
StatusOr<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s);

}  // namespace nvl72
