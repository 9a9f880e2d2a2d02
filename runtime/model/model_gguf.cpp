// Model::load from a llama.cpp GGUF file: config from the llama.* metadata,
// tokenizer from tokenizer.ggml.*, weights by llama.cpp's tensor names.  Block
// types (q8_0 ... q6_k) stay as the file holds them; q/k rows go back from
// llama.cpp's interleaved rotary pairs to the half-split order (ModelLoader).
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "runtime/config/gguf_config.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/model/model_loader.hpp"

namespace reach {

namespace fs = std::filesystem;

namespace {

WType wtype_of(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return WType::f32;
    case GgmlType::f16: return WType::f16;
    case GgmlType::bf16: return WType::bf16;
    case GgmlType::q8_0: return WType::q8_0;
    case GgmlType::q4_0: return WType::q4_0;
    case GgmlType::q4_1: return WType::q4_1;
    case GgmlType::q5_0: return WType::q5_0;
    case GgmlType::q5_1: return WType::q5_1;
    case GgmlType::q4_k: return WType::q4_k;
    case GgmlType::q5_k: return WType::q5_k;
    case GgmlType::q6_k: return WType::q6_k;
    case GgmlType::mxfp4: return WType::mxfp4;
  }
  return WType::f32;   // unreachable: GgufFile::open refuses other ids
}

class GgufSource : public WeightSource {
 public:
  // interleaved: llama.cpp permuted q/k rows (llama); it leaves Gemma's (NeoX rotation) as they are.
  // mlp_norm_after_attention: gpt-oss, whose MLP norm llama.cpp files as post_attention_norm.
  GgufSource(const GgufFile& f, bool interleaved, bool mlp_norm_after_attention)
      : f_(f), interleaved_(interleaved), mlp_norm_after_attention_(mlp_norm_after_attention) {}

  std::string name(Role role, int64_t layer) const override {
    if (role == Role::mlp_norm && mlp_norm_after_attention_) role = Role::post_attn_norm;
    return gguf_tensor_name(role, layer);
  }
  bool has(const std::string& name) const override { return f_.find_tensor(name) != nullptr; }

  SourceTensor get(const std::string& name, std::initializer_list<int64_t> shape,
                   const std::string& why) const override {
    const GgufTensor* t = f_.find_tensor(name);
    if (!t) f_.fail("tensor '" + name + "' is missing (" + why + "); is the file complete, and a llama model?");
    const std::vector<int64_t> got = t->shape();
    if (!std::equal(got.begin(), got.end(), shape.begin(), shape.end())) {
      std::string want;
      auto dims = [](auto&& ds) {
        std::string out;
        for (int64_t d : ds) {
          if (!out.empty()) out += ", ";
          out += std::to_string(d);
        }
        return out;
      };
      want = dims(shape);
      const std::string have = dims(got);
      f_.fail("tensor '" + name + "' has shape [" + have + "] (ggml ne " + t->ne_string() + "), expected [" + want +
              "] (" + why + ")");
    }
    return SourceTensor{t->name, wtype_of(t->type), got, t->data, t->nbytes, f_.path()};
  }

  uint64_t total_bytes() const override {
    uint64_t n = 0;
    for (const auto& t : f_.tensors()) n += t.nbytes;
    return n;
  }
  uint64_t n_params() const override {
    uint64_t n = 0;
    for (const auto& t : f_.tensors()) n += uint64_t(t.numel());
    return n;
  }
  bool interleaved_rotary_rows() const override { return interleaved_; }
  std::optional<WType> float_type() const override { return std::nullopt; }
  std::string where() const override { return f_.path().string(); }

 private:
  const GgufFile& f_;
  bool interleaved_;
  bool mlp_norm_after_attention_;
};

}  // namespace

void ModelLoader::load_gguf(Model& m, const fs::path& path, const LoadOptions& options) {
  const GgufFile f = GgufFile::open(path);
  if (const std::optional<uint64_t> splits = f.opt_u64("split.count"); splits && *splits > 1)
    throw Error(ErrorCode::unsupported, "gguf (" + path.string() + "): key 'split.count' is " +
                                            std::to_string(*splits) + ": reach reads single-file GGUFs; merge the "
                                            "parts first (llama-gguf-split --merge FIRST_PART OUT.gguf)");
  m.config_ = model_config_from_gguf(f);
  const ModelConfig& c = m.config_;

  // Without require_tokenizer (token ids only), a missing tokenizer, or one reach cannot build yet, does not
  // stop the load; a malformed one still does, as a malformed tokenizer.json does.
  if (options.require_tokenizer || f.has("tokenizer.ggml.model")) try {
    m.tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(f));
  } catch (const Error& e) {
    if (options.require_tokenizer || e.code() != ErrorCode::unsupported) throw;
  }

  const std::string why = "the metadata says " + std::string(f.get_string("general.architecture")) +
                          ".embedding_length=" + std::to_string(c.hidden_size) +
                          ", feed_forward_length=" + std::to_string(c.intermediate_size) +
                          ", vocabulary " + std::to_string(c.vocab_size) + ", heads " + std::to_string(c.n_heads) +
                          "x" + std::to_string(c.head_dim) + ", kv heads " + std::to_string(c.n_kv_heads);
  build(m, GgufSource(f, c.interleaved_qk_rows, c.arch == ModelArch::gpt_oss), options, why);
}

}  // namespace reach
