#pragma once
// A Hugging Face Llama-family folder (config.json, *.safetensors,
// tokenizer.json) written as a llama-architecture GGUF, as llama.cpp's
// converter writes one: llama.* metadata that model_config_from_gguf reads
// back to the same ModelConfig, the tokenizer's tokenizer.ggml.* keys, and
// the tensors under llama.cpp's names with q/k rows permuted into its
// interleaved rotary layout.  Weight matrices take the asked type; a matrix
// whose rows do not split into that type's blocks falls back to q8_0 (rows of
// 32s) or f16, reported as a note; norms and biases stay f32.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/progress.hpp"
#include "base/wtype.hpp"

namespace reach {

struct QuantizeModelOptions {
  WType type = WType::q8_0;   // f32, f16, q8_0, q4_0 or q4_k
  unsigned threads = 0;       // quantize_matrix threads; 0: the hardware's count
  ProgressFn on_progress;     // tensor bytes written / total; false cancels
  std::function<void(const std::string&)> on_note;   // fallbacks and other remarks, one line each
};

struct QuantizeModelSummary {
  uint64_t tensors = 0, bytes = 0, params = 0;
  std::vector<std::pair<std::string, WType>> types;   // per tensor, in file order (GGUF names)
};

// The types quantize_model writes: f32, f16, q8_0, q4_0, q4_k.
bool quantize_model_supported(WType t);

// Writes `out` (to a temporary name, renamed when complete).  Errors name the
// input file or key at fault: io (missing files, unwritable out), format,
// unsupported (a type it does not write; a config a llama GGUF cannot express:
// rope types other than default / linear / yarn, partial rotary, sliding
// windows, reach_attention).
QuantizeModelSummary quantize_model(const std::filesystem::path& in_dir, const std::filesystem::path& out,
                                    const QuantizeModelOptions& options);

// llama.cpp's q/k row permutation (convert_hf_to_gguf.py's permute): within
// each of `n_heads` heads of `rows / n_heads` rows, row s * half + i (HF's
// rotate-half layout) moves to 2 * i + s (interleaved pairs).  `cols` values per row.
void permute_rotary_rows(const float* in, float* out, int64_t rows, int64_t cols, int64_t n_heads);

}  // namespace reach
