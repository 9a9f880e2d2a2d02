#include "runtime/model/model_loader.hpp"

#include <algorithm>
#include <cstring>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "base/half.hpp"
#include "engine/device.hpp"
#include "kernels/quant_layout.hpp"
#include "runtime/config/position_schemes.hpp"
#include "runtime/formats/safetensors.hpp"
#include "runtime/quant/quantize.hpp"

namespace reach {

namespace {

// n float elements of type `from` (f32 / f16 / bf16; unaligned in general) to f32.
void to_f32(const std::byte* src, WType from, uint64_t n, float* out) {
  if (from == WType::f32) {
    std::memcpy(out, src, n * 4);
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + i * 2, 2);
    out[i] = from == WType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

bool is_float(WType t) { return t == WType::f32 || t == WType::f16 || t == WType::bf16; }

std::string names_list(const std::vector<std::string>& names) {
  std::string s = names.front();
  if (names.size() > 1) s += " and " + std::to_string(names.size() - 1) + " more";
  return s;
}

}  // namespace

ModelLoader::ModelLoader(Model& m, const WeightSource& src, const LoadOptions& opt, bool dry_run)
    : m_(m), src_(src), opt_(opt), dry_(dry_run), total_(src.total_bytes()) {
  if (!dry_) transfer_ = std::make_unique<Transfer>(m.allocator_);
}

std::vector<std::byte> ModelLoader::unpermute_rows(const std::byte* src, uint64_t rows, uint64_t row_bytes,
                                                   uint64_t heads, uint64_t head_dim, uint64_t rotary_dim) {
  if (rows != heads * head_dim || rotary_dim > head_dim || rotary_dim % 2)
    throw Error(ErrorCode::internal, "unpermute_rows: " + std::to_string(rows) + " rows are not " +
                                         std::to_string(heads) + " heads of " + std::to_string(head_dim));
  std::vector<std::byte> out(size_t(rows * row_bytes));
  const uint64_t half = rotary_dim / 2;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t h = r / head_dim, j = r % head_dim;
    // Half-split row j (j < rotary_dim) is pair element (j / half) of pair (j % half).
    const uint64_t from = j < rotary_dim ? h * head_dim + (j % half) * 2 + j / half : r;
    std::memcpy(out.data() + r * row_bytes, src + from * row_bytes, size_t(row_bytes));
  }
  return out;
}

std::vector<std::byte> ModelLoader::pad_rotary_rows(const std::byte* src, uint64_t rows, uint64_t row_bytes,
                                                    uint64_t heads, uint64_t head_dim, uint64_t rotary_dim) {
  const uint64_t rp = rotary_dim / 2, kp = uint64_t(kernel_rotary_dim(int64_t(rotary_dim))) / 2, pad = kp - rp;
  if (rows != heads * head_dim || 2 * kp > head_dim)
    throw Error(ErrorCode::internal, "pad_rotary_rows: " + std::to_string(rows) + " rows are not " +
                                         std::to_string(heads) + " heads of " + std::to_string(head_dim) +
                                         " with room for " + std::to_string(kp) + " pairs");
  // New row -> old row within a head: the low half [0, rp) and the high half [rp, 2rp) move to [0, rp) and
  // [kp, kp + rp); the pad slots [rp, kp) and [kp + rp, 2kp) take the first 2·pad non-rotating dims.
  auto old_of = [&](uint64_t j) -> uint64_t {
    if (j < rp) return j;
    if (j < kp) return 2 * rp + (j - rp);
    if (j < kp + rp) return rp + (j - kp);
    if (j < 2 * kp) return 2 * rp + pad + (j - kp - rp);
    return j;
  };
  std::vector<std::byte> out(size_t(rows * row_bytes));
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t h = r / head_dim, j = r % head_dim;
    std::memcpy(out.data() + r * row_bytes, src + (h * head_dim + old_of(j)) * row_bytes, size_t(row_bytes));
  }
  return out;
}

uint64_t ModelLoader::plan(uint64_t bytes) {
  planned_ = saturating_add(planned_, bytes);
  ++tensors_;
  return bytes;
}

