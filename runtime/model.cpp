#include "runtime/model.hpp"

#include <cstring>
#include <set>

#include "engine/checked.hpp"
#include "engine/device.hpp"
#include "engine/error.hpp"
#include "engine/transfer.hpp"
#include "runtime/safetensors.hpp"

namespace reach {

namespace fs = std::filesystem;

class ModelLoader {
 public:
  // A dry run only checks each tensor's name, shape and dtype and sums the
  // device bytes it will take: nothing is allocated or read.
  ModelLoader(Model& m, const ModelWeights& w, const LoadOptions& opt, uint64_t total, bool dry_run)
      : m_(m), w_(w), opt_(opt), total_(total), dry_(dry_run) {
    if (!dry_) transfer_ = std::make_unique<Transfer>(m.allocator_);
  }

  uint64_t planned_bytes() const { return planned_; }
  uint64_t tensors() const { return tensors_; }

  // A matrix [rows, cols] in the model's weight type.
  Mat matrix(const std::string& name, int64_t rows, int64_t cols, const std::string& why) {
    const TensorInfo& t = w_.get(name, {rows, cols}, why);
    check_dtype(t);
    const WType wt = m_.wtype_;
    const uint64_t bytes = plan(saturating_mul({uint64_t(rows), uint64_t(cols), wtype_size(wt)}));
    if (dry_) return {};
    Buffer buf = m_.allocator_.allocate(Arena::weights, bytes, name);
    upload_converted(t, buf, wt);
    Mat mat{nullptr, 0, wt, uint32_t(rows), uint32_t(cols)};
    m_.storage_.push_back(std::move(buf));
    mat.buffer = &m_.storage_.back();
    return mat;
  }

  // A vector [n] as f32 (norm weights, biases).
  Buffer vector_f32(const std::string& name, int64_t n, const std::string& why) {
    const TensorInfo& t = w_.get(name, {n}, why);
    check_dtype(t);
    const uint64_t bytes = plan(saturating_mul({uint64_t(n), 4}));
    if (dry_) return {};
    Buffer buf = m_.allocator_.allocate(Arena::weights, bytes, name);
    upload_converted(t, buf, WType::f32);
    return buf;
  }

 private:
  uint64_t plan(uint64_t bytes) {
    planned_ = saturating_add(planned_, bytes);
    ++tensors_;
    return bytes;
  }

  void check_dtype(const TensorInfo& t) {
    if (!dtype_is_compute(t.dtype))
      throw Error(ErrorCode::unsupported, "tensor " + t.name + " in " + t.file.string() + " has dtype " +
                                              dtype_name(t.dtype) + "; reach reads F32, F16 and BF16 weights: "
                                              "convert the checkpoint (e.g. save it with torch_dtype=float16)");
  }

  void upload_converted(const TensorInfo& t, const Buffer& dst, WType wt) {
    const uint64_t n = uint64_t(t.numel());
    const bool same = (wt == WType::f32 && t.dtype == DType::F32) || (wt == WType::f16 && t.dtype == DType::F16) ||
                      (wt == WType::bf16 && t.dtype == DType::BF16);
    auto tick = [&](uint64_t) {};
    if (same) {
      // Straight from the mmap, in chunks so progress is reported as it goes.
      const uint64_t chunk = 16ull << 20;
      for (uint64_t off = 0; off < t.nbytes; off += chunk) {
        const uint64_t len = std::min<uint64_t>(chunk, t.nbytes - off);
        transfer_->upload(dst, off, reinterpret_cast<const char*>(t.data) + off, len, tick);
        advance(len);
      }
      return;
    }
    // Convert on the host, a piece at a time (host memory stays small whatever
    // the tensor's size): to f32 first (exact for f16/bf16), then to the target.
    const uint64_t esize = dtype_size(t.dtype), step = 4ull << 20;
    std::vector<float> f32(size_t(std::min(n, step)));
    std::vector<uint16_t> h(wt == WType::f32 ? 0 : f32.size());
    for (uint64_t off = 0; off < n; off += step) {
      const uint64_t len = std::min(step, n - off);
      TensorInfo piece = t;
      piece.data = t.data + off * esize;
      piece.shape = {int64_t(len)};
      piece.nbytes = size_t(len * esize);
      convert_to_f32(piece, f32.data());
      if (wt == WType::f32) {
        transfer_->upload(dst, off * 4, f32.data(), len * 4, tick);
      } else {
        for (uint64_t i = 0; i < len; ++i) h[i] = wt == WType::f16 ? f32_to_f16(f32[i]) : f32_to_bf16(f32[i]);
        transfer_->upload(dst, off * 2, h.data(), len * 2, tick);
      }
      advance(piece.nbytes);
    }
  }

