// End-to-end: reach's Llama forward on tiny random models against the
// independent float64 NumPy reference (tools/reference_forward.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/sampler.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/data.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;

namespace {

float max_abs(const float* p, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(p[i]));
  return m;
}

// Row-wise comparison; tolerance is relative to the reference row's max |logit|.
void check_rows(const float* got, const float* want, size_t rows, size_t vocab, double rel_tol, const std::string& what) {
  for (size_t r = 0; r < rows; ++r) {
    const float scale = max_abs(want + r * vocab, vocab);
    double err = 0;
    for (size_t i = 0; i < vocab; ++i) err = std::max(err, double(std::fabs(got[r * vocab + i] - want[r * vocab + i])));
    INFO(what << ": row " << r << " of " << rows << ", max|err| " << err << ", tolerance " << rel_tol << " x max|logit| "
              << scale);
    REQUIRE(err <= rel_tol * scale);
  }
}

SessionOptions opts(uint32_t ctx, uint32_t chunk) {
  SessionOptions o;
  o.context = ctx;
  o.chunk = chunk;
  return o;
}

const char* kF32 = "--dtype f32 --hidden 64 --intermediate 160 --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 1";

}  // namespace

TEST_CASE("model f32: prefill logits match the reference for 1, 7, 64 and 300 tokens") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  for (size_t n : {1u, 7u, 64u, 300u}) {
    CAPTURE(n);
    auto ids = random_ids(n, 300, uint32_t(n));
    auto ref = reference_forward(dir, ids);
    Session s(*model, opts(512, 128));
    std::vector<float> logits;
    s.prefill(ids, &logits);
    REQUIRE(logits.size() == ref.logits.size());
    check_rows(logits.data(), ref.logits.data(), n, 300, 1e-3, "f32 prefill");
  }
}

TEST_CASE("model f32: decode steps after a prompt match the reference") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  auto ids = random_ids(40, 300, 99);
  auto ref = reference_forward(dir, ids);
  Session s(*model, opts(64, 16));
  s.prefill(std::span<const int32_t>(ids.data(), 33));
  check_rows(s.logits().data(), &ref.logits[32 * 300], 1, 300, 1e-3, "prefill last row");
  for (size_t i = 33; i < ids.size(); ++i) {
    s.decode(ids[i]);
    check_rows(s.logits().data(), &ref.logits[i * 300], 1, 300, 1e-3, "decode step " + std::to_string(i));
  }
}

TEST_CASE("model: a decode step equals the last row of the full prefill, chunked equals one-shot") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  auto ids = random_ids(77, 300, 5);
  std::vector<float> one_shot, chunked;
  {
    Session s(*model, opts(128, 128));
    s.prefill(ids, &one_shot);
  }
  {
    Session s(*model, opts(128, 10));   // unaligned chunks 10,10,...,7
    s.prefill(ids, &chunked);
  }
  check_rows(chunked.data(), one_shot.data(), 77, 300, 1e-5, "chunked vs one-shot");
  Session s(*model, opts(128, 32));
  s.prefill(std::span<const int32_t>(ids.data(), 76));
  s.decode(ids[76]);
  check_rows(s.logits().data(), &one_shot[76 * 300], 1, 300, 1e-5, "decode vs prefill last row");
}

TEST_CASE("model f16 / bf16 weights match the reference (which reads the same rounded weights)") {
  for (const char* dt : {"f16", "bf16"}) {
    CAPTURE(dt);
    auto dir = tiny_model(std::string("--dtype ") + dt + " --hidden 64 --intermediate 160 --layers 2 --heads 4 "
                          "--kv-heads 2 --vocab 300 --seed 2");
    auto model = load_model(dir);
    auto ids = random_ids(64, 300, 7);
    auto ref = reference_forward(dir, ids);
    Session s(*model, opts(128, 64));
    std::vector<float> logits;
    s.prefill(ids, &logits);
    check_rows(logits.data(), ref.logits.data(), 64, 300, 2e-2, dt);
  }
}

TEST_CASE("model with q/k/v biases (Qwen2 style) and tied embeddings") {
  auto dir = tiny_model("--dtype f32 --hidden 64 --intermediate 128 --layers 2 --heads 4 --kv-heads 1 --vocab 300 "
                        "--bias --tie --seed 3");
  auto model = load_model(dir);
  auto ids = random_ids(20, 300, 8);
  auto ref = reference_forward(dir, ids);
  Session s(*model, opts(32, 8));
  std::vector<float> logits;
  s.prefill(ids, &logits);
  check_rows(logits.data(), ref.logits.data(), 20, 300, 1e-3, "bias+tie");
}

TEST_CASE("model: greedy 32-token generation follows the reference's argmax chain") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  const std::vector<int32_t> prompt{298, 104, 101, 108, 108, 111};
  auto ref = reference_forward(dir, prompt, 32);
  REQUIRE(ref.generated.size() == 32);
  Session s(*model, opts(64, 64));
  s.prefill(prompt);
  std::vector<int32_t> got;
  for (int i = 0; i < 32; ++i) {
    got.push_back(argmax(s.logits()));
    if (got.back() != ref.generated[size_t(i)]) {
      // Only a near tie in the reference may differ (f32 vs f64 rounding).
      INFO("step " << i << ": reach " << got.back() << ", reference " << ref.generated[size_t(i)] << ", margin "
                   << ref.margins[size_t(i)]);
      REQUIRE(ref.margins[size_t(i)] < 1e-3 * 12);
      break;
    }
    if (i + 1 < 32) s.decode(got.back());
  }
}

