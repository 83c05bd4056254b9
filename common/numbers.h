// Conversions of JSON numbers read as double. Casting a double that is outside the range of the
// target integer type is undefined behaviour (fuzzing found `"replicas": 1.4e95` doing it), so
// every double -> integer conversion of input goes through here.
#pragma once

#include <cmath>
#include <cstdint>

namespace nvl72 {

// Whether `d` is a whole number that int64_t holds; stores it in *out. False for fractions, values
// outside [-2^63, 2^63), infinities and NaN.
inline bool WholeDoubleToInt64(double d, int64_t* out) {
  constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact in a double
  if (!(d >= -kTwo63 && d < kTwo63)) return false;  // also false for NaN
  if (d != std::trunc(d)) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

}  // namespace nvl72