  void advance(uint64_t bytes) {
    done_ += bytes;
    if (opt_.on_progress && !opt_.on_progress(done_, total_))
      throw Error(ErrorCode::cancelled, "loading " + m_.dir_.string() + " was cancelled by the progress callback");
  }

  static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return uint16_t(x >> 16);
  }
  static uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ex = (x >> 23) & 0xff;
    uint32_t mant = x & 0x7fffffu;
    if (ex == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));
    int32_t e = int32_t(ex) - 127 + 15;
    if (e >= 31) return uint16_t(sign | 0x7c00u);
    if (e <= 0) {
      if (e < -10) return uint16_t(sign);
      mant |= 0x800000u;
      const uint32_t shift = uint32_t(14 - e);
      uint32_t h = mant >> shift;
      const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
      if (rem > half || (rem == half && (h & 1))) ++h;
      return uint16_t(sign | h);
    }
    uint32_t h = (uint32_t(e) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
    return uint16_t(sign | h);
  }

  Model& m_;
  const ModelWeights& w_;
  const LoadOptions& opt_;
  std::unique_ptr<Transfer> transfer_;
  uint64_t total_ = 0, done_ = 0;
  bool dry_ = false;
  uint64_t planned_ = 0, tensors_ = 0;
};

namespace {

// How many layers the weights hold: the first index i from 0 with no tensor
// named model.layers.<i>.*.
int64_t layers_in_weights(const ModelWeights& w) {
  static const std::string prefix = "model.layers.";
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

}  // namespace

std::unique_ptr<Model> Model::load(Device& device, Allocator& allocator, const fs::path& dir,
                                   const LoadOptions& options) {
  if (!fs::is_directory(dir))
    throw Error(ErrorCode::io, "model directory " + dir.string() +
                                   " does not exist or is not a directory: pass the folder holding config.json, "
                                   "model.safetensors and tokenizer.json");
  std::unique_ptr<Model> m(new Model(device, allocator));
  m->dir_ = dir;
  m->config_ = load_model_config(dir / "config.json");
  const ModelConfig& c = m->config_;

  if (options.require_tokenizer || fs::exists(dir / "tokenizer.json"))
    m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(dir / "tokenizer.json"));

  ModelWeights w = ModelWeights::open_dir(dir);

  // Weight type: keep the file's 16-bit type when the device reads 16-bit storage.
  const TensorInfo& probe = w.get("model.embed_tokens.weight");
  WType wt = WType::f32;
  if (probe.dtype == DType::F16) wt = WType::f16;
  if (probe.dtype == DType::BF16) wt = WType::bf16;
  if (options.weight_type) wt = *options.weight_type;
  if (wt != WType::f32 && !device.caps().storage_16bit) wt = WType::f32;
  m->wtype_ = wt;

  // Layers first: num_hidden_layers sizes the layer list, so it must not
  // exceed what the weights hold.
  const int64_t held = layers_in_weights(w);
  if (c.n_layers > held)
    throw Error(ErrorCode::format, "config.json (" + c.source.string() + ") says num_hidden_layers=" +
                                       std::to_string(c.n_layers) + ", but the weights in " + dir.string() +
                                       " hold " + std::to_string(held) + " layer(s) (no tensor 'model.layers." +
                                       std::to_string(held) + ".*') - fix num_hidden_layers, or use the weights "
                                       "that belong to this config.json");

