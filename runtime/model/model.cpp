// Model::load: the model path, the safetensors flow and the description of the weight types.
#include "runtime/model/model.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "base/error.hpp"
#include "runtime/config/gguf_config.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/formats/safetensors.hpp"
#include "runtime/model/model_loader.hpp"
#include "runtime/quant/quantize.hpp"

namespace reach {

namespace fs = std::filesystem;

namespace {

// How many layers the weights hold: the first index i from 0 with no tensor
// named model.layers.<i>.*.
int64_t layers_in_weights(const ModelWeights& w) {
  const std::string prefix = hf_naming_of([&](const std::string& n) { return w.find(n) != nullptr; }).model + "layers.";
  std::set<int64_t> seen;
  for (const auto& name : w.names()) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    int64_t idx = 0;
    size_t i = prefix.size(), digits = 0;
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && digits < 10; ++i, ++digits)
      idx = idx * 10 + (name[i] - '0');
    if (digits > 0 && digits < 10 && i < name.size() && name[i] == '.') seen.insert(idx);
  }
  int64_t n = 0;
  while (seen.count(n)) ++n;
  return n;
}

// The tensors of a safetensors directory, by their Hugging Face names.
class SafetensorsSource : public WeightSource {
 public:
  SafetensorsSource(const ModelWeights& w, const ModelConfig& c) : w_(w) {
    // Gemma 3's multimodal checkpoints keep the language model under a prefix.
    naming_ = hf_naming_of([&](const std::string& n) { return w.find(n) != nullptr; });
    naming_.gemma = c.arch == ModelArch::gemma3 || c.arch == ModelArch::gemma2;
    // Mixtral under transformers 4 keeps its experts in block_sparse_moe.
    if (c.arch == ModelArch::mixtral && !w.find(naming_.model + "layers.0.mlp.gate.weight")) naming_.moe_block = "block_sparse_moe";
    // Float matrices take the embedding's type (16-bit files stay 16-bit).
    const TensorInfo& probe = w.get(hf_tensor_name(Role::embed, 0, naming_));
    if (probe.dtype == DType::F16) float_type_ = WType::f16;
    if (probe.dtype == DType::BF16) float_type_ = WType::bf16;
  }
  std::string name(Role role, int64_t layer) const override { return hf_tensor_name(role, layer, naming_); }
  std::string expert_name(Role role, int64_t layer, int64_t expert) const override {
    return hf_expert_tensor_name(role, layer, expert, naming_);
  }
  bool has(const std::string& name) const override { return w_.find(name) != nullptr; }
  SourceTensor get(const std::string& name, std::initializer_list<int64_t> shape,
                   const std::string& why) const override {
    const TensorInfo& t = w_.get(name, shape, why);
    SourceTensor s{t.name, WType::f32, t.shape, t.data, t.nbytes, t.file};
    switch (t.dtype) {
      case DType::F32: s.type = WType::f32; break;
      case DType::F16: s.type = WType::f16; break;
      case DType::BF16: s.type = WType::bf16; break;
      default:
        throw Error(ErrorCode::unsupported, "tensor " + t.name + " in " + t.file.string() + " has dtype " +
                                                dtype_name(t.dtype) + "; reach reads F32, F16 and BF16 weights: "
                                                "convert the checkpoint (e.g. save it with torch_dtype=float16)");
    }
    return s;
  }
  SourceTensor get_u8(const std::string& name, std::initializer_list<int64_t> shape,
                      const std::string& why) const override {
    const TensorInfo& t = w_.get(name, shape, why);
    if (t.dtype != DType::U8)
      throw Error(ErrorCode::format, "tensor " + t.name + " in " + t.file.string() + " has dtype " +
                                         dtype_name(t.dtype) + " where MXFP4 blocks and scales are U8 (" + why + ")");
    return SourceTensor{t.name, WType::f32, t.shape, t.data, t.nbytes, t.file};
  }
  uint64_t total_bytes() const override { return w_.total_bytes(); }
  uint64_t n_params() const override {
    uint64_t n = 0;
    for (const auto& name : w_.names()) n += uint64_t(w_.get(name).numel());
    return n;
  }
  bool interleaved_rotary_rows() const override { return false; }
  std::optional<WType> float_type() const override { return float_type_; }
  std::string where() const override { return w_.dir().string(); }

 private:
  const ModelWeights& w_;
  HfNaming naming_;
  std::optional<WType> float_type_ = WType::f32;
};

}  // namespace

void ModelLoader::load_safetensors(Model& m, const fs::path& dir, const LoadOptions& options) {
  m.config_ = load_model_config(dir / "config.json");
  const ModelConfig& c = m.config_;

  if (options.require_tokenizer || fs::exists(dir / "tokenizer.json"))
    m.tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(dir / "tokenizer.json"));

  ModelWeights w = ModelWeights::open_dir(dir);

  // Layers first: num_hidden_layers sizes the layer list, so it must not
  // exceed what the weights hold.
  const int64_t held = layers_in_weights(w);
  if (c.n_layers > held)
    throw Error(ErrorCode::format, "config.json (" + c.source.string() + ") says num_hidden_layers=" +
                                       std::to_string(c.n_layers) + ", but the weights in " + dir.string() +
                                       " hold " + std::to_string(held) + " layer(s) (no tensor 'model.layers." +
                                       std::to_string(held) + ".*') - fix num_hidden_layers, or use the weights "
                                       "that belong to this config.json");

  // The config's sizes are bounded (config.json parsing): the loader's products fit.
  const std::string why = "config.json says hidden_size=" + std::to_string(c.hidden_size) +
                          ", intermediate_size=" + std::to_string(c.intermediate_size) +
                          ", vocab_size=" + std::to_string(c.vocab_size) + ", heads=" + std::to_string(c.n_heads) +
                          "x" + std::to_string(c.head_dim) + ", kv_heads=" + std::to_string(c.n_kv_heads);
  build(m, SafetensorsSource(w, c), options, why);
}

