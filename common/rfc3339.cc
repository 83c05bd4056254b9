#include "common/rfc3339.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace nvl72 {

StatusOr<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s) {
  auto bad = [&] {
    return Status(StatusCode::kInvalidArgument,
                  "malformed RFC 3339 time \"" + std::string(s) + "\"");
  };
  int y, mo, d, h, mi, sec;
  int n = 0;
  std::string str(s);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
      n != 19) {
    return bad();
  }
  size_t pos = 19;
  int64_t micros = 0;
  if (pos < str.size() && str[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < str.size() && std::isdigit(static_cast<unsigned char>(str[pos]))) {
      if (digits < 6) micros = micros * 10 + (str[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (int i = digits; i < 6; ++i) micros *= 10;
  }
  int64_t offset_secs = 0;
  if (pos < str.size() && (str[pos] == 'Z' || str[pos] == 'z')) {
    ++pos;
  } else if (pos + 6 == str.size() && (str[pos] == '+' || str[pos] == '-') && str[pos + 3] == ':') {
    const int64_t oh = std::atoi(str.substr(pos + 1, 2).c_str());
    const int64_t om = std::atoi(str.substr(pos + 4, 2).c_str());
    offset_secs = (oh * 3600 + om * 60) * (str[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != str.size()) return bad();
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  std::time_t tt = timegm(&tm);
  return std::chrono::system_clock::time_point(std::chrono::seconds(tt - offset_secs)) +
         std::chrono::microseconds(micros);
}

}  // namespace nvl72
