#pragma once
// A Llama-family model on the device: config, tokenizer and weights uploaded
// from a Hugging Face style directory (config.json, *.safetensors, tokenizer.json).
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "engine/memory.hpp"
#include "runtime/model_config.hpp"
#include "runtime/progress.hpp"
#include "runtime/tokenizer.hpp"

namespace reach {

class Device;

struct LayerWeights {
  Mat q, k, v, o, gate, up, down;
  Buffer q_bias, k_bias, v_bias, o_bias;   // f32, empty when absent
  Buffer attn_norm, mlp_norm;              // f32 [hidden]
};

struct LoadOptions {
  bool require_tokenizer = true;   // false: token ids only (eval --tokens)
  // Weight bytes uploaded and the total, after each piece; return false to cancel the load.
  ProgressFn on_progress;
  std::optional<WType> weight_type;   // convert weights; default keeps the file's dtype when the device can read it
  // Quantize the weight matrices of a safetensors model at load (q8_0, q4_0, q4_k: runtime/quantize.hpp).
  std::optional<WType> quantize;
};

class Model {
 public:
  static std::unique_ptr<Model> load(Device& device, Allocator& allocator, const std::filesystem::path& dir,
                                     const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const Tokenizer* tokenizer() const { return tokenizer_ ? tokenizer_.get() : nullptr; }
  const std::filesystem::path& dir() const { return dir_; }
  WType weight_type() const { return wtype_; }
  uint64_t n_params() const { return n_params_; }
  uint64_t weight_bytes() const { return weight_bytes_; }

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
