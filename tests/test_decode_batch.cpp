// DecodeBatch: several sequences stepped together give each sequence what
// decode(id) alone gives, against the engine's single-sequence path and the
// independent NumPy reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/decode_batch.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;

namespace {

const char* kF32 = "--dtype f32 --hidden 64 --intermediate 160 --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 1";
constexpr uint32_t kVocab = 300;

SessionOptions opts(uint32_t ctx) {
  SessionOptions o;
  o.context = ctx;
  o.chunk = 16;
  return o;
}

// Batched rows go through the GEMM kernel, a lone decode through the matvec:
// the same f32 sums in another order.  Rounding of sums of <= 160 f32 terms
// stays orders of magnitude below 1e-4 of the row's largest logit.
constexpr double kBatchTol = 1e-4;

int32_t argmax(std::span<const float> v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

template <class F>
void expect_error(ErrorCode code, const std::string& needle, F&& f) {
  try {
    f();
    FAIL("no error; expected one mentioning '" << needle << "'");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("decode batch: each row equals its sequence decoded alone, and the NumPy reference") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  constexpr size_t kSeqs = 5;
  const size_t prompt_len[kSeqs] = {3, 17, 1, 9, 30};   // different positions per row
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::unique_ptr<Session>> batched, alone;
  for (size_t s = 0; s < kSeqs; ++s) {
    ids.push_back(random_ids(prompt_len[s] + 6, kVocab, 100 + uint32_t(s)));
    batched.push_back(std::make_unique<Session>(*model, opts(64)));
    alone.push_back(std::make_unique<Session>(*model, opts(64)));
    batched[s]->prefill(std::span<const int32_t>(ids[s].data(), prompt_len[s]));
    alone[s]->prefill(std::span<const int32_t>(ids[s].data(), prompt_len[s]));
  }
  DecodeBatch batch(*model, 8);
  bool exact = true;
  for (size_t step = 0; step < 6; ++step) {
    // Rows join and leave: step 0 all five, then a rotating subset in changing order.
    std::vector<Session*> rows;
    std::vector<int32_t> toks;
    std::vector<size_t> which;
    for (size_t s = 0; s < kSeqs; ++s) {
      const size_t k = (s + step) % kSeqs;
      if (step % 2 == 1 && k == step % kSeqs) continue;
      which.push_back(k);
    }
    for (size_t k : which) {
      rows.push_back(batched[k].get());
      toks.push_back(ids[k][prompt_len[k] + step]);
    }
    batch.step(rows, toks);
    for (size_t r = 0; r < which.size(); ++r) {
      const size_t k = which[r];
      alone[k]->decode(toks[r]);
      CAPTURE(step);
      CAPTURE(k);
      CHECK(batched[k]->position() == alone[k]->position());
      CHECK(max_err_rel(batched[k]->logits(), alone[k]->logits()) <= kBatchTol);
      CHECK(argmax(batched[k]->logits()) == argmax(alone[k]->logits()));
      exact = exact && std::equal(batched[k]->logits().begin(), batched[k]->logits().end(),
                                  alone[k]->logits().begin());
    }
    // Sequences left out of this step fall behind; bring them level so every step tests all of them.
    for (size_t s = 0; s < kSeqs; ++s)
      if (std::find(which.begin(), which.end(), s) == which.end()) {
        batched[s]->decode(ids[s][prompt_len[s] + step]);
        alone[s]->decode(ids[s][prompt_len[s] + step]);
      }
  }
  // The matvec kernel sums each of its M <= 8 rows exactly as it sums a lone row, and attention runs
  // per row with the same kernels: batched logits are bit-identical to decode alone.
  CHECK_MESSAGE(exact, "batched rows are not bit-identical to decode alone");

  // Against the independent reference: the whole sequence after all steps.
  for (size_t s = 0; s < kSeqs; ++s) {
    auto ref = reference_forward(dir, ids[s]);
    const size_t last = ids[s].size() - 1;
    CAPTURE(s);
    CHECK(max_err_rel(batched[s]->logits(), std::span<const float>(&ref.logits[last * kVocab], kVocab)) <= 1e-3);
  }
}

TEST_CASE("decode batch under Android 15's limits: rows off the 256-byte binding alignment equal decode alone") {
  // The profile leaves minStorageBufferOffsetAlignment unstated (the specification's 256 bytes) and allows
  // 12 storage buffers per stage: this model's rows of k / v (128 bytes) start off it, so each row's
  // attention goes through aligned copies, and decode takes the unfused attention kernels.
  DeviceOptions o;
  o.settings = settings_from(std::getenv);
  o.settings.device_profile = "tests/data/device-profiles/VP_ANDROID_15_minimums.json";
  o.pipeline_cache_dir = "-";
  o.validation = validation_wanted();
  o.on_validation = on_validation_message;
  auto dev = Device::create(o);
  REQUIRE(dev->caps().min_storage_buffer_offset_alignment == 256);
  REQUIRE(dev->caps().max_stage_storage_buffers <= 12);
  {
    Allocator alloc(*dev);
    auto dir = tiny_model(kF32);
    LoadOptions lo;
    lo.require_tokenizer = false;
    auto model = Model::load(*dev, alloc, dir, lo);
    constexpr size_t kSeqs = 3, kSteps = 4;
    const size_t prompt_len[kSeqs] = {5, 12, 2};
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::unique_ptr<Session>> batched, alone;
    for (size_t s = 0; s < kSeqs; ++s) {
      ids.push_back(random_ids(prompt_len[s] + kSteps, kVocab, 200 + uint32_t(s)));
      batched.push_back(std::make_unique<Session>(*model, opts(32)));
      alone.push_back(std::make_unique<Session>(*model, opts(32)));
      batched[s]->prefill(std::span<const int32_t>(ids[s].data(), prompt_len[s]));
      alone[s]->prefill(std::span<const int32_t>(ids[s].data(), prompt_len[s]));
    }
    DecodeBatch batch(*model, 4);
    for (size_t step = 0; step < kSteps; ++step) {
      std::vector<Session*> rows;
      std::vector<int32_t> toks;
      for (size_t s = 0; s < kSeqs; ++s) {   // the row order changes each step
        const size_t k = (s + step) % kSeqs;
        rows.push_back(batched[k].get());
        toks.push_back(ids[k][prompt_len[k] + step]);
      }
      batch.step(rows, toks);
      for (size_t r = 0; r < kSeqs; ++r) {
        const size_t k = (r + step) % kSeqs;
        alone[k]->decode(toks[r]);
        CAPTURE(step);
        CAPTURE(k);
        CHECK(max_err_rel(batched[k]->logits(), alone[k]->logits()) <= kBatchTol);
        CHECK(argmax(batched[k]->logits()) == argmax(alone[k]->logits()));
      }
    }
    for (size_t s = 0; s < kSeqs; ++s) {
      auto ref = reference_forward(dir, ids[s]);
      const size_t last = ids[s].size() - 1;
      CAPTURE(s);
      CHECK(max_err_rel(batched[s]->logits(), std::span<const float>(&ref.logits[last * kVocab], kVocab)) <= 1e-3);
      CHECK(max_err_rel(alone[s]->logits(), std::span<const float>(&ref.logits[last * kVocab], kVocab)) <= 1e-3);
    }
  }
}

TEST_CASE("decode batch: greedy chains of 8 sequences equal their chains alone") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  constexpr size_t kSeqs = 8, kSteps = 12;
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::vector<int32_t>> alone_chain(kSeqs), batch_chain(kSeqs);
  for (size_t s = 0; s < kSeqs; ++s) {
    auto prompt = random_ids(2 + 3 * s, kVocab, 200 + uint32_t(s));
    Session solo(*model, opts(64));
    solo.prefill(prompt);
    for (size_t t = 0; t < kSteps; ++t) {
      alone_chain[s].push_back(argmax(solo.logits()));
      solo.decode(alone_chain[s].back());
    }
    sessions.push_back(std::make_unique<Session>(*model, opts(64)));
    sessions.back()->prefill(prompt);
  }
  DecodeBatch batch(*model, kSeqs);
  std::vector<Session*> rows;
  for (auto& s : sessions) rows.push_back(s.get());
  for (size_t t = 0; t < kSteps; ++t) {
    std::vector<int32_t> toks;
    for (size_t s = 0; s < kSeqs; ++s) {
      batch_chain[s].push_back(argmax(sessions[s]->logits()));
      toks.push_back(batch_chain[s].back());
    }
    batch.step(rows, toks);
  }
  for (size_t s = 0; s < kSeqs; ++s) {
    CAPTURE(s);
    CHECK(batch_chain[s] == alone_chain[s]);
  }
}

TEST_CASE("decode batch: a destroyed session's program never runs for a new one") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  DecodeBatch batch(*model, 4);
  auto ids = random_ids(8, kVocab, 7);
  Session keep(*model, opts(32));
  keep.prefill(std::span<const int32_t>(ids.data(), 4));
  for (int round = 0; round < 3; ++round) {
    // A new session may reuse the old one's address: programs are keyed by serial, not address.
    auto fresh = std::make_unique<Session>(*model, opts(32));
    Session solo(*model, opts(32));
    fresh->prefill(std::span<const int32_t>(ids.data(), 4));
    solo.prefill(std::span<const int32_t>(ids.data(), 4));
    std::vector<Session*> rows{fresh.get(), &keep};
    batch.step(rows, std::vector<int32_t>{ids[4], ids[4 + round]});
    solo.decode(ids[4]);
    CHECK(max_err_rel(fresh->logits(), solo.logits()) <= kBatchTol);
    CHECK(fresh->position() == 5);
  }
  CHECK(keep.position() == 7);
}

TEST_CASE("decode batch: bad input is a clear error and changes no session") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir), other = load_model(dir);
  DecodeBatch batch(*model, 2);
  auto ids = random_ids(8, kVocab, 9);
  Session a(*model, opts(8)), b(*model, opts(8)), c(*model, opts(8)), foreign(*other, opts(8));
  for (Session* s : {&a, &b, &c}) s->prefill(std::span<const int32_t>(ids.data(), 4));
  foreign.prefill(std::span<const int32_t>(ids.data(), 4));
  const std::vector<float> a_logits(a.logits().begin(), a.logits().end());
  using V = std::vector<Session*>;
  using I = std::vector<int32_t>;
  expect_error(ErrorCode::invalid_argument, "at least one", [&] { batch.step(V{}, I{}); });
  expect_error(ErrorCode::invalid_argument, "token ids", [&] { batch.step(V{&a, &b}, I{1}); });
  expect_error(ErrorCode::invalid_argument, "exceeds", [&] { batch.step(V{&a, &b, &c}, I{1, 2, 3}); });
  expect_error(ErrorCode::invalid_argument, "is null", [&] { batch.step(V{&a, nullptr}, I{1, 2}); });
  expect_error(ErrorCode::invalid_argument, "also session 0", [&] { batch.step(V{&a, &a}, I{1, 2}); });
  expect_error(ErrorCode::invalid_argument, "another model", [&] { batch.step(V{&a, &foreign}, I{1, 2}); });
  expect_error(ErrorCode::invalid_argument, "outside the vocabulary", [&] { batch.step(V{&a, &b}, I{1, 300}); });
  b.decode_async(5);
  expect_error(ErrorCode::invalid_argument, "in flight", [&] { batch.step(V{&a, &b}, I{1, 2}); });
  CHECK(b.wait_decode(UINT64_MAX));
  c.prefill(std::span<const int32_t>(ids.data(), 4));   // c is now full (8 of 8)
  expect_error(ErrorCode::context_overflow, "full", [&] { batch.step(V{&a, &c}, I{1, 2}); });
  CHECK(a.position() == 4);
  CHECK(c.position() == 8);
  CHECK(std::equal(a_logits.begin(), a_logits.end(), a.logits().begin()));
  batch.step(V{&a, &b}, I{1, 2});   // still usable
  CHECK(a.position() == 5);
  CHECK(b.position() == 6);
}
