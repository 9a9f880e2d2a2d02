#pragma once
// Runs a piece of test code in a child process with a wall-clock limit and an
// address-space ceiling, so that a hang, a runaway allocation or a stack
// overflow on hostile input becomes a prompt test failure that says which.
#include <cstddef>
#include <functional>
#include <string>

#include "base/error.hpp"

namespace reach::test {

struct Outcome {
  enum Kind { returned, error, other_exception, signaled, timed_out } kind = returned;
  ErrorCode code = ErrorCode::internal;  // kind == error
  std::string message;                   // error / other_exception: what(); returned: what f returned
  int signal = 0;                        // kind == signaled
  double seconds = 0;
  std::string describe() const;          // one line for failure messages
};

// f's return value comes back in Outcome::message.  Under AddressSanitizer the
// memory ceiling is not set (its shadow memory needs terabytes of address space).
Outcome run_isolated(const std::function<std::string()>& f, double seconds = 20,
                     size_t max_address_space = size_t{3} << 30);

}  // namespace reach::test
