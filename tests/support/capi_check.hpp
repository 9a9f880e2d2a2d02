#pragma once
// What the C API suites' files share (tests/test_capi*.cpp): their devices read the suite's
// environment, validation errors are counted, and calls are checked with their status and message.
#include <doctest/doctest.h>
#include <reach.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/model_fixture.hpp"

namespace reach::test::capi {

inline std::atomic<int> g_vulkan_errors{0};

inline void on_log(void*, int level, const char* message) {
  if (level == REACH_LOG_ERROR && std::strncmp(message, "vulkan:", 7) == 0) {
    g_vulkan_errors++;
    MESSAGE("validation: " << message);
  }
}

// The suite's environment (REACH_VALIDATION=1, REACH_TUNING_FILE: tests/meson.build) applies to its devices:
// the C API reads it only when asked (use_environment).
inline const reach_device_params* env_params() {
  static const reach_device_params p = [] {
    reach_device_params d = reach_device_default_params();
    d.use_environment = 1;
    return d;
  }();
  return &p;
}

inline std::string tiny() { return reach::test::tiny_model("").string(); }

}  // namespace reach::test::capi

#define REQUIRE_OK(call)                                                                      \
  do {                                                                                        \
    reach_status st_ = (call);                                                                \
    INFO(#call << " -> " << reach_status_name(st_) << ": " << reach_last_error());           \
    REQUIRE(st_ == REACH_OK);                                                                 \
  } while (0)

// A failing call: the expected code and a message that is not empty.
#define CHECK_FAILS(call, want)                                                               \
  do {                                                                                        \
    reach_status st_ = (call);                                                                \
    INFO(#call << " -> " << reach_status_name(st_) << ": " << reach_last_error());           \
    CHECK(st_ == (want));                                                                     \
    CHECK(std::strlen(reach_last_error()) > 0);                                               \
  } while (0)

namespace reach::test::capi {

// Greedy tokens (the session's sampler, temperature 0) from where the session stands: a sample of its
// logits, then reach_session_step until n are sampled.
inline std::vector<int32_t> continue_greedy(reach_session* s, int n) {
  std::vector<int32_t> out(1);
  REQUIRE_OK(reach_session_sample(s, &out[0], nullptr));
  while (int(out.size()) < n) {
    int32_t next = 0;
    REQUIRE_OK(reach_session_step(s, out.back(), &next, nullptr));
    out.push_back(next);
  }
  return out;
}

// Prefill, then continue_greedy until n are sampled.
inline std::vector<int32_t> generate_sync(reach_session* s, const std::vector<int32_t>& ids, int n) {
  REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
  return continue_greedy(s, n);
}

}  // namespace reach::test::capi
