// Generation (runtime/session/generation.hpp), the session + sampler + text + stop ids that `reach run`,
// the server's slots and the C API's sessions hold: against the NumPy reference's greedy chain, and
// against a bare Session + Sampler loop, on the tiny test model of test_model.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/generation.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;

namespace {

const char* kF32 = "--dtype f32 --hidden 64 --intermediate 160 --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 1";
const std::vector<int32_t> kPrompt{298, 104, 101, 108, 108, 111};

GenerationOptions options(SamplerParams sampling, std::vector<int32_t> stop_ids = {}) {
  GenerationOptions o;
  o.session.context = 64;
  o.session.chunk = 64;
  o.sampling = sampling;
  o.stop_ids = std::move(stop_ids);
  return o;
}

SamplerParams greedy() {
  SamplerParams p;
  p.temperature = 0;
  return p;
}

SamplerParams seeded() {
  SamplerParams p;
  p.temperature = 1.5f;   // flat enough that the choices are not the argmax chain
  p.top_k = 50;
  p.top_p = 0.95f;
  p.seed = 7;
  return p;
}

// The tokens a bare Session + Sampler loop picks after kPrompt, every pick decoded.
std::vector<int32_t> bare_loop(Model& model, const SamplerParams& sampling, int n) {
  SessionOptions so;
  so.context = 64;
  so.chunk = 64;
  Session s(model, so);
  Sampler sampler(sampling);
  s.prefill(kPrompt);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(sampler.sample(s.logits()));
    if (i + 1 < n) s.decode(out.back());
  }
  return out;
}

}  // namespace

TEST_CASE("generation: greedy tokens follow the reference's argmax chain; the text is the tokenizer's decoding") {
  auto dir = tiny_model(kF32);
  auto model = load_model(dir);
  const std::vector<int32_t>& eos = model->eos_ids();
  REQUIRE(!eos.empty());
  auto ref = reference_forward(dir, kPrompt, 32);
  REQUIRE(ref.generated.size() == 32);

  Generation gen(*model, options(greedy()));
  CHECK(gen.stop_ids() == eos);
  gen.session().prefill(kPrompt);
  std::vector<int32_t> got;
  std::string text;
  for (size_t i = 0; i < 32; ++i) {
    const GeneratedToken t = gen.next();
    if (t.id != ref.generated[i]) {
      // Only a near tie in the reference may differ (f32 vs f64 rounding).
      INFO("step " << i << ": reach " << t.id << ", reference " << ref.generated[i] << ", margin " << ref.margins[i]);
      REQUIRE(ref.margins[i] < 1e-3 * 12);
      break;
    }
    CHECK(t.stop == (std::find(eos.begin(), eos.end(), t.id) != eos.end()));
    if (t.stop) {
      CHECK(t.text.empty());
      break;
    }
    got.push_back(t.id);
    text += t.text;
    if (i + 1 < 32) gen.session().decode(t.id);
  }
  MESSAGE(got.size() << " tokens equal the reference's");
  CHECK(got.size() >= 8);
  text += gen.flush();
  CHECK(text == model->tokenizer()->decode(got));
}