ModelPath resolve_model_path(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() == ".safetensors")
      throw Error(ErrorCode::invalid_argument, "model path " + path.string() + " is one .safetensors file: pass the "
                                                   "directory holding it with config.json and tokenizer.json");
    return {path, true};   // GgufFile::open checks the magic and names the file
  }
  if (!fs::is_directory(path, ec))
    throw Error(ErrorCode::io, "model path " + path.string() +
                                   " does not exist or is neither a directory nor a file: pass the folder holding "
                                   "config.json, model.safetensors and tokenizer.json, or a .gguf file");
  if (fs::exists(path / "config.json", ec)) return {path, false};
  std::vector<fs::path> ggufs;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::string ext = it->path().extension().string();
    for (char& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (ext == ".gguf" && it->is_regular_file(ec)) ggufs.push_back(it->path());
  }
  if (ggufs.size() == 1) return {ggufs.front(), true};
  if (ggufs.size() > 1) {
    std::sort(ggufs.begin(), ggufs.end());
    std::string list;
    for (const auto& g : ggufs) {
      if (!list.empty()) list += ", ";
      list += g.filename().string();
    }
    throw Error(ErrorCode::invalid_argument, "model directory " + path.string() + " holds " +
                                                 std::to_string(ggufs.size()) + " .gguf files (" + list +
                                                 ") and no config.json: pass the one to run (-m DIR/FILE.gguf)");
  }
  return {path, false};   // load_model_config names the missing config.json
}

ModelConfig load_model_config_at(const ModelPath& model) {
  if (!model.gguf) return load_model_config(model.path / "config.json");
  return model_config_from_gguf(GgufFile::open(model.path));
}

Tokenizer load_tokenizer_at(const ModelPath& model) {
  if (!model.gguf) return Tokenizer::load(model.path / "tokenizer.json");
  return Tokenizer::from_gguf(GgufFile::open(model.path));
}

std::string Model::weight_types() const {
  std::vector<std::pair<uint64_t, WType>> by_bytes;
  for (const auto& [t, b] : matrix_bytes_) by_bytes.push_back({b, t});
  std::stable_sort(by_bytes.begin(), by_bytes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string s;
  for (const auto& [b, t] : by_bytes) {
    if (!s.empty()) s += '+';
    s += wtype_name(t);
  }
  return s.empty() ? wtype_name(wtype_) : s;
}

std::unique_ptr<Model> Model::load(Device& device, Allocator& allocator, const fs::path& path,
                                   const LoadOptions& options) {
  if (options.weight_type && wtype_is_quant(*options.weight_type))
    throw Error(ErrorCode::invalid_argument, std::string("weight type ") + wtype_name(*options.weight_type) +
                                                 " is a block format: ask for it with the quantize option");
  if (options.quantize) {
    const WType q = *options.quantize;
    if (!wtype_is_quant(q) || !quantize_supported(q)) {
      const std::string which = quantize_supported(WType::q8_0) ? "ask for q8_0, q4_0 or q4_k"
                                                                : "host quantization is not available in this build";
      throw Error(ErrorCode::unsupported,
                  std::string("reach cannot quantize weights to ") + wtype_name(q) + " at load: " + which);
    }
  }
  const ModelPath where = resolve_model_path(path);
  std::unique_ptr<Model> m(new Model(device, allocator));
  m->dir_ = where.path;
  m->gguf_ = where.gguf;
  if (where.gguf) ModelLoader::load_gguf(*m, where.path, options);
  else ModelLoader::load_safetensors(*m, where.path, options);

  const ModelConfig& c = m->config_;
  m->eos_ids_ = c.eos_ids;
  if (m->eos_ids_.empty() && m->tokenizer_ && m->tokenizer_->eos_id()) m->eos_ids_.push_back(*m->tokenizer_->eos_id());
  if (!c.bos_ids.empty()) m->bos_id_ = c.bos_ids.front();
  else if (m->tokenizer_) m->bos_id_ = m->tokenizer_->bos_id();
  return m;
}

uint64_t Model::bytes_per_token() const {
  uint64_t n = lm_head_.bytes() + (embed_.rows ? embed_.bytes() / embed_.rows : 0);
  const uint64_t k = uint64_t(config_.experts_per_token);
  for (const LayerWeights& w : layers_) {
    for (const Mat* m : {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down, &w.router}) n += m->bytes();
    if (!w.moe()) continue;
    uint64_t experts = 0;
    for (const auto* list : {&w.expert_gate, &w.expert_up, &w.expert_down})
      for (const Mat& m : *list) experts += m.bytes();
    n += experts * k / w.expert_down.size();
  }
  return n;
}

}  // namespace reach
