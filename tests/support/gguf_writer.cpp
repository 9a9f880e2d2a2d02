#include "tests/support/gguf_writer.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "runtime/formats/gguf.hpp"

namespace reach::test {

namespace {

template <class T>
std::string raw(T v) {
  std::string s(sizeof v, '\0');
  std::memcpy(s.data(), &v, sizeof v);   // the tests run on little-endian hosts, as the reader requires
  return s;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

std::string gguf_u32(uint32_t v) { return raw(v); }
std::string gguf_u64(uint64_t v) { return raw(v); }
std::string gguf_str(std::string_view s) { return raw<uint64_t>(s.size()) + std::string(s); }

GgufBuilder& GgufBuilder::kv_raw(const std::string& key, uint32_t type, const std::string& value) {
  kvs_.push_back({key, gguf_str(key) + gguf_u32(type) + value});
  return *this;
}
GgufBuilder& GgufBuilder::kv_u8(const std::string& key, uint8_t v) { return kv_raw(key, kU8, raw(v)); }
GgufBuilder& GgufBuilder::kv_u32(const std::string& key, uint32_t v) {
  if (key == "general.alignment" && v != 0 && (v & (v - 1)) == 0) alignment_ = v;
  return kv_raw(key, kU32, raw(v));
}
GgufBuilder& GgufBuilder::kv_i32(const std::string& key, int32_t v) { return kv_raw(key, kI32, raw(v)); }
GgufBuilder& GgufBuilder::kv_u64(const std::string& key, uint64_t v) { return kv_raw(key, kU64, raw(v)); }
GgufBuilder& GgufBuilder::kv_i64(const std::string& key, int64_t v) { return kv_raw(key, kI64, raw(v)); }
GgufBuilder& GgufBuilder::kv_f32(const std::string& key, float v) { return kv_raw(key, kF32, raw(v)); }
GgufBuilder& GgufBuilder::kv_f64(const std::string& key, double v) { return kv_raw(key, kF64, raw(v)); }
GgufBuilder& GgufBuilder::kv_bool(const std::string& key, bool v) { return kv_raw(key, kBool, raw<uint8_t>(v)); }
GgufBuilder& GgufBuilder::kv_string(const std::string& key, std::string_view v) {
  return kv_raw(key, kString, gguf_str(v));
}
GgufBuilder& GgufBuilder::kv_strings(const std::string& key, const std::vector<std::string>& v) {
  std::string s = gguf_u32(kString) + gguf_u64(v.size());
  for (const auto& e : v) s += gguf_str(e);
  return kv_raw(key, kArray, s);
}
GgufBuilder& GgufBuilder::kv_i32s(const std::string& key, const std::vector<int32_t>& v) {
  std::string s = gguf_u32(kI32) + gguf_u64(v.size());
  for (int32_t e : v) s += raw(e);
  return kv_raw(key, kArray, s);
}
GgufBuilder& GgufBuilder::kv_f32s(const std::string& key, const std::vector<float>& v) {
  std::string s = gguf_u32(kF32) + gguf_u64(v.size());
  for (float e : v) s += raw(e);
  return kv_raw(key, kArray, s);
}
GgufBuilder& GgufBuilder::remove_kv(const std::string& key) {
  std::erase_if(kvs_, [&](const Kv& k) { return k.key == key; });
  return *this;
}

GgufBuilder& GgufBuilder::tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                                 std::optional<std::string> data, std::optional<uint64_t> offset) {
  if (!data) {
    std::string d;
    if (const GgmlTypeTraits* t = ggml_type_traits(type)) {
      uint64_t n = 1;
      for (uint64_t x : ne) n *= x;
      d.resize(n / t->block_size * t->block_bytes);
      for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<char>((i * 131 + 7) & 0x3f);
    }
    data = std::move(d);
  }
  tensors_.push_back({name, std::move(ne), type, std::move(*data), offset});
  return *this;
}
GgufBuilder& GgufBuilder::remove_tensor(const std::string& name) {
  std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
  return *this;
}

std::string GgufBuilder::bytes(const Layout& layout) const {
  const uint64_t al = layout.alignment.value_or(alignment_);
  std::string out = layout.magic + gguf_u32(layout.version) + gguf_u64(layout.n_tensors.value_or(tensors_.size())) +
                    gguf_u64(layout.n_keys.value_or(kvs_.size()));
  for (const Kv& k : kvs_) out += k.encoded;
  std::vector<uint64_t> offsets;
  uint64_t end = 0;
  for (const Tensor& t : tensors_) {
    const uint64_t off = t.offset.value_or(align_up(end, al));
    offsets.push_back(off);
    end = std::max(end, off + t.data.size());
    out += gguf_str(t.name) + gguf_u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) out += gguf_u64(d);
    out += gguf_u32(t.type) + gguf_u64(off);
  }
  if (tensors_.empty()) return out;
  out.resize(align_up(out.size(), al), '\0');
  std::string data(align_up(end, al), '\0');
  for (size_t i = 0; i < tensors_.size(); ++i)
    std::copy(tensors_[i].data.begin(), tensors_[i].data.end(), data.begin() + static_cast<ptrdiff_t>(offsets[i]));
  return out + data;
}

void GgufBuilder::write(const std::filesystem::path& path, const Layout& layout) const {
  const std::string b = bytes(layout);
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o.write(b.data(), static_cast<std::streamsize>(b.size()));
  if (!o) throw std::runtime_error("cannot write " + path.string());
}

GgufBuilder tiny_llama_gguf() {
  constexpr uint64_t H = 64, F = 96, V = 40, KV = 32;
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_string("general.name", "tiny")
      .kv_u32("llama.context_length", 256)
      .kv_u32("llama.embedding_length", H)
      .kv_u32("llama.block_count", 2)
      .kv_u32("llama.feed_forward_length", F)
      .kv_u32("llama.attention.head_count", 4)
      .kv_u32("llama.attention.head_count_kv", 2)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_f32("llama.rope.freq_base", 10000.0f)
      .kv_u32("llama.rope.dimension_count", 16)
      .kv_u32("llama.vocab_size", V)
      .kv_string("tokenizer.ggml.model", "gpt2");
  std::vector<std::string> tokens;
  for (uint64_t i = 0; i < V; ++i) tokens.push_back(std::to_string(i).insert(0, "t"));
  b.kv_strings("tokenizer.ggml.tokens", tokens).kv_u32("tokenizer.ggml.bos_token_id", 1).kv_u32(
      "tokenizer.ggml.eos_token_id", 2);
  b.tensor("token_embd.weight", {H, V}, 2 /* Q4_0 */).tensor("output_norm.weight", {H}, 0);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    b.tensor(p + "attn_norm.weight", {H}, 0)
        .tensor(p + "attn_q.weight", {H, H}, 8 /* Q8_0 */)
        .tensor(p + "attn_k.weight", {H, KV}, 8)
        .tensor(p + "attn_v.weight", {H, KV}, 8)
        .tensor(p + "attn_output.weight", {H, H}, 8)
        .tensor(p + "ffn_norm.weight", {H}, 0)
        .tensor(p + "ffn_gate.weight", {H, F}, 1 /* F16 */)
        .tensor(p + "ffn_up.weight", {H, F}, 1)
        .tensor(p + "ffn_down.weight", {F, H}, 1);
  }
  return b;
}

void write_sparse(const std::filesystem::path& path, const std::string& head, uint64_t size) {
  {
    std::ofstream o(path, std::ios::binary | std::ios::trunc);
    o.write(head.data(), static_cast<std::streamsize>(head.size()));
    if (!o) throw std::runtime_error("cannot write " + path.string());
  }
  std::error_code ec;
  std::filesystem::resize_file(path, size, ec);   // the rest reads as zeros, and takes no disk on most file systems
  if (ec) throw std::runtime_error("cannot size " + path.string() + ": " + ec.message());
}

}  // namespace reach::test