  // The config's sizes are bounded (config.json parsing): these products fit.
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, d = c.head_dim;
  const int64_t qd = c.n_heads * d, kvd = c.n_kv_heads * d;
  const std::string why = "config.json says hidden_size=" + std::to_string(H) +
                          ", intermediate_size=" + std::to_string(I) + ", vocab_size=" + std::to_string(V) +
                          ", heads=" + std::to_string(c.n_heads) + "x" + std::to_string(d) +
                          ", kv_heads=" + std::to_string(c.n_kv_heads);

  // Twice over the same list: a dry run checks every name, shape and dtype and
  // sums the bytes, so a config that does not match the weights, or weights
  // larger than the device's memory, are refused before anything is uploaded.
  for (const bool dry : {true, false}) {
    ModelLoader L(*m, w, options, w.total_bytes(), dry);
    LayerWeights unused;
    if (!dry) m->layers_.resize(size_t(c.n_layers));
    Mat embed = L.matrix("model.embed_tokens.weight", V, H, why);
    for (int64_t i = 0; i < c.n_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      LayerWeights& lw = dry ? unused : m->layers_[size_t(i)];
      lw.attn_norm = L.vector_f32(p + "input_layernorm.weight", H, why);
      lw.q = L.matrix(p + "self_attn.q_proj.weight", qd, H, why);
      lw.k = L.matrix(p + "self_attn.k_proj.weight", kvd, H, why);
      lw.v = L.matrix(p + "self_attn.v_proj.weight", kvd, H, why);
      lw.o = L.matrix(p + "self_attn.o_proj.weight", H, qd, why);
      if (c.attention_bias) {
        lw.q_bias = L.vector_f32(p + "self_attn.q_proj.bias", qd, why);
        lw.k_bias = L.vector_f32(p + "self_attn.k_proj.bias", kvd, why);
        lw.v_bias = L.vector_f32(p + "self_attn.v_proj.bias", kvd, why);
        if (w.find(p + "self_attn.o_proj.bias")) lw.o_bias = L.vector_f32(p + "self_attn.o_proj.bias", H, why);
      }
      lw.mlp_norm = L.vector_f32(p + "post_attention_layernorm.weight", H, why);
      lw.gate = L.matrix(p + "mlp.gate_proj.weight", I, H, why);
      lw.up = L.matrix(p + "mlp.up_proj.weight", I, H, why);
      lw.down = L.matrix(p + "mlp.down_proj.weight", H, I, why);
    }
    Buffer final_norm = L.vector_f32("model.norm.weight", H, why);
    Mat lm_head = embed;
    if (c.tie_word_embeddings || !w.find("lm_head.weight")) {
      if (!c.tie_word_embeddings)
        throw Error(ErrorCode::format, "tensor lm_head.weight is missing from " + dir.string() +
                                           " and config.json has tie_word_embeddings=false: set it to true if the "
                                           "model shares its embedding table, or restore lm_head.weight");
    } else {
      lm_head = L.matrix("lm_head.weight", V, H, why);
    }
    if (dry) {
      m->allocator_.require(Arena::weights, L.planned_bytes(),
                            "the weights of " + dir.string() + " (" + std::to_string(L.tensors()) + " tensors as " +
                                wtype_name(wt) + ")",
                            "use a smaller model, or a device with more memory");
      continue;
    }
    m->embed_ = embed;
    m->lm_head_ = lm_head;
    m->final_norm_ = std::move(final_norm);
  }

  for (const auto& name : w.names()) m->n_params_ += uint64_t(w.get(name).numel());
  for (const auto& b : m->storage_) m->weight_bytes_ += b.size();

  m->eos_ids_ = c.eos_ids;
  if (m->eos_ids_.empty() && m->tokenizer_ && m->tokenizer_->eos_id()) m->eos_ids_.push_back(*m->tokenizer_->eos_id());
  if (!c.bos_ids.empty()) m->bos_id_ = c.bos_ids.front();
  else if (m->tokenizer_) m->bos_id_ = m->tokenizer_->bos_id();
  return m;
}

}  // namespace reach