void ModelLoader::advance(uint64_t bytes) {
  done_ += bytes;
  if (opt_.on_progress && !opt_.on_progress(done_, total_))
    throw Error(ErrorCode::cancelled, "loading " + m_.dir_.string() + " was cancelled by the progress callback");
}

WType ModelLoader::target_type(const SourceTensor& t, int64_t cols) {
  if (wtype_is_quant(t.type)) return t.type;   // GGUF blocks stay as they are
  if (opt_.quantize) {
    const WType q = *opt_.quantize;
    if (cols % int64_t(wtype_block_elems(q)) == 0) {
      ++quantized_;
      return q;
    }
    if (cols % int64_t(wtype_block_elems(WType::q8_0)) == 0) {
      fallback_q8_.push_back(t.name);
      return WType::q8_0;
    }
    kept_float_.push_back(t.name);
  }
  WType wt = opt_.weight_type ? *opt_.weight_type : src_.float_type().value_or(t.type);
  if (wt != WType::f32 && !m_.device_.caps().storage_16bit) wt = WType::f32;
  return wt;
}

const std::byte* ModelLoader::rows_in_order(const SourceTensor& t, uint64_t rows, uint64_t heads,
                                            std::vector<std::byte>& tmp) {
  const ModelConfig& c = m_.config_;
  const bool pad = kernel_rotary_dim(c.rotary_dim) != c.rotary_dim;
  if (!heads || (!src_.interleaved_rotary_rows() && !pad)) return t.data;
  const uint64_t row_bytes = t.nbytes / rows, d = uint64_t(c.head_dim), rd = uint64_t(c.rotary_dim);
  if (src_.interleaved_rotary_rows()) tmp = unpermute_rows(t.data, rows, row_bytes, heads, d, rd);
  if (pad) tmp = pad_rotary_rows(tmp.empty() ? t.data : tmp.data(), rows, row_bytes, heads, d, rd);
  return tmp.data();
}

Mat ModelLoader::matrix(Role role, int64_t layer, int64_t rows, int64_t cols, const std::string& why,
                        uint64_t heads) {
  return matrix_from(src_.get(src_.name(role, layer), {rows, cols}, why), rows, cols, heads);
}

std::vector<Mat> ModelLoader::matrix_split(Role role, int64_t layer, const std::vector<int64_t>& parts, int64_t cols,
                                           const std::string& why, const std::vector<uint64_t>& heads) {
  int64_t rows = 0;
  for (int64_t p : parts) rows += p;
  const SourceTensor t = src_.get(src_.name(role, layer), {rows, cols}, why);
  // Whole rows (of float elements or of blocks) are contiguous in both formats: each part is a view.
  const uint64_t row_bytes = t.nbytes / uint64_t(rows);
  std::vector<Mat> out;
  int64_t row0 = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    SourceTensor part = t;
    part.name = t.name + " (rows " + std::to_string(row0) + ".." + std::to_string(row0 + parts[i] - 1) + ")";
    part.shape = {parts[i], cols};
    part.data = t.data + uint64_t(row0) * row_bytes;
    part.nbytes = uint64_t(parts[i]) * row_bytes;
    out.push_back(matrix_from(part, parts[i], cols, i < heads.size() ? heads[i] : 0));
    row0 += parts[i];
  }
  return out;
}

Mat ModelLoader::matrix_from(const SourceTensor& t, int64_t rows, int64_t cols, uint64_t heads) {
  const WType wt = target_type(t, cols);
  const uint64_t bytes =
      plan(wtype_is_quant(wt) ? quant_device_bytes(wt, uint32_t(rows), uint32_t(cols))
                              : saturating_mul({uint64_t(rows), uint64_t(cols), wtype_size(wt)}));
  matrix_bytes_[wt] += bytes;
  if (dry_) return {};
  Buffer buf = m_.allocator_.allocate(Arena::weights, bytes, t.name);
  std::vector<std::byte> tmp;
  const std::byte* data = rows_in_order(t, uint64_t(rows), heads, tmp);
  if (wtype_is_quant(t.type)) upload_quant(data, wt, uint32_t(rows), uint32_t(cols), buf, t.nbytes);
  else if (wtype_is_quant(wt)) upload_quantized(data, t.type, uint32_t(rows), uint32_t(cols), buf, wt);
  else upload_float(data, t.type, uint64_t(rows) * uint64_t(cols), buf, wt);
  Mat mat{nullptr, 0, wt, uint32_t(rows), uint32_t(cols)};
  m_.storage_.push_back(std::move(buf));
  mat.buffer = &m_.storage_.back();
  return mat;
}