TEST_CASE("session: context overflow, empty prompt and bad ids are clear errors") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  Session s(*model, opts(16, 8));
  auto ids = random_ids(17, 300, 1);
  try {
    s.prefill(ids);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::context_overflow);
    CHECK(std::string(e.what()).find("raise the context") != std::string::npos);
  }
  CHECK(s.position() == 0);
  CHECK_THROWS_AS(s.prefill(std::span<const int32_t>()), Error);
  const std::vector<int32_t> bad{5, 300};
  CHECK_THROWS_AS(s.prefill(bad), Error);
  s.prefill(std::span<const int32_t>(ids.data(), 16));
  try {
    s.decode(1);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::context_overflow);
  }
}

namespace {

// Runs f, which must throw invalid_argument naming the way out (poll / wait first).
template <class F>
void check_busy(F&& f, const char* what) {
  CAPTURE(what);
  try {
    f();
    FAIL("no error while a decode_async step is in flight");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("poll_decode") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("session: decode_async gives decode()'s logits; the session is busy until polled") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  auto ids = random_ids(24, 300, 31);
  Session sync(*model, opts(64, 16)), async(*model, opts(64, 16));
  sync.prefill(std::span<const int32_t>(ids.data(), 16));
  async.prefill(std::span<const int32_t>(ids.data(), 16));
  CHECK(!async.decode_pending());
  CHECK(async.decode_fence() == VK_NULL_HANDLE);   // before the first decode_async
  CHECK(async.poll_decode());                      // nothing in flight: done
  CHECK(async.wait_decode(0));
  VkFence fence = VK_NULL_HANDLE;
  for (size_t i = 16; i < ids.size(); ++i) {
    CAPTURE(i);
    sync.decode(ids[i]);
    const std::vector<float> before(async.logits().begin(), async.logits().end());
    async.decode_async(ids[i]);
    REQUIRE(async.decode_pending());
    if (i == 16) fence = async.decode_fence();
    CHECK(fence != VK_NULL_HANDLE);
    CHECK(async.decode_fence() == fence);   // one fence, resubmitted
    // Until the step is completed nothing moves and every buffer-touching call is refused.
    CHECK(async.position() == i);
    CHECK(std::equal(before.begin(), before.end(), async.logits().begin()));
    if (i == 16) {
      check_busy([&] { async.decode_async(ids[i]); }, "decode_async");
      check_busy([&] { async.decode(ids[i]); }, "decode");
      check_busy([&] { async.prefill(std::span<const int32_t>(ids.data(), 1)); }, "prefill");
      check_busy([&] { async.rewind(0); }, "rewind");
      check_busy([&] { async.begin_decode_step(ids[i]); }, "begin_decode_step");
      check_busy([&] { async.finish_decode_step(); }, "finish_decode_step");
      CHECK(async.decode_pending());   // the refused calls changed nothing
      CHECK(async.position() == i);
    }
    if (i % 2 == 0) {
      // A frame loop: poll (never blocks) until done.
      bool done = false;
      for (int frame = 0; frame < 10000000 && !done; ++frame) done = async.poll_decode();
      if (!done) done = async.wait_decode(UINT64_MAX);
      CHECK(done);
    } else {
      // The host waits on the fence itself, then completes the step with wait_decode(0).
      REQUIRE(model->device().vk().vkWaitForFences(model->device().handle(), 1, &fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS);
      CHECK(async.decode_pending());
      CHECK(async.wait_decode(0));
    }
    CHECK(!async.decode_pending());
    CHECK(async.poll_decode());   // completed once, not again
    CHECK(async.position() == i + 1);
    // The same recorded program on the same inputs: the same bits.
    REQUIRE(async.logits().size() == sync.logits().size());
    CHECK(std::equal(sync.logits().begin(), sync.logits().end(), async.logits().begin()));
  }
  // Bad tokens and a full context are refused before anything is submitted.
  CHECK_THROWS_AS(async.decode_async(300), Error);
  CHECK(!async.decode_pending());
  Session full(*model, opts(16, 16));
  full.prefill(std::span<const int32_t>(ids.data(), 16));
  try {
    full.decode_async(ids[16]);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::context_overflow);
  }
  CHECK(!full.decode_pending());
  // The session still decodes synchronously afterwards, and dies safely with a step in flight.
  async.decode(ids[0]);
  CHECK(async.position() == ids.size() + 1);
  async.decode_async(ids[1]);
  CHECK(async.decode_pending());
}

// run -v's "matrices read per token": for the OLMoE fixture (f16, untied), what the config's own count of the
// active matrix elements says, less the embedding table (one row is read, not the table) at 2 bytes each.
TEST_CASE("bytes read per decoded token follow the active parameters of a mixture of experts") {
  reach::test::Gpu& g = reach::test::gpu();
  reach::LoadOptions lo;
  lo.require_tokenizer = false;
  auto model = reach::Model::load(*g.device, *g.allocator,
                                  reach::test::source_root() / "tests/data/families/olmoe/hf", lo);
  const reach::ModelConfig& c = model->config();
  REQUIRE(c.is_moe());
  REQUIRE(!c.tie_word_embeddings);
  const uint64_t VH = uint64_t(c.vocab_size) * uint64_t(c.hidden_size);
  CHECK(model->bytes_per_token() == 2 * (c.matrix_params(true) - VH + uint64_t(c.hidden_size)));
  CHECK(model->bytes_per_token() < 2 * (c.matrix_params(false) - VH));   // not every expert
}
