// token_logprobs (runtime/session/token_logprobs.hpp): the log-softmax of raw logits at a token and the
// most likely alternatives, against a direct long-double evaluation of log(exp(x_i) / sum_j exp(x_j)).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "base/error.hpp"
#include "runtime/session/token_logprobs.hpp"
#include "tests/support/data.hpp"

using namespace reach;

namespace {
long double reference(const std::vector<float>& x, size_t i) {
  long double z = 0;
  for (float v : x) z += std::exp((long double)v);
  return std::log(std::exp((long double)x[i]) / z);
}
}  // namespace

TEST_CASE("token_logprobs: values, order of the alternatives, ties and bounds") {
  // Logits spread over [-30, 30): exp stays within long double without a shift.
  std::vector<float> x = test::random_floats(1000, 3, -30.0f, 30.0f);
  x[17] = x[523] = 40.0f;   // a tie at the top: the lower id first
  const TokenLogprob t = token_logprobs(x, 523, 20);
  CHECK(t.id == 523);
  CHECK(std::fabs(t.logprob - double(reference(x, 523))) < 1e-5);
  REQUIRE(t.top.size() == 20);
  CHECK(t.top[0].id == 17);
  CHECK(t.top[1].id == 523);
  double mass = 0;
  for (size_t j = 0; j < t.top.size(); ++j) {
    CAPTURE(j);
    CHECK(std::fabs(t.top[j].logprob - double(reference(x, size_t(t.top[j].id)))) < 1e-5);
    if (j) CHECK(t.top[j].logprob <= t.top[j - 1].logprob);
    // Nothing outside the list is more likely than its last entry.
    mass += std::exp(double(t.top[j].logprob));
  }
  for (size_t v = 0; v < x.size(); ++v) {
    bool listed = false;
    for (const TopLogprob& a : t.top) listed |= size_t(a.id) == v;
    if (!listed) CHECK(x[v] <= x[size_t(t.top.back().id)]);
  }
  CHECK(mass <= 1.0 + 1e-6);
  CHECK(token_logprobs(x, 0, 0).top.empty());

  // Large logits (a shift is needed) and -inf entries (masked tokens).
  std::vector<float> big{1000.0f, 999.0f, -std::numeric_limits<float>::infinity()};
  const TokenLogprob b = token_logprobs(big, 1, 3);
  CHECK(std::fabs(b.logprob - (-1.0 - std::log1p(std::exp(-1.0)))) < 1e-6);
  CHECK(std::isinf(b.top[2].logprob));

  CHECK_THROWS_AS(token_logprobs(x, 1000, 0), Error);
  CHECK_THROWS_AS(token_logprobs(x, -1, 0), Error);
  CHECK_THROWS_AS(token_logprobs(x, 0, 21), Error);
}