Buffer ModelLoader::vector_f32(Role role, int64_t layer, int64_t n, const std::string& why, uint64_t heads) {
  const SourceTensor t = src_.get(src_.name(role, layer), {n}, why);
  if (!is_float(t.type))
    throw Error(ErrorCode::unsupported, "tensor " + t.name + " in " + t.file.string() + " is " +
                                            wtype_name(t.type) + "; reach reads norm and bias vectors as F32, F16 "
                                            "or BF16 (llama.cpp keeps them F32): re-export the file");
  const uint64_t bytes = plan(saturating_mul({uint64_t(n), 4}));
  if (dry_) return {};
  Buffer buf = m_.allocator_.allocate(Arena::weights, bytes, t.name);
  std::vector<std::byte> tmp;
  const std::byte* data = rows_in_order(t, uint64_t(n), heads, tmp);
  const bool norm = role == Role::attn_norm || role == Role::mlp_norm || role == Role::final_norm ||
                    role == Role::q_norm || role == Role::k_norm || role == Role::post_attn_norm ||
                    role == Role::post_mlp_norm;
  if (norm && m_.config_.norm_weight_offset != 0) {
    // Gemma's x * (1 + w): the multiplier, computed once here in f32 as Hugging Face does.
    std::vector<float> f(static_cast<size_t>(n));
    to_f32(data, t.type, uint64_t(n), f.data());
    for (float& x : f) x = float(x + float(m_.config_.norm_weight_offset));
    transfer_->upload(buf, 0, f.data(), uint64_t(n) * 4, [](uint64_t) {});
    advance(uint64_t(n) * wtype_size(t.type));
    return buf;
  }
  upload_float(data, t.type, uint64_t(n), buf, WType::f32);
  return buf;
}

Buffer ModelLoader::floats_f32(const SourceTensor& t, uint64_t n) {
  if (!is_float(t.type) || t.nbytes != n * wtype_size(t.type))
    throw Error(ErrorCode::unsupported, "tensor " + t.name + " in " + t.file.string() + " is " + wtype_name(t.type) +
                                            " of " + std::to_string(t.nbytes) + " bytes; reach reads it as " +
                                            std::to_string(n) + " F32, F16 or BF16 values: re-export the file");
  const uint64_t bytes = plan(saturating_mul({n, 4}));
  if (dry_) return {};
  Buffer buf = m_.allocator_.allocate(Arena::weights, bytes, t.name);
  upload_float(t.data, t.type, n, buf, WType::f32);
  return buf;
}

void ModelLoader::upload_float(const std::byte* src, WType from, uint64_t n, const Buffer& dst, WType to,
                               uint64_t dst_off) {
  auto tick = [](uint64_t) {};
  const uint64_t esize = wtype_size(from);
  if (from == to) {
    // Straight from the mapping, in chunks so progress is reported as it goes.
    const uint64_t nbytes = n * esize, chunk = 16ull << 20;
    for (uint64_t off = 0; off < nbytes; off += chunk) {
      const uint64_t len = std::min(chunk, nbytes - off);
      transfer_->upload(dst, dst_off + off, src + off, len, tick);
      advance(len);
    }
    return;
  }
  // Convert on the host a piece at a time (host memory stays small whatever the tensor's size): to f32 first
  // (exact for f16/bf16), then to the target.
  const uint64_t step = 4ull << 20;
  std::vector<float> f32(size_t(std::min(n, step)));
  std::vector<uint16_t> h(to == WType::f32 ? 0 : f32.size());
  for (uint64_t off = 0; off < n; off += step) {
    const uint64_t len = std::min(step, n - off);
    to_f32(src + off * esize, from, len, f32.data());
    if (to == WType::f32) {
      transfer_->upload(dst, dst_off + off * 4, f32.data(), len * 4, tick);
    } else {
      for (uint64_t i = 0; i < len; ++i) h[i] = to == WType::f16 ? f32_to_f16_bits(f32[i]) : f32_to_bf16_bits(f32[i]);
      transfer_->upload(dst, dst_off + off * 2, h.data(), len * 2, tick);
    }
    advance(len * esize);
  }
}

