// Sessions over an f16 or quantized KV cache (SessionOptions::cache_type_k / _v): a tiny model's
// logits against the independent NumPy reference within each type's tolerance, batched decode
// and rewind exact over a rounded cache, and the error for a head_dim the block types cannot take.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "base/error.hpp"
#include "base/kv_type.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/decode_batch.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;

namespace {

// head_dim 64: two blocks of q8_0 / q4_0 per row, whose two f16 scales fill one word (an odd block count
// pads the row's last scale word: head_dim 32 stores 36 bytes per q8_0 row, 0.56x of f16).
const char* kModel = "--dtype f32 --hidden 128 --intermediate 192 --layers 2 --heads 2 --kv-heads 1 --vocab 300 --seed 3";
constexpr uint32_t kVocab = 300;

SessionOptions opts(KvType t) {
  SessionOptions o;
  o.context = 64;
  o.chunk = 16;
  o.cache_type_k = o.cache_type_v = t;
  return o;
}

}  // namespace

TEST_CASE("kv types: a tiny model's logits against the reference, within each type's tolerance") {
  // The f32 cache meets the reference at the suites' 1e-3 (relative to the row's largest logit).
  // Rounding K and V moves each attention output by about the values' rounding (tests/
  // test_attention_kv_types.cpp bounds it per kernel: f16 ~5e-4, q8_0 ~4e-3, q4_0 ~6e-2 of values in
  // [-1, 1]); two layers and the head pass that on at about the same relative size, so the bounds
  // are those, with a margin of about 3.
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  const std::vector<int32_t> ids = random_ids(40, kVocab, 7);
  auto ref = reference_forward(dir, ids);
  const struct {
    KvType t;
    double tol;
  } cases[] = {{KvType::f32, 1e-3}, {KvType::f16, 3e-3}, {KvType::q8_0, 2e-2}, {KvType::q4_0, 0.2}};
  for (const auto& c : cases) {
    const std::string name = kv_type_name(c.t);
    CAPTURE(name);
    Session s(*model, opts(c.t));
    s.prefill(std::span<const int32_t>(ids.data(), 30));   // two chunks of 16 and 14
    double worst = max_err_rel(s.logits(), std::span<const float>(&ref.logits[29 * kVocab], kVocab));
    for (size_t i = 30; i < ids.size(); ++i) {
      s.decode(ids[i]);
      worst = std::max(worst, max_err_rel(s.logits(), std::span<const float>(&ref.logits[i * kVocab], kVocab)));
    }
    MESSAGE(name << ": max error relative to the row's largest logit " << worst);
    CHECK(worst <= c.tol);
    if (c.t == KvType::q8_0) CHECK(s.kv_bytes_per_token() * 100 <= Session(*model, opts(KvType::f16)).kv_bytes_per_token() * 55);
    if (c.t == KvType::q4_0) CHECK(s.kv_bytes_per_token() * 100 <= Session(*model, opts(KvType::f16)).kv_bytes_per_token() * 32);
  }
}

TEST_CASE("kv types: batched decode and rewind over a quantized cache are exact") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  for (KvType t : {KvType::q8_0, KvType::q4_0}) {
    const std::string name = kv_type_name(t);
    CAPTURE(name);
    std::vector<std::unique_ptr<Session>> batched, alone;
    std::vector<std::vector<int32_t>> ids;
    for (uint32_t k = 0; k < 3; ++k) {
      ids.push_back(random_ids(12 + 5 * k + 4, kVocab, 20 + k));
      batched.push_back(std::make_unique<Session>(*model, opts(t)));
      alone.push_back(std::make_unique<Session>(*model, opts(t)));
      batched[k]->prefill(std::span<const int32_t>(ids[k].data(), 12 + 5 * k));
      alone[k]->prefill(std::span<const int32_t>(ids[k].data(), 12 + 5 * k));
    }
    DecodeBatch batch(*model, 4);
    for (uint32_t step = 0; step < 4; ++step) {
      std::vector<Session*> rows;
      std::vector<int32_t> toks;
      for (uint32_t k = 0; k < 3; ++k) {
        rows.push_back(batched[k].get());
        toks.push_back(ids[k][12 + 5 * k + step]);
      }
      batch.step(rows, toks);
      for (uint32_t k = 0; k < 3; ++k) {
        alone[k]->decode(toks[k]);
        CHECK(std::equal(batched[k]->logits().begin(), batched[k]->logits().end(), alone[k]->logits().begin()));
      }
    }
    // Rewind into the quantized rows and decode the same tokens again: the same bits.
    Session& s = *alone[2];
    const std::vector<float> before(s.logits().begin(), s.logits().end());
    const uint32_t end = s.position();
    s.rewind(end - 3);
    for (uint32_t p = end - 3; p < end; ++p) s.decode(ids[2][p]);
    CHECK(std::equal(before.begin(), before.end(), s.logits().begin()));
  }
}

TEST_CASE("kv types: a head_dim that is not a multiple of 32 refuses q8_0 and q4_0, naming the flag") {
  auto dir = tiny_model("--dtype f32 --hidden 64 --intermediate 96 --layers 1 --heads 4 --kv-heads 2 --vocab 300");
  auto model = load_model(dir);
  SessionOptions o = opts(KvType::f32);
  o.cache_type_v = KvType::q4_0;
  try {
    Session s(*model, o);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
    CHECK(std::string(e.what()).find("--cache-type-v q4_0") != std::string::npos);
    CHECK(std::string(e.what()).find("head_dim 16") != std::string::npos);
  }
  o.cache_type_v = KvType::f16;
  Session ok(*model, o);   // f16 takes any head_dim
  CHECK(ok.kv_bytes_per_token() > 0);
}
