// AttentionSpec's named constructors, the QkNorm names and the ALiBi
// parameters (base/attention_spec.hpp).
#include "base/attention_spec.hpp"

#include <cmath>
#include <iterator>

namespace reach {

namespace {

constexpr const char* kQkNormNames[] = {"none", "key", "query", "cos"};   // indexed by QkNorm

}  // namespace

const char* qk_norm_name(QkNorm norm) {
  const auto i = static_cast<uint32_t>(norm);
  return i < std::size(kQkNormNames) ? kQkNormNames[i] : "?";
}

std::optional<QkNorm> parse_qk_norm(std::string_view name) {
  for (uint32_t i = 0; i < std::size(kQkNormNames); ++i)
    if (name == kQkNormNames[i]) return static_cast<QkNorm>(i);
  return std::nullopt;
}

std::string qk_norm_names(const char* quote, const char* sep, const char* last) {
  std::string out;
  const size_t n = std::size(kQkNormNames);
  for (size_t i = 0; i < n; ++i) {
    if (i) out += i + 1 == n ? last : sep;
    out = out + quote + kQkNormNames[i] + quote;
  }
  return out;
}

double AlibiParams::slope(uint32_t head) const {
  return head < n_head_log2 ? std::pow(double(m0), head + 1) : std::pow(double(m1), 2 * (head - n_head_log2) + 1);
}

AlibiParams alibi_params(uint32_t n_heads, float max_bias) {
  AlibiParams a;
  while (a.n_head_log2 * 2 <= n_heads) a.n_head_log2 *= 2;
  a.m0 = float(std::pow(2.0, -double(max_bias) / a.n_head_log2));
  a.m1 = float(std::pow(2.0, -double(max_bias) / 2.0 / a.n_head_log2));
  return a;
}

AttentionSpec AttentionSpec::plain(uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim) {
  AttentionSpec s;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.rotary_dim = head_dim;
  s.scale = float(1.0 / std::sqrt(double(head_dim)));
  return s;
}

AttentionSpec AttentionSpec::with_rotary_dim(uint32_t dims) const {
  AttentionSpec s = *this;
  s.rotary_dim = dims;
  return s;
}

AttentionSpec AttentionSpec::with_raw_cache() const {
  AttentionSpec s = *this;
  s.cache = KeyCacheMode::raw;
  return s;
}

AttentionSpec AttentionSpec::with_rerope(uint32_t window) const {
  AttentionSpec s = *this;
  s.branch_window = window;
  s.q2_mode = Q2Pos::constant;
  s.q2_const = int32_t(window);
  s.k2_mode = K2Pos::unrotated;
  s.cache = KeyCacheMode::raw;
  return s;
}

AttentionSpec AttentionSpec::with_leaky_rerope(uint32_t window, int32_t shift) const {
  AttentionSpec s = *this;
  s.branch_window = window;
  s.q2_mode = Q2Pos::shifted;
  s.q2_const = shift;
  s.k2_mode = K2Pos::same;
  s.branch2_table2 = true;
  s.cache = KeyCacheMode::raw;
  return s;
}

AttentionSpec AttentionSpec::with_self_extend(uint32_t group, uint32_t window) const {
  AttentionSpec s = *this;
  s.branch_window = window;
  s.q2_mode = Q2Pos::grouped;
  s.q2_const = int32_t(window - window / group);
  s.k2_mode = K2Pos::grouped;
  s.group = group;
  s.cache = KeyCacheMode::raw;
  return s;
}

AttentionSpec AttentionSpec::without_rope() const {
  AttentionSpec s = *this;
  s.rope = false;
  s.branch_window = UINT32_MAX;
  s.q2_mode = Q2Pos::constant;
  s.q2_const = 0;
  s.k2_mode = K2Pos::unrotated;
  s.group = 1;
  s.branch2_table2 = false;
  s.cache = KeyCacheMode::rotated;   // nothing is rotated: the cache holds k as is
  return s;
}

AttentionSpec AttentionSpec::with_alibi(float max_bias) const {
  AttentionSpec s = without_rope();
  s.alibi_max_bias = max_bias;
  return s;
}

AttentionSpec AttentionSpec::with_window(uint32_t window, uint32_t sinks) const {
  AttentionSpec s = *this;
  s.window = window;
  s.sinks = window ? sinks : 0;   // sinks only matter to a window
  return s;
}

AttentionSpec AttentionSpec::with_logn(float train_len) const {
  AttentionSpec s = *this;
  s.logn_train_len = train_len;
  return s;
}

AttentionSpec AttentionSpec::with_norm(QkNorm norm, float cos_n) const {
  AttentionSpec s = *this;
  s.norm = norm;
  // The normalised modes carry their own temperature (EXTRAPOLATION.md seeds): no 1/sqrt(d).
  s.scale = norm == QkNorm::none ? float(1.0 / std::sqrt(double(head_dim))) : 1.0f;
  s.cos_n = cos_n;
  return s;
}

AttentionSpec AttentionSpec::with_softcap(float cap) const {
  AttentionSpec s = *this;
  s.softcap = cap;
  return s;
}

AttentionSpec AttentionSpec::with_sink_logits(bool on) const {
  AttentionSpec s = *this;
  s.sink_logits = on;
  return s;
}

}  // namespace reach
