#include "runtime/session/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace reach {

int32_t argmax(std::span<const float> logits) {
  // Ties go to the lowest id, as torch.argmax / numpy.argmax do.
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

namespace {
std::string text(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
}  // namespace

void validate_sampler_params(const SamplerParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    throw Error(ErrorCode::invalid_argument, "sampling temperature is " + text(p.temperature) +
                                                 ": it must be a finite number >= 0 (0 = greedy)");
  if (p.top_k < 0)
    throw Error(ErrorCode::invalid_argument, "sampling top_k is " + std::to_string(p.top_k) +
                                                 ": it must be >= 0 (0 = no top-k cut)");
  if (!(p.top_p > 0 && p.top_p <= 1))
    throw Error(ErrorCode::invalid_argument, "sampling top_p is " + text(p.top_p) +
                                                 ": it must be in (0, 1] (1 = no nucleus cut)");
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
  validate_sampler_params(params);
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature == 0.0f || logits.size() <= 1) return argmax(logits);
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  size_t keep = logits.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < keep) keep = size_t(params_.top_k);
  std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  idx.resize(keep);
  // Softmax over the kept candidates at temperature T, in double.
  std::vector<double> p(keep);
  const double mx = logits[idx[0]];
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[idx[i]] - mx) / params_.temperature);
  for (auto& x : p) x /= sum;
  if (params_.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += p[n++];
      if (cum >= params_.top_p) break;
    }
    keep = std::max<size_t>(n, 1);
    p.resize(keep);
  }
  std::discrete_distribution<size_t> dist(p.begin(), p.end());
  return idx[dist(rng_)];
}

}  // namespace reach
