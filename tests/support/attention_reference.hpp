#pragma once
// Naive float64 attention for the attention kernel tests, written from the
// formulas of docs EXTRAPOLATION.md §1.2, §3, §4 (and tools/refmodel/attention.py), and
// Gemma 2's soft cap as transformers applies it (scaled scores, then tanh, then the mask):
// explicit n_q x n_k score matrices, dual-branch schemes in the two-matrix form
// S = where(i - m < W, S1, S2).  Independent of the kernels: angles are
// computed here from inv_freq in double, not read from the f32 tables.
#include <cstdint>
#include <string>
#include <vector>

namespace reach::test {

struct RefScheme {
  enum Method { rope, rerope, leaky_rerope, self_extend };
  std::vector<double> inv_freq;   // empty = no rotation (NoPE)
  double attention_factor = 1;    // multiplies cos and sin
  Method method = rope;
  int64_t window = 0;             // branch threshold W
  double leaky_k = 1;             // Leaky: branch 2 uses inv_freq / k, query at i + W(k-1)
  int64_t group = 1;              // Self-Extend G
  double logn_train_len = 0;      // q *= max(1, ln(i+1)/ln L)
  int norm = 0;                   // 0 none, 1 key, 2 query, 3 cos
  double cos_n = 0;               // CosA n (0: i+1)
  int64_t attn_window = 0;        // visible iff i-m < attn_window or m < attn_sinks (0 = all)
  int64_t attn_sinks = 0;
  double scale = 0;               // 0: 1/sqrt(d) (no norm) or 1 (norms)
  double alibi_max_bias = 0;      // ggml slopes
  double softcap = 0;             // > 0: score = softcap·tanh(score/softcap) before bias and mask (Gemma 2)
  // gpt-oss (transformers' eager_attention_forward): per head h, a sink logit
  // column joins the masked scores, the softmax runs over both, and the sink's
  // column is dropped before P·V.  Empty = none; -inf = a sink that weighs nothing.
  std::vector<double> sink_logits;
  std::string describe() const;
};

// q [n_q][H][d], k/v [n_k][Hkv][d] raw; positions absolute.  Returns out [n_q][H][d].
std::vector<double> attention_reference(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, const std::vector<int64_t>& q_pos,
                                        const std::vector<int64_t>& k_pos, int H, int Hkv, int d,
                                        const RefScheme& s);

}  // namespace reach::test
