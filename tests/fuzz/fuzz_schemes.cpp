// Scheme flags (runtime/schemes.*, runtime/flag_values.*): parse_scheme_flag
// over arbitrary words, apply_overrides onto one of a few small configs, then
// resolve_schemes, rope_freqs and a few rows of the cos/sin table.
//
// Input: byte 0 picks the config, bytes 1-2 the context (little-endian, + 1);
// the rest is split at whitespace into words, as the C API's scheme_flags is.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/config/position_schemes.hpp"

namespace {

// 4 layers, head_dim 16, trained context 256; each with another scheme in config.json.
constexpr const char* kBase = R"({
  "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
  "rope_theta": 10000.0, "max_position_embeddings": 256, "vocab_size": 100})";
constexpr const char* kExtras[] = {
    "{}",
    R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}})",
    R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})",
    R"({"rope_scaling": {"rope_type": "leaky_rerope", "window": 32, "factor": 2.0}})",
    R"({"rope_scaling": {"rope_type": "self_extend", "window": 32, "group": 4}})",
    R"({"reach_attention": {"logn_train_len": 256, "qk_norm": "cos", "window": 16, "sinks": 2,
        "layers": {"3": {"window": 0, "rope": false, "logn": true}}}})",
    R"({"sliding_window": 64, "partial_rotary_factor": 0.5, "head_dim": 16})",
};
constexpr size_t kCount = sizeof kExtras / sizeof kExtras[0];

const std::vector<reach::ModelConfig>& configs() {
  static const std::vector<reach::ModelConfig> all = [] {
    std::vector<reach::ModelConfig> v;
    for (const char* extra : kExtras) {
      nlohmann::json j = nlohmann::json::parse(kBase);
      j.update(nlohmann::json::parse(extra));
      v.push_back(reach::parse_model_config(j, "fuzz/config.json"));   // throws: a setup error
    }
    return v;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)configs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  reach::ModelConfig cfg = configs()[data[0] % kCount];
  const uint32_t context = (static_cast<uint32_t>(data[1]) | static_cast<uint32_t>(data[2]) << 8) + 1;
  std::vector<std::string> args;
  std::string word;
  for (size_t k = 3; k <= size; ++k) {
    const char c = k < size ? static_cast<char>(data[k]) : ' ';
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      if (!word.empty()) args.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  try {
    reach::SchemeOverrides o;
    for (size_t i = 0; i < args.size(); ++i) (void)reach::parse_scheme_flag(args, i, o);   // others ignored
    (void)o.describe();
    reach::apply_overrides(cfg, o);
    const reach::ResolvedSchemes r = reach::resolve_schemes(cfg, context, static_cast<int64_t>(context) * 2);
    if (r.layers.size() != static_cast<size_t>(cfg.n_layers)) __builtin_trap();
    (void)r.describe();
    for (const reach::RopeFreqs* f : {&r.table1, r.table2 ? &*r.table2 : nullptr}) {
      if (!f) continue;
      const uint32_t pairs = static_cast<uint32_t>(f->inv_freq.size());
      const uint32_t rows = std::min<uint32_t>(context, 64);
      std::vector<float> table(static_cast<size_t>(rows) * pairs * 2);
      reach::fill_rope_table(*f, rows, pairs, table.data());
    }
  } catch (const reach::Error&) {
    // A flag or combination refused with a message naming it.
  }
  return 0;
}
