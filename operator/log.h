// Leveled, structured logging to stderr: one line per message, written with one write.
//
// Two formats (SetLogFormat):
//   text  `I 13:07:33.123 admitted team/moe (16 ranks) in clique-1 job=team/moe`
//   json  `{"ts":"2026-12-02T13:07:33.123Z","level":"info","msg":"admitted ...","job":"team/moe"}`
// A message may carry keys: Job("<ns>/<name>") and Node("<node>") are the ones dashboards and log
// queries join on; Kv() adds any other. Keys with an empty value are left out.
//
// Usage: NVL72_LOG(kInfo).Job(key).Node(node) << "replaced rank " << r;
// Thread-safety: safe from any thread.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nvl72::op {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

void SetLogLevel(LogLevel level);
// "debug" | "info" | "warning" | "error"; anything else -> info.
LogLevel ParseLogLevel(std::string_view name);
bool LogEnabled(LogLevel level);
void SetLogFormat(LogFormat format);
// "text" | "json"; false for anything else.
bool ParseLogFormat(std::string_view name, LogFormat* format);

using LogKeys = std::vector<std::pair<std::string, std::string>>;
// Formats one line (with its trailing newline) at wall-clock time `unix_ms`. Exposed for tests.
std::string FormatLogLine(LogFormat format, LogLevel level, long long unix_ms,
                          std::string_view text, const LogKeys& keys);
void LogLine(LogLevel level, std::string_view text, const LogKeys& keys = {});

}  // namespace nvl72::op

#define NVL72_LOG(level)                                                             \
  for (bool nvl72_log_once_ = ::nvl72::op::LogEnabled(::nvl72::op::LogLevel::level); \
       nvl72_log_once_; nvl72_log_once_ = false)                                     \
  ::nvl72::op::internal::LogMessage(::nvl72::op::LogLevel::level)

namespace nvl72::op::internal {
class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() {
    try {
      LogLine(level_, stream_.str(), keys_);
    } catch (...) {
      // A lost log line is better than std::terminate from a throwing destructor.
    }
  }
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;

  LogMessage& Job(std::string_view key) { return Kv("job", key); }
  LogMessage& Node(std::string_view node) { return Kv("node", node); }
  LogMessage& Kv(std::string_view key, std::string_view value) {
    if (!value.empty()) keys_.emplace_back(std::string(key), std::string(value));
    return *this;
  }
  template <typename T>
  LogMessage& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream stream_;
  LogKeys keys_;
};
}  // namespace nvl72::op::internal
