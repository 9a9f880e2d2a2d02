#pragma once
// Next-token choice from logits: greedy, temperature, top-k, top-p, seeded.
#include <cstdint>
#include <random>
#include <span>

namespace reach {

struct SamplerParams {
  float temperature = 0.8f;   // finite, >= 0; 0: greedy (argmax)
  int32_t top_k = 40;         // >= 0; 0: no top-k cut
  float top_p = 0.95f;        // in (0, 1]; 1: no nucleus cut
  uint64_t seed = 0;
};

// Throws Error(invalid_argument) naming the field (temperature, top_k, top_p)
// for a value outside the ranges above: NaN, infinities and negative values
// would otherwise sample garbage or be ignored without a word.
void validate_sampler_params(const SamplerParams& params);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);   // validate_sampler_params(params) first
  int32_t sample(std::span<const float> logits);
  const SamplerParams& params() const { return params_; }

 private:
  SamplerParams params_;
  std::mt19937_64 rng_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace reach
