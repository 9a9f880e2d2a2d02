#pragma once
// A Llama-family model on the device: config, tokenizer and weights uploaded
// from a Hugging Face style directory (config.json, *.safetensors, tokenizer.json)
// or from a llama.cpp GGUF file (quantized matrices stay quantized on the device).
#include <cstdint>
#include <map>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/progress.hpp"
#include "engine/memory.hpp"
#include "kernels/kernels.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach {

class Device;

struct LayerWeights {
  Mat q, k, v, o, gate, up, down;
  Buffer q_bias, k_bias, v_bias, o_bias;   // f32, empty when absent
  Buffer attn_norm, mlp_norm;              // f32 [hidden]
  // Gemma 3 (empty otherwise): norms after attention and after the MLP (f32 [hidden]) and the per-head q / k
  // norms (f32 [head_dim]); every norm weight already holds the multiplier (1 + w for Gemma).
  Buffer post_attn_norm, post_mlp_norm, q_norm, k_norm;
  // Mixture of experts (a sparse layer; gate / up / down stay empty): the router [n_experts, hidden] and one
  // gate, up [expert_ffn, hidden] and down [hidden, expert_ffn] per expert.
  Mat router;
  std::vector<Mat> expert_gate, expert_up, expert_down;
  // gpt-oss (empty otherwise), f32: the router's bias [n_experts], the experts' biases stacked by expert
  // ([n_experts, expert_ffn] for gate and up, [n_experts, hidden] for down), and the learned per-head sink
  // logit [n_heads] that joins every attention softmax's denominator.
  Buffer router_bias, expert_gate_bias, expert_up_bias, expert_down_bias;
  Buffer attn_sinks;
  bool moe() const { return !expert_down.empty(); }
};

struct LoadOptions {
  bool require_tokenizer = true;   // false: token ids only (eval --tokens)
  // Weight bytes uploaded and the total, after each piece; return false to cancel the load.
  ProgressFn on_progress;
  // Convert the float weight matrices (f32/f16/bf16); default keeps the file's dtype when the device can read
  // it.  Quantized matrices (GGUF) keep their block type.
  std::optional<WType> weight_type;
  // Quantize the float weight matrices at load (q8_0, q4_0, q4_k: runtime/quant/quantize.hpp).  A matrix whose rows
  // are not a multiple of the type's block gets q8_0 (32-element blocks), or stays float when not even that
  // fits; Model::load_note() says which.  Norms and biases stay f32; GGUF blocks are kept as they are.
  std::optional<WType> quantize;
};

// What a model path names: a Hugging Face style directory (config.json, *.safetensors), or a GGUF file,
// given directly or as the only .gguf in a directory without config.json.
struct ModelPath {
  std::filesystem::path path;   // the directory, or the .gguf file
  bool gguf = false;
};
// Throws io (missing path) / invalid_argument (several .gguf files, a lone .safetensors file, ...) naming it.
ModelPath resolve_model_path(const std::filesystem::path& path);
// The model's config (config.json, or the GGUF's metadata) without loading weights.
ModelConfig load_model_config_at(const ModelPath& model);
// The model's tokenizer (tokenizer.json, or the GGUF's tokenizer.ggml.* metadata).
Tokenizer load_tokenizer_at(const ModelPath& model);

class Model {
 public:
  // `path`: a model directory, a .gguf file, or a directory holding one .gguf (resolve_model_path).
  static std::unique_ptr<Model> load(Device& device, Allocator& allocator, const std::filesystem::path& path,
                                     const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const Tokenizer* tokenizer() const { return tokenizer_ ? tokenizer_.get() : nullptr; }
  // The model's path: its directory, or its .gguf file.
  const std::filesystem::path& dir() const { return dir_; }
  bool is_gguf() const { return gguf_; }
  // The type of the weight matrices holding the most bytes.
  WType weight_type() const { return wtype_; }
  // Every weight-matrix type, most bytes first, joined by '+': "q4_1+q8_0" for a GGUF whose layers are
  // Q4_1 and whose embedding is Q8_0, "f16" for a plain f16 model.  Norms and biases (always f32) are not
  // listed.
  std::string weight_types() const;
  // Device bytes of the weight matrices per type.
  const std::map<WType, uint64_t>& matrix_bytes() const { return matrix_bytes_; }
  // One line on what loading changed (quantize-at-load fallbacks); empty when nothing to say.
  const std::string& load_note() const { return load_note_; }
  uint64_t n_params() const { return n_params_; }
  // Device bytes of all weights (matrices, norms, biases).  For a GGUF whose types the device keeps, the sum
  // of the file's tensor bytes.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Weight-matrix bytes one decoded token reads: every layer's attention and dense MLP matrices, a sparse
  // layer's router and, of its experts, the experts_per_token the router picks (their average size), the
  // lm_head and one embedding row.  For a dense model about the matrices' total; for a mixture of experts what
  // decode speed follows.
  uint64_t bytes_per_token() const;

  const Mat& embed() const { return embed_; }
  const Mat& lm_head() const { return lm_head_; }
  const Buffer& final_norm() const { return final_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  Device& device() const { return device_; }
  Allocator& allocator() const { return allocator_; }

  // End-of-sequence ids (config.json, else the tokenizer's).
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }

 private:
  Model(Device& d, Allocator& a) : device_(d), allocator_(a) {}
  Device& device_;
  Allocator& allocator_;
  std::filesystem::path dir_;
  bool gguf_ = false;
  std::map<WType, uint64_t> matrix_bytes_;
  std::string load_note_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  WType wtype_ = WType::f32;
  std::deque<Buffer> storage_;    // one buffer per weight matrix (stable addresses for Mat)
  Mat embed_, lm_head_;
  Buffer final_norm_;
  std::vector<LayerWeights> layers_;
  std::vector<int32_t> eos_ids_;
  std::optional<int32_t> bos_id_;
  uint64_t n_params_ = 0, weight_bytes_ = 0;

  friend class ModelLoader;
};

}  // namespace reach
