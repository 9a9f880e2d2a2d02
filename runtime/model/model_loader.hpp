#pragma once
// Model::load's internals: the weights of a model file format seen through one
// interface (WeightSource), and the loader that checks, converts, quantizes and
// uploads them (model_loader.cpp).  Formats: model.cpp (safetensors directory),
// model_gguf.cpp (GGUF file).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/transfer.hpp"
#include "runtime/config/tensor_names.hpp"
#include "runtime/model/model.hpp"

namespace reach {

// One tensor as the file holds it: a view of its bytes (valid while the source lives).
struct SourceTensor {
  std::string name;                  // the file's name for it
  WType type = WType::f32;           // f32 / f16 / bf16, or a GGML block type
  std::vector<int64_t> shape;        // row-major
  const std::byte* data = nullptr;
  uint64_t nbytes = 0;
  std::filesystem::path file;        // for messages
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual std::string name(Role role, int64_t layer) const = 0;
  virtual bool has(const std::string& name) const = 0;
  // Throws format naming the tensor and file when it is missing, has another shape or a type reach cannot read.
  virtual SourceTensor get(const std::string& name, std::initializer_list<int64_t> shape,
                           const std::string& why) const = 0;
  virtual uint64_t total_bytes() const = 0;   // progress total
  virtual uint64_t n_params() const = 0;
  // llama.cpp's GGUF files hold q/k rows in interleaved-pair rotary order: the loader moves them back.
  virtual bool interleaved_rotary_rows() const = 0;
  // The float type all float matrices become (safetensors: the embedding's); nullopt keeps each one's own.
  virtual std::optional<WType> float_type() const = 0;
  virtual std::string where() const = 0;      // the directory or file, for messages
  // One expert's own tensor (role expert_gate / expert_up / expert_down) where the format has such a layout
  // (transformers 4's per-expert tensors); empty where experts only come as 3-D tensors (GGUF).
  virtual std::string expert_name(Role, int64_t /*layer*/, int64_t /*expert*/) const { return {}; }
  // A tensor of raw bytes (safetensors U8: gpt-oss's MXFP4 *_blocks / *_scales), type left f32 and unused;
  // throws format / unsupported naming it where the format has no such tensors or its dtype is not U8.
  virtual SourceTensor get_u8(const std::string& name, std::initializer_list<int64_t> shape,
                              const std::string& why) const {
    (void)shape;
    throw Error(ErrorCode::unsupported, "tensor " + name + " in " + where() + ": raw byte tensors are read from "
                                        "safetensors only (" + why + ")");
  }
};

class ModelLoader {
 public:
  // Builds every weight of `m` (whose config is set) from `src`: a dry run first checks each tensor's name,
  // shape and type and sums the device bytes (refused before anything is uploaded when they do not fit), then
  // the real run uploads.  `why` says where the expected shapes come from.
  static void build(Model& m, const WeightSource& src, const LoadOptions& opt, const std::string& why);

  // Format flows (model.cpp, model_gguf.cpp): config, tokenizer, then build().
  static void load_safetensors(Model& m, const std::filesystem::path& dir, const LoadOptions& opt);
  static void load_gguf(Model& m, const std::filesystem::path& file, const LoadOptions& opt);

  // Rows of a [rows, row_bytes] q/k matrix (or bias: row_bytes = element size) back from llama.cpp's
  // interleaved-pair order to the half-split order reach's rotary embedding reads: within each head of
  // head_dim rows, the first rotary_dim rows.  Whole rows move, so block types are unaffected.
  // Rows of a q/k matrix (or bias / norm) moved for kernel_rotary_dim's padding (runtime/config/
  // position_schemes.hpp): a rotary_dim whose pairs are not a multiple of 4 runs as the next multiple, the
  // extra pairs taken from the head's non-rotating dims.
  static std::vector<std::byte> pad_rotary_rows(const std::byte* src, uint64_t rows, uint64_t row_bytes,
                                                uint64_t heads, uint64_t head_dim, uint64_t rotary_dim);
  static std::vector<std::byte> unpermute_rows(const std::byte* src, uint64_t rows, uint64_t row_bytes,
                                               uint64_t heads, uint64_t head_dim, uint64_t rotary_dim);

