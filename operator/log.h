// Minimal leveled logging to stderr: one line per message with time, level and text.
// Thread-safety: safe from any thread (one write per line).
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace nvl72::op {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
// "debug" | "info" | "warning" | "error"; anything else -> info.
LogLevel ParseLogLevel(std::string_view name);
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view text);

}  // namespace nvl72::op

// Usage: NVL72_LOG(kInfo) << "admitted " << key;
#define NVL72_LOG(level)                                                            \
  for (bool nvl72_log_once_ = ::nvl72::op::LogEnabled(::nvl72::op::LogLevel::level); \
       nvl72_log_once_; nvl72_log_once_ = false)                                    \
  ::nvl72::op::internal::LogMessage(::nvl72::op::LogLevel::level).stream()

namespace nvl72::op::internal {
class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { LogLine(level_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace nvl72::op::internal
