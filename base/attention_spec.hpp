#pragma once
// The per-layer description every attention kernel takes, and the named
// constructors that are the one place where each position scheme of docs
// EXTRAPOLATION.md becomes AttentionSpec fields.  Plain host data: the
// kernels are in kernels/attention.hpp, the resolution of a model's config in
// runtime/schemes.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace reach {

enum class KeyCacheMode : uint32_t {
  rotated = 0,   // cache holds R(m)·k (plain RoPE, PI, NTK, YaRN, llama3)
  raw = 1,       // cache holds un-rotated k; kernels rotate tiles as needed
};

// Branch-2 positions (EXTRAPOLATION.md §5.6).
enum class Q2Pos : uint32_t {
  constant = 0,   // q2 at q2_const                   (ReRoPE: w)
  shifted = 1,    // q2 at i + q2_const                (Leaky ReRoPE: w(k-1), table 2)
  grouped = 2,    // q2 at floor(i/G) + q2_const       (Self-Extend: W - W/G)
};
enum class K2Pos : uint32_t {
  unrotated = 0,  // raw key                            (ReRoPE)
  same = 1,       // rotated at m                       (Leaky, with table 2)
  grouped = 2,    // rotated at floor(m/G)              (Self-Extend)
};

// Normalised scores (EXTRAPOLATION.md §4): config.json "qk_norm", --qk-norm.
// The values are the shaders' NORM constant.
enum class QkNorm : uint32_t { none = 0, key = 1, query = 2, cos = 3 };
const char* qk_norm_name(QkNorm norm);                    // "none", "key", "query", "cos"
std::optional<QkNorm> parse_qk_norm(std::string_view name);   // exact names only
// Every name, each between `quote`s, joined by `sep` and the last by `last`:
// qk_norm_names("\"", ", ", " or ") == "\"none\", \"key\", \"query\" or \"cos\"".
std::string qk_norm_names(const char* quote, const char* sep, const char* last);

// ALiBi slopes in ggml's form (EXTRAPOLATION.md §4, §9 T11): n = n_head_log2 =
// 2^floor(log2 H), m0 = 2^(−b/n), m1 = 2^(−b/2/n).  The kernels get these
// three in push constants and compute slope(h) themselves.
struct AlibiParams {
  uint32_t n_head_log2 = 1;
  float m0 = 0, m1 = 0;
  // h < n ? m0^(h+1) : m1^(2(h−n)+1), in double from the f32 parameters.
  double slope(uint32_t head) const;
};
AlibiParams alibi_params(uint32_t n_heads, float max_bias);

// Everything one layer's attention needs, resolved on the host from
// config.json and CLI overrides (runtime/schemes).
struct AttentionSpec {
  uint32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint32_t rotary_dim = 0;          // pairs j < rotary_dim/2 rotate (half-split layout)
  bool rope = true;                 // false: no rotation at all (NoPE layer, e.g. HWFA's full layer)
  KeyCacheMode cache = KeyCacheMode::rotated;
  float scale = 0;                  // logit multiplier in every mode (1/sqrt(head_dim) for plain attention,
                                    // 1 with a norm); 0 means 1/sqrt(head_dim) without a norm, 1 with one

  // Dual branch; branch_window == UINT32_MAX means a single branch.
  uint32_t branch_window = UINT32_MAX;
  Q2Pos q2_mode = Q2Pos::constant;
  int32_t q2_const = 0;
  K2Pos k2_mode = K2Pos::unrotated;
  uint32_t group = 1;
  bool branch2_table2 = false;      // branch 2 rotates with the second table (θ/k for Leaky ReRoPE)

  // Masks: key m is visible to query i iff m <= i and (window == 0 or i - m < window or m < sinks).
  uint32_t window = 0;
  uint32_t sinks = 0;

  float logn_train_len = 0;         // > 0: q *= max(1, ln(i+1)/ln(L))
  QkNorm norm = QkNorm::none;       // key: q·k/|k|; query: q·k/|q|; cos: λ·cos(q,k)
                                    // (norms of the un-rotated vectors; kv_store caches keys
                                    // already divided by |k| for key and cos)
  float cos_n = 0;                  // λ = 4 ln(n); n = cos_n, or i+1 when 0
  float alibi_max_bias = 0;         // > 0: ALiBi slopes from alibi_params(n_heads, alibi_max_bias)
  // > 0: soft-capped logits (Gemma 2's attn_logit_softcapping): the scaled
  // score s becomes softcap·tanh(s/softcap) before bias, mask and softmax.  0 = none.
  float softcap = 0;
  // gpt-oss: a learned per-head sink logit s_h joins every softmax's denominator,
  // p_j = exp(z_j - m) / (exp(s_h - m) + sum_i exp(z_i - m)), m = max(max_i z_i, s_h),
  // and brings no value.  The kernels read the logits (f32 [n_heads]) from a buffer.
  bool sink_logits = false;

  bool dual() const { return branch_window != UINT32_MAX; }

  // Named constructors: each scheme's fields, set here only.  The with_* forms
  // return a changed copy, so they chain: plain(8, 2, 64).with_rerope(512).with_logn(4096).
  // §2.1 plain RoPE on every dim, rotated cache, scale 1/sqrt(head_dim); also
  // every table scheme of §2 (PI, NTK, dynamic, YaRN, llama3: only the table differs).
  static AttentionSpec plain(uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim);
  AttentionSpec with_rotary_dim(uint32_t dims) const;         // §0 partial rotary: the first dims/2 pairs rotate
  AttentionSpec with_raw_cache() const;                       // §1.3 the cache keeps un-rotated keys
  AttentionSpec with_rerope(uint32_t window) const;           // §3.1 ReRoPE: beyond w, q at w and k unrotated
  // §3.2 Leaky ReRoPE: beyond w, table 2 (θ/k) with q at i + shift, shift = w(k−1).
  AttentionSpec with_leaky_rerope(uint32_t window, int32_t shift) const;
  // §3.3 Self-Extend: beyond the neighbour window W, q at floor(i/G) + W − W/G, k at floor(m/G).
  AttentionSpec with_self_extend(uint32_t group, uint32_t window) const;
  AttentionSpec without_rope() const;                         // §4 NoPE layer: no rotation, single branch
  AttentionSpec with_alibi(float max_bias) const;             // §4 ALiBi: linear biases instead of RoPE
  AttentionSpec with_window(uint32_t window, uint32_t sinks) const;   // §3.4/§3.5 sliding window + sinks (0 = full)
  AttentionSpec with_logn(float train_len) const;             // §3.6 log-n query scaling (0 = off)
  // §4 KeyNorm / QueryNorm / CosA (λ = 4 ln cos_n, or 4 ln(i+1) when 0): scale 1; none: 1/sqrt(head_dim).
  AttentionSpec with_norm(QkNorm norm, float cos_n = 0) const;
  AttentionSpec with_softcap(float cap) const;                // Gemma 2 logit soft-capping (0 = off)
  AttentionSpec with_sink_logits(bool on = true) const;       // gpt-oss per-head sink logits in the denominator
};

}  // namespace reach