void ModelLoader::upload_quant(const std::byte* blocks, WType t, uint32_t rows, uint32_t cols, const Buffer& dst,
                               uint64_t src_bytes, uint64_t dst_off) {
  // The device layout may regroup blocks across rows, so the whole matrix goes through it at once (host memory:
  // one copy of the tensor's bytes, never expanded).
  const uint64_t bytes = quant_device_bytes(t, rows, cols);
  std::vector<std::byte> dev(static_cast<size_t>(bytes));
  quant_to_device_layout(t, rows, cols, blocks, dev.data());
  const uint64_t chunk = 16ull << 20;
  for (uint64_t off = 0; off < bytes; off += chunk) {
    const uint64_t len = std::min(chunk, bytes - off);
    transfer_->upload(dst, dst_off + off, dev.data() + off, len, [](uint64_t) {});
    // Progress counts source bytes (the float ones when quantizing at load).
    advance(src_bytes / bytes * len + (src_bytes % bytes) * (off + len) / bytes - (src_bytes % bytes) * off / bytes);
  }
}

void ModelLoader::upload_quantized(const std::byte* src, WType from, uint32_t rows, uint32_t cols, const Buffer& dst,
                                   WType to, uint64_t dst_off) {
  // f32 a band of rows at a time (quantize_matrix works row by row), blocks for the whole matrix.
  std::vector<std::byte> blocks(size_t(quant_device_bytes(to, rows, cols)));
  const uint64_t row_bytes = wtype_row_bytes(to, cols), esize = wtype_size(from);
  const uint32_t band = std::max<uint32_t>(1, uint32_t((4ull << 20) / cols));
  std::vector<float> f32(size_t(std::min(band, rows)) * cols);
  for (uint32_t r = 0; r < rows; r += band) {
    const uint32_t n = std::min(band, rows - r);
    to_f32(src + uint64_t(r) * cols * esize, from, uint64_t(n) * cols, f32.data());
    quantize_matrix(to, f32.data(), n, cols, blocks.data() + r * row_bytes);
  }
  upload_quant(blocks.data(), to, rows, cols, dst, uint64_t(rows) * cols * esize, dst_off);
}

