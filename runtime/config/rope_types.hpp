#pragma once
// The rope types reach knows (docs EXTRAPOLATION.md §1.4, §2, §3), in one
// table: each type's name, its other accepted spelling, whether Hugging Face
// defines it, and the parameters it takes.  The config.json parser, the
// --rope-scaling flag and its help, the override rules and `reach eval` all
// read this table instead of listing names themselves.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reach {

enum class RopeType { none_, default_, linear, dynamic, yarn, llama3, longrope, ntk, rerope, leaky_rerope, self_extend };

// The parameters of a rope type, as bits of RopeTypeInfo::params.
enum class RopeParam : uint32_t {
  factor = 1u << 0,         // scaling factor s: "factor", --rope-factor
  original_ctx = 1u << 1,   // trained context: "original_max_position_embeddings", --original-ctx
  rerope_window = 1u << 2,  // ReRoPE window w: "window", --rerope-window
  leaky_k = 1u << 3,        // Leaky ReRoPE slope divisor k: "factor", --leaky-k
  se_group = 1u << 4,       // Self-Extend group G: "group", --self-extend-group
  se_window = 1u << 5,      // Self-Extend neighbour window W: "window", --self-extend-window
  yarn = 1u << 6,           // beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim, truncate
  llama3 = 1u << 7,         // low_freq_factor, high_freq_factor
  longrope = 1u << 8,       // short_factor, long_factor, attention_factor (the model's own per-pair factors)
};
constexpr uint32_t operator|(RopeParam a, RopeParam b) { return uint32_t(a) | uint32_t(b); }
constexpr uint32_t operator|(uint32_t a, RopeParam b) { return a | uint32_t(b); }

struct RopeTypeInfo {
  RopeType type;
  const char* name;      // config.json "rope_type" (Hugging Face's spelling for its types) and --rope-scaling
  const char* alias;     // another --rope-scaling spelling ("leaky-rerope"), or nullptr
  bool hf;               // a Hugging Face type: takes HF's common keys and tolerates unknown ones
  uint32_t params;       // RopeParam bits
  bool takes(RopeParam p) const { return (params & uint32_t(p)) != 0; }
};

// Every type, in the order names are listed: default, none, linear, dynamic,
// yarn, llama3, longrope, ntk, rerope, leaky_rerope, self_extend.
std::span<const RopeTypeInfo> rope_types();
const RopeTypeInfo& rope_type_info(RopeType type);
const char* rope_type_name(RopeType type);   // "default", "yarn", "leaky_rerope", ...

// config.json's rope_type / type: the name exactly ("su", Phi-3's first name for longrope, too);
// nullptr when unknown.
const RopeTypeInfo* rope_type_from_config(std::string_view name);
// --rope-scaling and eval: the name or its alias; nullptr when unknown.
const RopeTypeInfo* rope_type_from_flag(std::string_view name);
// Types of other implementations reach recognises but does not run (longrope, ...).
bool rope_type_unsupported(std::string_view name);

// The names of the types `pick` accepts (all when empty), joined by `sep`.
std::string rope_type_names(const char* sep, const std::function<bool(const RopeTypeInfo&)>& pick = {});

// The config.json keys of the parameters in `params` (bit order; a key once), e.g. "window", "factor".
std::vector<const char*> rope_param_keys(uint32_t params);

}  // namespace reach
