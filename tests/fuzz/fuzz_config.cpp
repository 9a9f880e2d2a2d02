// config.json (runtime/model_config.*): load_model_config on arbitrary bytes;
// a config that loads is described and its position schemes resolved, as a
// Session would before allocating anything.
#include <algorithm>

#include "base/error.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/config/position_schemes.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static reach::fuzz::MemFile file("config.json");
  try {
    const reach::ModelConfig cfg = reach::load_model_config(file.write(data, size));
    (void)cfg.describe();
    // resolve_schemes sizes host vectors from these; Model::load bounds them by the
    // weights first on every user path (crashes/README.md), this direct call does not.
    if (reach::fuzz::skip_open_findings() && (cfg.n_layers > 4096 || cfg.head_dim > 4096)) return 0;
    const auto context = static_cast<uint32_t>(std::clamp<int64_t>(cfg.max_position_embeddings, 1, 4096));
    const reach::ResolvedSchemes r = reach::resolve_schemes(cfg, context, 0);
    if (r.layers.size() != static_cast<size_t>(cfg.n_layers)) __builtin_trap();
    (void)r.describe();
  } catch (const reach::Error&) {
    // Rejected with a message naming the key: what a hostile config should get.
  }
  return 0;
}
