#pragma once
// Position schemes resolved on the host: config.json + CLI overrides ->
// per-layer AttentionSpecs and cos/sin tables (docs EXTRAPOLATION.md §1-§4,
// §6).  No GPU here.  The semantics follow the float64 oracle
// tools/refmodel (rope.py rope_parameters, model.py layer_schemes) and the
// override rules of tools/reference_forward.py.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/attention_spec.hpp"
#include "runtime/config/model_config.hpp"

namespace reach {

// CLI flags (all optional):
//   --rope-scaling TYPE --rope-factor S --original-ctx N --rerope-window W --leaky-k K
//   --self-extend-group G --self-extend-window W --logn L --qk-norm MODE --cos-n N
//   --attn-window W --attn-sinks S
struct SchemeOverrides {
  std::optional<std::string> rope_scaling;   // a rope type's name or alias (runtime/config/rope_types.hpp)
  std::optional<double> rope_factor;
  std::optional<int64_t> original_ctx;
  std::optional<int64_t> rerope_window;
  std::optional<double> leaky_k;
  std::optional<int64_t> se_group, se_window;
  std::optional<int64_t> logn;               // logn_train_len; 0 = off
  std::optional<std::string> qk_norm;        // a QkNorm name (base/attention_spec.hpp)
  std::optional<double> cos_n;
  std::optional<int64_t> attn_window, attn_sinks;
  bool empty() const;
  std::string describe() const;              // the flags as given, e.g. "--rope-scaling yarn --rope-factor 4"
};

// Consumes one scheme flag at args[i] ("--flag VALUE" or "--flag=VALUE") and
// returns true, leaving i on the last element consumed (the value), like
// the CLI's value_of: the caller's loop does ++i.  Returns false (i
// unchanged) when args[i] is not a scheme flag.  Throws
// Error(invalid_argument) naming the flag on a missing or bad value.
bool parse_scheme_flag(const std::vector<std::string>& args, size_t& i, SchemeOverrides& out);
std::string scheme_flags_help();   // lines for --help, each ending in '\n'

// Applies the overrides to cfg.rope / cfg.attn with the same rules as
// tools/reference_forward.py: --rope-scaling TYPE replaces rope_scaling by
// {"rope_type": TYPE, ...flags} (llama3 keeps low/high_freq_factor and the
// original context from the config, else 1 / 4 / max_position_embeddings);
// without --rope-scaling, --rerope-window implies rerope (leaky_rerope with
// --leaky-k) and --self-extend-group/-window imply self_extend unless the
// config already has that family; other flags overlay the config's values.
// The result is validated by parse_rope_scaling / parse_reach_attention, so
// the rules are those of config.json; errors are Error(invalid_argument)
// (unsupported for unknown types) naming the flags.  Flags that do not apply
// to the resulting scheme (e.g. --leaky-k with yarn) are rejected.
void apply_overrides(ModelConfig& cfg, const SchemeOverrides& o);

struct RopeFreqs {
  std::vector<double> inv_freq;   // rotary_dim/2 entries
  double attention_factor = 1;    // multiplies cos and sin (logits × af²)
};

// Frequencies for cfg.rope at rotary dim cfg.rotary_dim, base cfg.rope_theta:
// default/none, linear, ntk (base·s^(d/(d−2))), dynamic (HF: L = max(seq_len,
// Lo), base·(s·L/Lo − (s−1))^(d/(d−2)); seq_len <= 0 means Lo), yarn (HF
// rules: floor/ceil unless truncate=false, explicit attention_factor,
// mscale/mscale_all_dim), llama3.  rerope / leaky_rerope / self_extend use the
// default table.  Lo = rope.original_max_position, else max_position_embeddings.
RopeFreqs rope_freqs(const ModelConfig& cfg, int64_t seq_len);
// The same from explicit parameters (d = rotary dim).
RopeFreqs rope_freqs(const RopeScaling& rope, int64_t d, double base, int64_t max_position_embeddings,
                     int64_t seq_len);

// The attention kernels rotate pairs in vec4 groups of four (half-split layout): a rotary_dim whose pair
// count is not a multiple of 4 (Phi-4-mini-like partial rotary on small heads: 16 x 0.75 = 12 dims) runs as
// the next multiple, the extra pairs rotating by angle 0 (identity, no attention factor) over head dims that
// do not rotate; the loader moves those dims into place (ModelLoader's rows_in_order).  q·k is unchanged:
// q and k get the same permutation of each head's dims.
int64_t kernel_rotary_dim(int64_t rotary_dim);

struct ResolvedSchemes {
  std::vector<AttentionSpec> layers;   // one per layer
  RopeFreqs table1;                    // branch 1 (and every rotated cache)
  std::optional<RopeFreqs> table2;     // Leaky ReRoPE branch 2: θ/k, af 1
  // Models with local (sliding-window) layers, e.g. Gemma 3: local[i] marks one; they rotate with
  // table_local (base rope_local_theta, never scaled) and keep the model's own window and scale.  Every
  // position scheme (rope scaling, ReRoPE, Self-Extend, log n, qk norm, window flags) acts on the global
  // layers only: the local layers never see a distance beyond their window.
  std::vector<bool> local;
  std::optional<RopeFreqs> table_local;
  uint32_t table_pairs = 0;            // pairs every table holds: kernel_rotary_dim / 2 (>= inv_freq.size())
  uint32_t table1_positions = 0;       // rows each table needs for the context
  uint32_t table2_positions = 0;
  double softcap = 0;                  // attention logit cap of every layer (Gemma 2), 0 = none
  RopeScaling rope;                    // the scheme these were resolved from
  int64_t l_test = 0;                  // length fed to a length-dependent table (dynamic)
  std::string describe() const;        // what `reach run -v` prints
};

// context: KV-cache positions (>= 1).  l_test: dynamic NTK's "local static"
// length (prompt + max new tokens); <= 0 means `context`.  Throws
// Error(invalid_argument / unsupported) for combinations the kernels cannot
// express (per-layer logn without logn_train_len, a non-integer Leaky shift
// w(k−1), ALiBi together with a rope_scaling, ...).
ResolvedSchemes resolve_schemes(const ModelConfig& cfg, uint32_t context, int64_t l_test);

// out[(p·pairs + j)·2 + {0,1}] = (cos, sin)(p·inv_freq[j])·attention_factor
// for p < positions, j < pairs; angles in double.  Pairs from inv_freq.size() on are (1, 0): the identity
// pairs of kernel_rotary_dim's padding.
void fill_rope_table(const RopeFreqs& f, uint32_t positions, uint32_t pairs, float* out);
// Rows [first, first + count) of the same table into out (count·pairs·2 floats),
// so a large table can be built a piece at a time.
void fill_rope_rows(const RopeFreqs& f, uint32_t first, uint32_t count, uint32_t pairs, float* out);
// The whole table (all pairs), as a Session uploads it.
std::vector<float> rope_table(const RopeFreqs& f, uint32_t positions);

}  // namespace reach
