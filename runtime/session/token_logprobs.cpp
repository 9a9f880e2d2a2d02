#include "runtime/session/token_logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.hpp"

namespace reach {

TokenLogprob token_logprobs(std::span<const float> logits, int32_t id, int top) {
  if (id < 0 || size_t(id) >= logits.size())
    throw Error(ErrorCode::invalid_argument, "token_logprobs: token id " + std::to_string(id) +
                                                 " is outside the " + std::to_string(logits.size()) + " logits");
  if (top < 0 || top > kMaxTopLogprobs)
    throw Error(ErrorCode::invalid_argument, "token_logprobs: top must be in [0, " +
                                                 std::to_string(kMaxTopLogprobs) + "], got " + std::to_string(top));
  // log-sum-exp around the maximum, in double: a vocabulary of 50k f32 terms loses nothing.
  double mx = -std::numeric_limits<double>::infinity();
  for (float x : logits) mx = std::max(mx, double(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - mx);
  const double log_z = mx + std::log(sum);
  auto lp = [&](int32_t i) { return float(double(logits[size_t(i)]) - log_z); };

  TokenLogprob t;
  t.id = id;
  t.logprob = lp(id);
  const size_t k = std::min(size_t(top), logits.size());
  if (k == 0) return t;
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + ptrdiff_t(k), idx.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < k; ++i) t.top.push_back({idx[i], "", lp(idx[i])});
  return t;
}

}  // namespace reach
