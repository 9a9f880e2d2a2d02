#pragma once
// Checks on reach::Error: the code a call throws and what its message names.
#include <doctest/doctest.h>

#include <exception>
#include <string>

#include "base/error.hpp"

namespace reach::test {

// Runs f, expects a reach::Error with `code`; returns its message ("" if none).
template <class F>
std::string error_of(F&& f, ErrorCode code) {
  try {
    f();
  } catch (const reach::Error& e) {
    CHECK_MESSAGE(e.code() == code, "got code " << reach::error_code_name(e.code()) << ": " << e.what());
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("unexpected exception type: " << e.what());
    return {};
  }
  FAIL_CHECK("no exception thrown");
  return {};
}

}  // namespace reach::test

// The message contains `needle`; on failure the whole message is printed.
// `msg` is evaluated once: an expression that runs checks of its own (such as
// error_of) must not run again while doctest prints the failure.
#define CHECK_HAS(msg, needle)                                                             \
  do {                                                                                     \
    const std::string reach_check_has_msg_ = (msg);                                        \
    CHECK_MESSAGE(reach_check_has_msg_.find(needle) != std::string::npos,                  \
                  "message: " << reach_check_has_msg_);                                    \
  } while (false)