 private:
  ModelLoader(Model& m, const WeightSource& src, const LoadOptions& opt, bool dry_run);

  Mat matrix(Role role, int64_t layer, int64_t rows, int64_t cols, const std::string& why, uint64_t heads = 0);
  // A fused matrix (Phi-3's qkv, gate_up) as one matrix per part of `parts` rows each; heads[i] as for matrix().
  std::vector<Mat> matrix_split(Role role, int64_t layer, const std::vector<int64_t>& parts, int64_t cols,
                                const std::string& why, const std::vector<uint64_t>& heads);
  Mat matrix_from(const SourceTensor& t, int64_t rows, int64_t cols, uint64_t heads);
  // A sparse layer's router and experts (moe_weights.cpp), from whichever layout the source holds.
  void moe_layer(LayerWeights& lw, int64_t layer, const std::string& why);
  // The n experts of a 3-D tensor [n, rows_total, cols], each expert's rows [row0, row0 + rows) as a view.
  static std::vector<SourceTensor> experts_of(const SourceTensor& t, int64_t n, int64_t rows_total, int64_t row0,
                                              int64_t rows, int64_t cols);
  // One projection's experts ([rows, cols] each, same type) stacked in one buffer at a fixed stride (a
  // multiple of 256 bytes), for the kernels that read any chosen expert from one binding (ExpertStack).
  std::vector<Mat> stack_experts(const std::vector<SourceTensor>& parts, int64_t rows, int64_t cols);
  Buffer vector_f32(Role role, int64_t layer, int64_t n, const std::string& why, uint64_t heads = 0);
  // n float values of t (f32 / f16 / bf16) as an f32 buffer (biases stacked by expert).
  Buffer floats_f32(const SourceTensor& t, uint64_t n);
  // gpt-oss's router and experts (biased; transformers' transposed, gate / up interleaved layout, or GGUF).
  void gpt_oss_moe_layer(LayerWeights& lw, int64_t layer, const std::string& why);
  void gpt_oss_biases(LayerWeights& lw, const std::string& gate_up, const std::string& down, const std::string& why);
  WType target_type(const SourceTensor& t, int64_t cols);
  // dst_off: where in dst the matrix starts (an expert in its stack).
  void upload_float(const std::byte* src, WType from, uint64_t n, const Buffer& dst, WType to, uint64_t dst_off = 0);
  void upload_quant(const std::byte* blocks, WType t, uint32_t rows, uint32_t cols, const Buffer& dst,
                    uint64_t src_bytes, uint64_t dst_off = 0);
  void upload_quantized(const std::byte* src, WType from, uint32_t rows, uint32_t cols, const Buffer& dst, WType to,
                        uint64_t dst_off = 0);
  const std::byte* rows_in_order(const SourceTensor& t, uint64_t rows, uint64_t heads, std::vector<std::byte>& tmp);
  uint64_t plan(uint64_t bytes);
  void advance(uint64_t bytes);

  Model& m_;
  const WeightSource& src_;
  const LoadOptions& opt_;
  std::unique_ptr<Transfer> transfer_;
  bool dry_ = false;
  uint64_t total_ = 0, done_ = 0, planned_ = 0, tensors_ = 0;
  std::map<WType, uint64_t> matrix_bytes_;
  std::vector<std::string> fallback_q8_, kept_float_;   // quantize-at-load exceptions (names)
  uint64_t quantized_ = 0;
  uint64_t stack_padding_ = 0;   // bytes between stacked experts (stack_experts), planned but not weights
};

}  // namespace reach
