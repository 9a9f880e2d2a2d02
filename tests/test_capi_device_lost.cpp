// The C API after a lost GPU (made on purpose with the engine's fault hook, engine/fault_injection.hpp):
// the call that meets it returns REACH_ERROR_DEVICE_LOST, every later call on the device's models and
// sessions returns it too with what to do, freeing everything works, and a new device loads the model
// again and generates what it generated before.  An allocation failing mid-load is a clear error that
// leaves nothing behind (the suite also runs under ASan/LSan).
#include <doctest/doctest.h>
#include <reach.h>

#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_internal.hpp"
#include "tests/support/capi_check.hpp"
#include "tests/support/model_fixture.hpp"

namespace {

// The call fails with `want` and a message containing `needle`.
#define CHECK_STATUS(call, want, needle)                                                      \
  do {                                                                                        \
    reach_status st_ = (call);                                                                \
    const std::string msg_ = reach_last_error();                                              \
    INFO(#call << " -> " << reach_status_name(st_) << ": " << msg_);                          \
    CHECK(st_ == (want));                                                                     \
    CHECK(msg_.find(needle) != std::string::npos);                                            \
  } while (0)

reach_device* make_device() {
  reach_device_params p = reach_device_default_params();
  p.use_environment = 1;   // the suite's REACH_VALIDATION
  reach_device* d = nullptr;
  REQUIRE_OK(reach_device_create(&p, &d));
  return d;
}

reach::FaultInjector& faults(reach_device* d) { return d->dev->faults(); }

reach_model* load(reach_device* d) {
  reach_model* m = nullptr;
  REQUIRE_OK(reach_model_load(d, reach::test::tiny_model("").string().c_str(), nullptr, &m));
  return m;
}

reach_session* greedy_session(reach_model* m) {
  reach_session_params sp = reach_session_default_params();
  sp.context = 64;
  sp.sampling.temperature = 0;
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create(m, &sp, &s));
  return s;
}

const std::vector<int32_t> kPrompt = {1, 7, 3, 12, 5, 9};

// Prefill, then greedy tokens until n or the first failure; the status of the failing call, else REACH_OK.
reach_status generate(reach_session* s, int n, std::vector<int32_t>& out) {
  out.clear();
  if (reach_status st = reach_session_prefill(s, kPrompt.data(), kPrompt.size())) return st;
  int32_t tok = 0;
  if (reach_status st = reach_session_sample(s, &tok, nullptr)) return st;
  out.push_back(tok);
  while (int(out.size()) < n) {
    if (reach_status st = reach_session_step(s, out.back(), &tok, nullptr)) return st;
    out.push_back(tok);
  }
  return REACH_OK;
}

}  // namespace

