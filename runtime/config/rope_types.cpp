// The rope-type table (runtime/config/rope_types.hpp).
#include "runtime/config/rope_types.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace reach {

namespace {

using P = RopeParam;

constexpr RopeTypeInfo kTypes[] = {
    {RopeType::default_, "default", nullptr, true, 0},
    {RopeType::none_, "none", nullptr, false, 0},
    {RopeType::linear, "linear", nullptr, true, uint32_t(P::factor)},
    {RopeType::dynamic, "dynamic", nullptr, true, P::factor | P::original_ctx},
    {RopeType::yarn, "yarn", nullptr, true, P::factor | P::original_ctx | P::yarn},
    {RopeType::llama3, "llama3", nullptr, true, P::factor | P::original_ctx | P::llama3},
    {RopeType::longrope, "longrope", nullptr, true, P::factor | P::original_ctx | P::longrope},
    {RopeType::ntk, "ntk", nullptr, false, uint32_t(P::factor)},
    {RopeType::rerope, "rerope", nullptr, false, uint32_t(P::rerope_window)},
    {RopeType::leaky_rerope, "leaky_rerope", "leaky-rerope", false, P::rerope_window | P::leaky_k},
    {RopeType::self_extend, "self_extend", "self-extend", false, P::se_group | P::se_window},
};

// Hugging Face / other implementations' types reach does not run.
constexpr const char* kUnsupported[] = {"mrope", "deepseek_yarn", "proportional"};

struct ParamKeys {
  RopeParam param;
  const char* keys[6];   // unused slots nullptr
};
constexpr ParamKeys kParamKeys[] = {
    {P::factor, {"factor"}},
    {P::original_ctx, {"original_max_position_embeddings"}},
    {P::rerope_window, {"window"}},
    {P::leaky_k, {"factor"}},
    {P::se_group, {"group"}},
    {P::se_window, {"window"}},
    {P::yarn, {"beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"}},
    {P::llama3, {"low_freq_factor", "high_freq_factor"}},
    {P::longrope, {"short_factor", "long_factor", "attention_factor"}},
};

}  // namespace

std::span<const RopeTypeInfo> rope_types() { return kTypes; }

const RopeTypeInfo& rope_type_info(RopeType type) {
  for (const RopeTypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[0];   // unreachable: every RopeType has a row
}

const char* rope_type_name(RopeType type) { return rope_type_info(type).name; }

const RopeTypeInfo* rope_type_from_config(std::string_view name) {
  if (name == "su") return &rope_type_info(RopeType::longrope);
  for (const RopeTypeInfo& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

const RopeTypeInfo* rope_type_from_flag(std::string_view name) {
  for (const RopeTypeInfo& t : kTypes)
    if (name == t.name || (t.alias && name == t.alias)) return &t;
  return nullptr;
}

bool rope_type_unsupported(std::string_view name) {
  return std::find(std::begin(kUnsupported), std::end(kUnsupported), name) != std::end(kUnsupported);
}

std::string rope_type_names(const char* sep, const std::function<bool(const RopeTypeInfo&)>& pick) {
  std::string out;
  for (const RopeTypeInfo& t : kTypes)
    if (!pick || pick(t)) out += (out.empty() ? "" : sep) + std::string(t.name);
  return out;
}

std::vector<const char*> rope_param_keys(uint32_t params) {
  std::vector<const char*> out;
  for (const ParamKeys& pk : kParamKeys)
    if (params & uint32_t(pk.param))
      for (const char* k : pk.keys)
        if (k && std::none_of(out.begin(), out.end(), [&](const char* o) { return std::strcmp(o, k) == 0; }))
          out.push_back(k);
  return out;
}

}  // namespace reach
