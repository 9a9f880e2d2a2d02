#pragma once
// Values of command-line style options ("--flag VALUE"), parsed one way for
// the reach CLI and for the scheme flags the library reads itself (the C
// API's scheme_flags).  Errors are Error(invalid_argument) in one style:
//   option --flag expects EXPECTED, got 'VALUE'
#include <cstdint>
#include <optional>
#include <string>

namespace reach {

// The whole text as a base-10 integer (empty when it is not one, or is
// outside int64) or as a number in strtod syntax (empty when it is not one).
std::optional<int64_t> to_integer(const std::string& text);
std::optional<double> to_number(const std::string& text);

// "option FLAG expects EXPECTED, got 'VALUE'"
[[noreturn]] void bad_flag_value(const std::string& flag, const std::string& value, const std::string& expected);
// "option FLAG needs a value"
[[noreturn]] void missing_flag_value(const std::string& flag);

// An integer in [lo, hi]; `expected` words the error, by default
// "an integer in [lo, hi]".
int64_t flag_integer(const std::string& flag, const std::string& value, int64_t lo, int64_t hi,
                     const std::string& expected = "");
// Any finite number (strtod syntax; "nan" and "inf" are refused).
double flag_number(const std::string& flag, const std::string& value, const std::string& expected = "a number");
// A finite number in [lo, hi].
double flag_number_in(const std::string& flag, const std::string& value, double lo, double hi,
                      const std::string& expected);
// A finite number > 0.
double flag_positive_number(const std::string& flag, const std::string& value, const std::string& expected);

}  // namespace reach
