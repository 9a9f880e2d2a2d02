#include "runtime/config/flag_values.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "base/error.hpp"

namespace reach {

std::optional<int64_t> to_integer(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE) return std::nullopt;
  return int64_t(x);
}

std::optional<double> to_number(const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end) return std::nullopt;
  return x;
}

void bad_flag_value(const std::string& flag, const std::string& value, const std::string& expected) {
  throw Error(ErrorCode::invalid_argument, "option " + flag + " expects " + expected + ", got '" + value + "'");
}

void missing_flag_value(const std::string& flag) {
  throw Error(ErrorCode::invalid_argument, "option " + flag + " needs a value");
}

int64_t flag_integer(const std::string& flag, const std::string& value, int64_t lo, int64_t hi,
                     const std::string& expected) {
  const std::optional<int64_t> x = to_integer(value);
  if (!x || *x < lo || *x > hi) {
    const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    bad_flag_value(flag, value, expected.empty() ? range : expected);
  }
  return *x;
}

double flag_number(const std::string& flag, const std::string& value, const std::string& expected) {
  const std::optional<double> x = to_number(value);
  if (!x || !std::isfinite(*x)) bad_flag_value(flag, value, expected);
  return *x;
}

double flag_number_in(const std::string& flag, const std::string& value, double lo, double hi,
                      const std::string& expected) {
  const std::optional<double> x = to_number(value);
  if (!x || !std::isfinite(*x) || *x < lo || *x > hi) bad_flag_value(flag, value, expected);
  return *x;
}

double flag_positive_number(const std::string& flag, const std::string& value, const std::string& expected) {
  const std::optional<double> x = to_number(value);
  if (!x || !std::isfinite(*x) || !(*x > 0)) bad_flag_value(flag, value, expected);
  return *x;
}

}  // namespace reach