TEST_CASE("generation: seeded sampling picks what a bare Session + Sampler loop does; stop ids end it") {
  auto model = load_model(tiny_model(kF32));
  const int n = 24;
  const std::vector<int32_t> bare = bare_loop(*model, seeded(), n);
  CHECK(bare != bare_loop(*model, greedy(), n));   // the sampler path, not the argmax one

  Generation gen(*model, options(seeded()));
  gen.session().prefill(kPrompt);
  std::vector<int32_t> got;
  for (int i = 0; i < n; ++i) {
    got.push_back(gen.next().id);   // the tiny model's EOS may come up: sampling goes on past it here
    if (i + 1 < n) gen.session().decode(got.back());
  }
  CHECK(got == bare);

  // A stop id the chain reaches: after restart (position 0, the sampler from its seed again) the
  // same tokens come up to the first occurrence of that id, which ends the reply.
  const int32_t stop = bare[size_t(n / 2)];
  const size_t first = size_t(std::find(bare.begin(), bare.end(), stop) - bare.begin());
  const std::vector<int32_t> extra{stop, stop};
  gen.restart(seeded(), extra);
  CHECK(gen.session().position() == 0);
  std::vector<int32_t> want = model->eos_ids();
  if (std::find(want.begin(), want.end(), stop) == want.end()) want.push_back(stop);
  CHECK(gen.stop_ids() == want);   // the model's EOS ids, then the extra one once
  gen.session().prefill(kPrompt);
  std::vector<int32_t> again;
  for (int i = 0; i < n; ++i) {
    const GeneratedToken t = gen.next();
    again.push_back(t.id);
    if (t.stop) break;
    gen.session().decode(t.id);
  }
  const size_t end = std::min(first, size_t(std::find_first_of(bare.begin(), bare.end(), model->eos_ids().begin(),
                                                               model->eos_ids().end()) - bare.begin()));
  CHECK(again == std::vector<int32_t>(bare.begin(), bare.begin() + std::ptrdiff_t(end + 1)));
}

TEST_CASE("generation: bad sampling parameters are refused before the session is made, and change nothing") {
  auto model = load_model(tiny_model(kF32));
  SamplerParams bad;
  bad.temperature = std::numeric_limits<float>::quiet_NaN();
  // A context no device holds: the sampling error comes first (the C API's reach_session_create reports it).
  GenerationOptions o = options(bad);
  o.session.context = 1u << 30;
  CHECK_HAS(error_of([&] { Generation g(*model, o); }, ErrorCode::invalid_argument), "temperature");

  Generation gen(*model, options(greedy(), {5}));
  gen.session().prefill(kPrompt);
  const std::vector<int32_t> stops = gen.stop_ids();
  CHECK_HAS(error_of([&] { gen.restart(bad, {}); }, ErrorCode::invalid_argument), "temperature");
  CHECK(gen.session().position() == kPrompt.size());
  CHECK(gen.stop_ids() == stops);
  CHECK_HAS(error_of([&] { gen.set_sampling(bad); }, ErrorCode::invalid_argument), "temperature");
  CHECK(gen.sample() == argmax(gen.session().logits()));   // still the greedy sampler
}

TEST_CASE("generation: restart keeping a prefix continues from the cached positions; logprobs on request") {
  auto model = load_model(tiny_model(kF32));
  // The reference: the whole sequence prefilled from position 0 on a fresh session.
  const std::vector<int32_t> second{298, 104, 101, 119, 111, 114, 108, 100};   // shares kPrompt's first 3 ids
  Generation fresh(*model, options(greedy()));
  fresh.session().prefill(second);
  const std::vector<float> want(fresh.session().logits().begin(), fresh.session().logits().end());

  Generation gen(*model, options(greedy()));
  gen.session().prefill(kPrompt);
  gen.session().decode(gen.next().id);
  gen.set_logprobs(3);
  CHECK(gen.next().logprob.has_value());
  // Past the held positions: refused, nothing changes (logprobs stay on).
  CHECK_HAS(error_of([&] { gen.restart(greedy(), {}, uint32_t(kPrompt.size()) + 2); }, ErrorCode::invalid_argument),
            "rewind");
  CHECK(gen.session().position() == kPrompt.size() + 1);
  CHECK(gen.next().logprob.has_value());

  gen.restart(greedy(), {}, 3);
  CHECK(gen.session().position() == 3);
  CHECK(!gen.next().logprob.has_value());   // restart turns logprobs off
  gen.session().prefill(std::span<const int32_t>(second).subspan(3));
  const std::span<const float> got = gen.session().logits();
  REQUIRE(got.size() == want.size());
  float err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  CHECK(err <= 1e-4f * scale);   // chunks cut at another place: the same products, summed in another order
  CHECK_HAS(error_of([&] { gen.set_logprobs(21); }, ErrorCode::invalid_argument), "logprobs");
}
