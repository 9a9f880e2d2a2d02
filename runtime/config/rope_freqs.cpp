// inv_freq / attention factor of every RoPE-table scheme (EXTRAPOLATION.md §2)
// and the cos/sin table.  float64 throughout, formulas as in
// tools/refmodel/rope.py (which follows HF modeling_rope_utils).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "base/error.hpp"
#include "runtime/config/position_schemes.hpp"

namespace reach {

namespace {

std::vector<double> default_inv_freq(int64_t d, double base) {
  std::vector<double> inv(static_cast<size_t>(d / 2));
  for (int64_t j = 0; j < d / 2; ++j)
    inv[static_cast<size_t>(j)] = 1.0 / std::pow(base, static_cast<double>(2 * j) / static_cast<double>(d));
  return inv;
}

double get_mscale(double s, double m = 1.0) { return s <= 1 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

// d/(d-2) exponent of the NTK base change; d == 2 has none.
double ntk_exponent(int64_t d, const char* type) {
  if (d <= 2)
    throw Error(ErrorCode::unsupported, std::string("rope_type \"") + type + "\" needs a rotary dim > 2 (base' = base·s^(d/(d−2)))"
                                        ", the model has " + std::to_string(d));
  return static_cast<double>(d) / static_cast<double>(d - 2);
}

}  // namespace

RopeFreqs rope_freqs(const RopeScaling& rope, int64_t d, double base, int64_t max_pos, int64_t seq_len) {
  if (d < 2 || d % 2 != 0)
    throw Error(ErrorCode::invalid_argument, "rope_freqs: rotary dim " + std::to_string(d) + " must be even and >= 2");
  if (!(base > 0)) throw Error(ErrorCode::invalid_argument, "rope_freqs: rope_theta must be > 0");
  const double s = rope.factor;
  const int64_t orig = rope.original_max_position > 0 ? rope.original_max_position : max_pos;
  RopeFreqs f;
  switch (rope.type) {
    case RopeType::none_:
    case RopeType::default_:
    case RopeType::rerope:
    case RopeType::leaky_rerope:
    case RopeType::self_extend:
      f.inv_freq = default_inv_freq(d, base);
      break;
    case RopeType::linear:
      f.inv_freq = default_inv_freq(d, base);
      for (double& x : f.inv_freq) x /= s;
      break;
    case RopeType::ntk:
      f.inv_freq = default_inv_freq(d, base * std::pow(s, ntk_exponent(d, "ntk")));
      break;
    case RopeType::dynamic: {
      if (orig <= 0) throw Error(ErrorCode::invalid_argument, "rope_freqs: dynamic needs an original context > 0");
      const int64_t L = std::max(seq_len > 0 ? seq_len : orig, orig);
      const double ratio = s * static_cast<double>(L) / static_cast<double>(orig) - (s - 1.0);
      f.inv_freq = default_inv_freq(d, base * std::pow(ratio, ntk_exponent(d, "dynamic")));
      break;
    }
    case RopeType::yarn: {
      if (orig <= 0) throw Error(ErrorCode::invalid_argument, "rope_freqs: yarn needs an original context > 0");
      if (rope.attention_factor) {
        f.attention_factor = *rope.attention_factor;
      } else if (rope.mscale && *rope.mscale != 0 && rope.mscale_all_dim && *rope.mscale_all_dim != 0) {
        f.attention_factor = get_mscale(s, *rope.mscale) / get_mscale(s, *rope.mscale_all_dim);
      } else {
        f.attention_factor = get_mscale(s);
      }
      const double dd = static_cast<double>(d);
      auto cd = [&](double n_rot) {
        return dd * std::log(static_cast<double>(orig) / (n_rot * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
      };
      double low = cd(rope.beta_fast != 0 ? rope.beta_fast : 32.0);
      double high = cd(rope.beta_slow != 0 ? rope.beta_slow : 1.0);
      if (rope.truncate) low = std::floor(low), high = std::ceil(high);
      low = std::max(low, 0.0);
      high = std::min(high, dd - 1.0);
      if (low == high) high += 0.001;
      const auto theta = default_inv_freq(d, base);
      f.inv_freq.resize(theta.size());
      for (size_t j = 0; j < theta.size(); ++j) {
        const double ramp = std::clamp((static_cast<double>(j) - low) / (high - low), 0.0, 1.0);
        const double ext = 1.0 - ramp;
        f.inv_freq[j] = (theta[j] / s) * (1.0 - ext) + theta[j] * ext;
      }
      break;
    }
    case RopeType::longrope: {
      // HF _compute_longrope_parameters: the long factors once the sequence passes the trained context.
      if (orig <= 0) throw Error(ErrorCode::invalid_argument, "rope_freqs: longrope needs original_max_position_embeddings");
      const std::vector<double>& ext = seq_len > orig ? rope.long_factor : rope.short_factor;
      if (ext.size() != static_cast<size_t>(d / 2))
        throw Error(ErrorCode::invalid_argument, "rope_freqs: longrope has " + std::to_string(ext.size()) +
                                                     " factors for " + std::to_string(d / 2) + " rotary pairs");
      f.inv_freq = default_inv_freq(d, base);
      for (size_t j = 0; j < f.inv_freq.size(); ++j) f.inv_freq[j] /= ext[j];
      // Without a factor, Phi-3's max_position_embeddings / original context sets the attention factor.
      const double sc = s > 0 ? s : static_cast<double>(max_pos) / static_cast<double>(orig);
      if (rope.attention_factor) f.attention_factor = *rope.attention_factor;
      else f.attention_factor = sc <= 1 ? 1.0 : std::sqrt(1.0 + std::log(sc) / std::log(static_cast<double>(orig)));
      break;
    }
    case RopeType::llama3: {
      if (orig <= 0) throw Error(ErrorCode::invalid_argument, "rope_freqs: llama3 needs original_max_position_embeddings");
      const double lf = rope.low_freq_factor, hf = rope.high_freq_factor;
      const double o = static_cast<double>(orig);
      const double low_wl = o / lf, high_wl = o / hf;
      const auto theta = default_inv_freq(d, base);
      f.inv_freq.resize(theta.size());
      for (size_t j = 0; j < theta.size(); ++j) {
        const double lam = 2.0 * std::numbers::pi / theta[j];
        if (lam > low_wl) {
          f.inv_freq[j] = theta[j] / s;
        } else if (lam < high_wl) {
          f.inv_freq[j] = theta[j];
        } else {   // medium, boundaries included (HF); vLLM's guard when lf == hf
          const double sm = hf == lf ? 0.0 : (o / lam - lf) / (hf - lf);
          f.inv_freq[j] = (1.0 - sm) * theta[j] / s + sm * theta[j];
        }
      }
      break;
    }
  }
  return f;
}

RopeFreqs rope_freqs(const ModelConfig& cfg, int64_t seq_len) {
  RopeFreqs f = rope_freqs(cfg.rope, cfg.rotary_dim, cfg.rope_theta, cfg.max_position_embeddings, seq_len);
  if (!cfg.rope_freq_factors.empty()) {
    // llama.cpp's rope_freqs: theta_j / factor_j, whatever the rope type.
    if (cfg.rope_freq_factors.size() != f.inv_freq.size())
      throw Error(ErrorCode::format, "rope_freqs.weight has " + std::to_string(cfg.rope_freq_factors.size()) +
                                         " factors, the model has " + std::to_string(f.inv_freq.size()) +
                                         " rotary pairs");
    for (size_t j = 0; j < f.inv_freq.size(); ++j) f.inv_freq[j] /= cfg.rope_freq_factors[j];
  }
  return f;
}

int64_t kernel_rotary_dim(int64_t rotary_dim) { return (rotary_dim / 2 + 3) / 4 * 4 * 2; }

void fill_rope_rows(const RopeFreqs& f, uint32_t first, uint32_t count, uint32_t pairs, float* out) {
  if (count > 0 && pairs > 0 && !out) throw Error(ErrorCode::invalid_argument, "fill_rope_table: null output");
  const double af = f.attention_factor;
  const uint32_t rotating = uint32_t(std::min<size_t>(pairs, f.inv_freq.size()));
  for (uint32_t r = 0; r < count; ++r) {
    const uint64_t p = uint64_t(first) + r;
    float* row = out + static_cast<size_t>(r) * pairs * 2;
    for (uint32_t j = rotating; j < pairs; ++j) row[2 * j] = 1.0f, row[2 * j + 1] = 0.0f;
    for (uint32_t j = 0; j < rotating; ++j) {
      // p·θ is exact to ~1 ulp of the angle in double (1e-11 rad at 1e5 rad).
      const double a = static_cast<double>(p) * f.inv_freq[j];
      row[2 * j] = static_cast<float>(std::cos(a) * af);
      row[2 * j + 1] = static_cast<float>(std::sin(a) * af);
    }
  }
}

void fill_rope_table(const RopeFreqs& f, uint32_t positions, uint32_t pairs, float* out) {
  fill_rope_rows(f, 0, positions, pairs, out);
}

std::vector<float> rope_table(const RopeFreqs& f, uint32_t positions) {
  const auto pairs = static_cast<uint32_t>(f.inv_freq.size());
  std::vector<float> out(static_cast<size_t>(positions) * pairs * 2);
  fill_rope_table(f, positions, pairs, out.data());
  return out;
}

}  // namespace reach