TEST_CASE("capi: a lost device makes its model and sessions unusable; a new device generates the same text") {
  std::vector<int32_t> before;
  reach_device* d = make_device();
  reach_model* m = load(d);
  reach_session* s = greedy_session(m);
  REQUIRE(generate(s, 8, before) == REACH_OK);
  REQUIRE_OK(reach_session_reset(s));

  // Lost in the middle of the decode steps: the step that meets it returns REACH_ERROR_DEVICE_LOST.
  faults(d).arm(reach::FaultPoint::submit, 4, VK_ERROR_DEVICE_LOST);
  std::vector<int32_t> partial;
  CHECK_STATUS(generate(s, 8, partial), REACH_ERROR_DEVICE_LOST, "GPU was lost");
  CHECK(partial.size() < 8);
  CHECK(std::string(reach_status_name(REACH_ERROR_DEVICE_LOST)) == "REACH_ERROR_DEVICE_LOST");

  // Every later call on the model and its sessions says so, and what to do.
  int32_t tok = 0;
  uint32_t pos = 0, cap = 0;
  size_t n = 0;
  CHECK_STATUS(reach_session_step(s, 1, &tok, nullptr), REACH_ERROR_DEVICE_LOST, "reach_device_free");
  CHECK_STATUS(reach_session_sample(s, &tok, nullptr), REACH_ERROR_DEVICE_LOST, "load the model again");
  CHECK_STATUS(reach_session_prefill(s, kPrompt.data(), kPrompt.size()), REACH_ERROR_DEVICE_LOST, "lost");
  CHECK_STATUS(reach_session_position(s, &pos, &cap), REACH_ERROR_DEVICE_LOST, "lost");
  CHECK_STATUS(reach_session_reset(s), REACH_ERROR_DEVICE_LOST, "lost");
  reach_session* s2 = nullptr;
  CHECK_STATUS(reach_session_create(m, nullptr, &s2), REACH_ERROR_DEVICE_LOST, "lost");
  CHECK(s2 == nullptr);
  CHECK_STATUS(reach_tokenize(m, "hello", 5, 1, nullptr, 0, &n), REACH_ERROR_DEVICE_LOST, "lost");
  reach_model_info info{};
  info.size = sizeof info;
  CHECK_STATUS(reach_model_get_info(m, &info), REACH_ERROR_DEVICE_LOST, "lost");

  // Freeing works, children first as always.
  REQUIRE_OK(reach_session_free(s));
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(d));

  d = make_device();
  m = load(d);
  s = greedy_session(m);
  std::vector<int32_t> after;
  REQUIRE(generate(s, 8, after) == REACH_OK);
  CHECK(after == before);
  REQUIRE_OK(reach_session_free(s));
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(d));
}

TEST_CASE("capi: a device lost while a model loads, and an allocation failing mid-load, are clear errors") {
  reach_device* d = make_device();
  // A clean load first, counting its allocations and submissions to fail one in the middle below.
  const uint64_t allocs0 = faults(d).calls(reach::FaultPoint::alloc);
  const uint64_t submits0 = faults(d).calls(reach::FaultPoint::submit);
  reach_model* m = load(d);
  const uint64_t allocs = faults(d).calls(reach::FaultPoint::alloc) - allocs0;
  const uint64_t submits = faults(d).calls(reach::FaultPoint::submit) - submits0;
  REQUIRE_OK(reach_model_free(m));
  m = nullptr;
  // On unified memory (lavapipe) the weights are copied through the mapping: no submission at all.
  MESSAGE("a load makes " << allocs << " device-memory blocks and " << submits << " submissions");
  REQUIRE(allocs >= 1);

  // The load's last block (on lavapipe its only one, after the files are read and checked).
  faults(d).arm(reach::FaultPoint::alloc, allocs, VK_ERROR_OUT_OF_DEVICE_MEMORY);
  CHECK_STATUS(reach_model_load(d, reach::test::tiny_model("").string().c_str(), nullptr, &m),
               REACH_ERROR_OUT_OF_MEMORY, "out of device memory");
  CHECK(m == nullptr);
  // Out of memory does not lose the device: the same device loads the model.
  m = load(d);
  REQUIRE_OK(reach_model_free(m));
  m = nullptr;

  // Lost in the middle of the load (a submission of the upload where it makes any, else the allocation):
  // the load returns it, and the device stays lost.
  if (submits > 0) faults(d).arm(reach::FaultPoint::submit, (submits + 1) / 2, VK_ERROR_DEVICE_LOST);
  else faults(d).arm(reach::FaultPoint::alloc, allocs, VK_ERROR_DEVICE_LOST);
  CHECK_STATUS(reach_model_load(d, reach::test::tiny_model("").string().c_str(), nullptr, &m),
               REACH_ERROR_DEVICE_LOST, "GPU was lost");
  CHECK(m == nullptr);
  CHECK_STATUS(reach_model_load(d, reach::test::tiny_model("").string().c_str(), nullptr, &m),
               REACH_ERROR_DEVICE_LOST, "GPU was lost");
  REQUIRE_OK(reach_device_free(d));
}
