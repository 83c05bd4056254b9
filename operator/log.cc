#include "operator/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace nvl72::op {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

// "13:07:33.123" (text) or "2026-12-02T13:07:33.123Z" (json) in UTC.
std::string Stamp(long long unix_ms, bool full) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  const int ms = static_cast<int>(unix_ms % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), full ? "%Y-%m-%dT%H:%M:%S" : "%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03d%s", buf, ms, full ? "Z" : "");
  return out;
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

LogLevel ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }

bool ParseLogFormat(std::string_view name, LogFormat* format) {
  if (name == "text") {
    *format = LogFormat::kText;
  } else if (name == "json") {
    *format = LogFormat::kJson;
  } else {
    return false;
  }
  return true;
}

std::string FormatLogLine(LogFormat format, LogLevel level, long long unix_ms,
                          std::string_view text, const LogKeys& keys) {
  static constexpr const char* kShort[] = {"D", "I", "W", "E"};
  static constexpr const char* kLong[] = {"debug", "info", "warning", "error"};
  const int l = static_cast<int>(level);
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["ts"] = Stamp(unix_ms, true);
    j["level"] = kLong[l];
    j["msg"] = std::string(text);
    for (const auto& [k, v] : keys) {
      if (k != "ts" && k != "level" && k != "msg") j[k] = v;
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  std::string line = std::string(kShort[l]) + " " + Stamp(unix_ms, false) + " ";
  line += text;
  for (const auto& [k, v] : keys) {
    line += " " + k + "=";
    const bool quote = v.find_first_of(" \"=") != std::string::npos;
    if (quote) line += '"';
    line += v;
    if (quote) line += '"';
  }
  return line + "\n";
}

void LogLine(LogLevel level, std::string_view text, const LogKeys& keys) {
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  std::string line = FormatLogLine(static_cast<LogFormat>(g_format.load()), level, ms, text, keys);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace nvl72::op