void ModelLoader::build(Model& m, const WeightSource& src, const LoadOptions& opt, const std::string& why) {
  const ModelConfig& c = m.config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, d = c.head_dim;
  const int64_t qd = c.n_heads * d, kvd = c.n_kv_heads * d;
  const uint64_t qh = uint64_t(c.n_heads), kh = uint64_t(c.n_kv_heads);
  for (const bool dry : {true, false}) {
    ModelLoader L(m, src, opt, dry);
    LayerWeights unused;
    if (!dry) m.layers_.resize(size_t(c.n_layers));
    Mat embed = L.matrix(Role::embed, -1, V, H, why);
    for (int64_t i = 0; i < c.n_layers; ++i) {
      LayerWeights& lw = dry ? unused : m.layers_[size_t(i)];
      if (c.pre_norms) lw.attn_norm = L.vector_f32(Role::attn_norm, i, H, why);
      if (c.fused_qkv) {
        std::vector<Mat> qkv = L.matrix_split(Role::qkv, i, {qd, kvd, kvd}, H, why, {qh, kh, 0});
        lw.q = qkv[0], lw.k = qkv[1], lw.v = qkv[2];
      } else {
        lw.q = L.matrix(Role::q, i, qd, H, why, qh);
        lw.k = L.matrix(Role::k, i, kvd, H, why, kh);
        lw.v = L.matrix(Role::v, i, kvd, H, why);
      }
      lw.o = L.matrix(Role::o, i, H, qd, why);
      if (c.attention_bias) {
        lw.q_bias = L.vector_f32(Role::q_bias, i, qd, why, qh);
        lw.k_bias = L.vector_f32(Role::k_bias, i, kvd, why, kh);
        lw.v_bias = L.vector_f32(Role::v_bias, i, kvd, why);
        if (src.has(src.name(Role::o_bias, i))) lw.o_bias = L.vector_f32(Role::o_bias, i, H, why);
      }
      if (c.attn_sinks) lw.attn_sinks = L.vector_f32(Role::attn_sinks, i, int64_t(qh), why);
      if (c.pre_norms) lw.mlp_norm = L.vector_f32(Role::mlp_norm, i, H, why);
      if (c.qk_head_norm) {   // one head's weights: its dims move with the q/k rows (heads = 1)
        lw.q_norm = L.vector_f32(Role::q_norm, i, d, why, 1);
        lw.k_norm = L.vector_f32(Role::k_norm, i, d, why, 1);
      } else if (c.qk_proj_norm) {   // OLMo 2: over all heads at once, so its rows follow the q/k rows
        lw.q_norm = L.vector_f32(Role::q_norm, i, qd, why, qh);
        lw.k_norm = L.vector_f32(Role::k_norm, i, kvd, why, kh);
      }
      if (c.post_norms) {
        lw.post_attn_norm = L.vector_f32(Role::post_attn_norm, i, H, why);
        lw.post_mlp_norm = L.vector_f32(Role::post_mlp_norm, i, H, why);
      }
      if (c.moe_layer(i)) {
        L.moe_layer(lw, i, why);
      } else if (c.fused_gate_up) {
        std::vector<Mat> gu = L.matrix_split(Role::gate_up, i, {I, I}, H, why, {});
        lw.gate = gu[0], lw.up = gu[1];
      } else {
        lw.gate = L.matrix(Role::gate, i, I, H, why);
        lw.up = L.matrix(Role::up, i, I, H, why);
      }
      if (!c.moe_layer(i)) lw.down = L.matrix(Role::down, i, H, I, why);
    }
    Buffer final_norm = L.vector_f32(Role::final_norm, -1, H, why);
    Mat lm_head = embed;
    const std::string head = src.name(Role::lm_head, -1);
    if (c.tie_word_embeddings || !src.has(head)) {
      if (!c.tie_word_embeddings && !head.empty())   // empty: a bare base model, which has no head
        throw Error(ErrorCode::format, "tensor " + head + " is missing from " + src.where() +
                                           " and the config says tie_word_embeddings=false: set it to true if the "
                                           "model shares its embedding table, or restore " + head);
    } else {
      lm_head = L.matrix(Role::lm_head, -1, V, H, why);
    }
    m.matrix_bytes_ = L.matrix_bytes_;
    if (dry) {
      m.allocator_.require(Arena::weights, L.planned_,
                           "the weights of " + src.where() + " (" + std::to_string(L.tensors_) + " tensors as " +
                               m.weight_types() + ")",
                           "use a smaller model, a smaller weight type (--quantize), or a device with more memory");
      continue;
    }
    m.embed_ = embed;
    m.lm_head_ = lm_head;
    m.final_norm_ = std::move(final_norm);
    m.weight_bytes_ = L.planned_ - L.stack_padding_;   // the weights' own bytes, not the experts' alignment
    if (opt.quantize) {
      std::string note = "quantized " + std::to_string(L.quantized_) + " matrices to " + wtype_name(*opt.quantize);
      if (!L.fallback_q8_.empty())
        note += "; q8_0 for " + std::to_string(L.fallback_q8_.size()) + " whose rows are not a multiple of " +
                std::to_string(wtype_block_elems(*opt.quantize)) + " (" + names_list(L.fallback_q8_) + ")";
      if (!L.kept_float_.empty())
        note += "; kept " + std::to_string(L.kept_float_.size()) + " float, rows not a multiple of 32 (" +
                names_list(L.kept_float_) + ")";
      m.load_note_ = note;
    }
  }
  m.n_params_ = src.n_params();
  WType top = WType::f32;
  uint64_t most = 0;
  for (const auto& [t, b] : m.matrix_bytes_)
    if (b > most) most = b, top = t;
  m.wtype_ = top;
}

}  // namespace reach
