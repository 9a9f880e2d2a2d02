#include "runtime/quant/quantize_model.hpp"

#include <cstring>
#include <map>
#include <memory>

#include "base/error.hpp"
#include "base/half.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/config/tensor_names.hpp"
#include "runtime/formats/gguf_write.hpp"
#include "runtime/formats/safetensors.hpp"
#include "runtime/quant/quantize.hpp"
#include "runtime/text/tokenizer.hpp"

namespace fs = std::filesystem;

namespace reach {

namespace {

// llama.cpp's llama_ftype for general.file_type (what `llama-quantize` writes).
uint32_t file_type_of(WType t) {
  switch (t) {
    case WType::f32: return 0;    // ALL_F32
    case WType::f16: return 1;    // MOSTLY_F16
    case WType::q4_0: return 2;   // MOSTLY_Q4_0
    case WType::q8_0: return 7;   // MOSTLY_Q8_0
    case WType::q4_k: return 14;  // MOSTLY_Q4_K_S
    default: return 0;
  }
}

// What a llama GGUF cannot say about this config: refused, since the file
// would otherwise run a different model.
void check_expressible(const ModelConfig& c) {
  auto refuse = [&](const std::string& what) {
    throw Error(ErrorCode::unsupported, "config.json (" + c.source.string() + "): " + what +
                                            ", which a llama GGUF cannot express; run the folder directly instead");
  };
  if (c.arch != ModelArch::llama)
    throw Error(ErrorCode::unsupported, "config.json (" + c.source.string() + "): a " + c.family() + " model: reach "
                "quantize writes llama-architecture GGUFs only - run the folder directly with --quantize TYPE, or "
                "convert it with llama.cpp's convert_hf_to_gguf.py");
  const RopeType rt = c.rope.type;
  if (rt != RopeType::default_ && rt != RopeType::linear && rt != RopeType::yarn)
    refuse(std::string("rope scaling '") + rope_type_name(rt) + "' (GGUF: none, linear, yarn)");
  if (rt == RopeType::yarn && (c.rope.mscale || c.rope.mscale_all_dim || !c.rope.truncate))
    refuse("yarn with mscale / mscale_all_dim / truncate=false");
  if (c.rotary_dim != c.head_dim)
    refuse("partial rotary embedding (" + std::to_string(c.rotary_dim) + " of " + std::to_string(c.head_dim) +
           " head dimensions; llama.cpp's row permutation covers whole heads)");
  if (c.sliding_window) refuse("a sliding window of " + std::to_string(*c.sliding_window));
  const ReachAttention& a = c.attn;
  if (a.logn_train_len || a.qk_norm != QkNorm::none || a.cos_n || a.window || a.sinks || !a.layers.empty() ||
      a.alibi_max_bias)
    refuse("reach_attention settings");
}

void put_config(GgufWriter& w, const ModelConfig& c, const std::string& name, WType type) {
  const std::string a = "llama.";
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };   // bounded by config parsing (<= INT32_MAX)
  w.put_string("general.architecture", "llama");
  w.put_string("general.name", name);
  w.put_u32("general.alignment", 32);
  w.put_u32("general.file_type", file_type_of(type));
  w.put_u32("general.quantization_version", 2);
  w.put_u32(a + "vocab_size", u32(c.vocab_size));
  w.put_u32(a + "context_length", u32(c.max_position_embeddings));
  w.put_u32(a + "embedding_length", u32(c.hidden_size));
  w.put_u32(a + "block_count", u32(c.n_layers));
  w.put_u32(a + "feed_forward_length", u32(c.intermediate_size));
  w.put_u32(a + "attention.head_count", u32(c.n_heads));
  w.put_u32(a + "attention.head_count_kv", u32(c.n_kv_heads));
  if (c.head_dim * c.n_heads != c.hidden_size) {
    w.put_u32(a + "attention.key_length", u32(c.head_dim));
    w.put_u32(a + "attention.value_length", u32(c.head_dim));
  }
  w.put_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.put_f32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.put_u32(a + "rope.dimension_count", u32(c.rotary_dim));
  const RopeScaling& r = c.rope;
  if (r.type == RopeType::linear || r.type == RopeType::yarn) {
    w.put_string(a + "rope.scaling.type", r.type == RopeType::linear ? "linear" : "yarn");
    w.put_f32(a + "rope.scaling.factor", static_cast<float>(r.factor));
    if (r.original_max_position > 0)
      w.put_u32(a + "rope.scaling.original_context_length", u32(r.original_max_position));
    if (r.type == RopeType::yarn) {
      w.put_f32(a + "rope.scaling.yarn_beta_fast", static_cast<float>(r.beta_fast));
      w.put_f32(a + "rope.scaling.yarn_beta_slow", static_cast<float>(r.beta_slow));
      if (r.attention_factor) w.put_f32(a + "rope.scaling.attn_factor", static_cast<float>(*r.attention_factor));
    }
  }
}

struct Plan {
  std::string gguf_name;
  const TensorInfo* src;
  int64_t rows, cols;        // cols = 0: a vector of `rows`
  int64_t permute_heads;     // 0: none
};

}  // namespace

void permute_rotary_rows(const float* in, float* out, int64_t rows, int64_t cols, int64_t n_heads) {
  const int64_t hd = rows / n_heads, half = hd / 2;
  if (n_heads <= 0 || rows % n_heads || hd % 2)
    throw Error(ErrorCode::internal, "permute_rotary_rows: " + std::to_string(rows) + " rows do not split into " +
                                         std::to_string(n_heads) + " heads of an even size");
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i)
        std::memcpy(out + (h * hd + 2 * i + s) * cols, in + (h * hd + s * half + i) * cols,
                    size_t(cols) * sizeof(float));
}

bool quantize_model_supported(WType t) { return t == WType::f32 || t == WType::f16 || quantize_supported(t); }

QuantizeModelSummary quantize_model(const fs::path& in_dir, const fs::path& out, const QuantizeModelOptions& opt) {
  if (!quantize_model_supported(opt.type))
    throw Error(ErrorCode::unsupported, std::string("reach quantize does not write ") + wtype_name(opt.type) +
                                            "; it writes f32, f16, " + quantize_type_names());
  if (!fs::is_directory(in_dir))
    throw Error(ErrorCode::io, "model directory " + in_dir.string() +
                                   " does not exist or is not a directory: pass the folder holding config.json, "
                                   "model.safetensors and tokenizer.json");
  for (const char* f : {"config.json", "tokenizer.json"})
    if (!fs::exists(in_dir / f))
      throw Error(ErrorCode::io, (in_dir / f).string() + " is missing: a model folder to quantize holds "
                                                         "config.json, *.safetensors and tokenizer.json");
  if (fs::is_directory(out))
    throw Error(ErrorCode::invalid_argument,
                "output " + out.string() + " is a directory: name the .gguf file to write");
  const fs::path out_dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (!fs::is_directory(out_dir))
    throw Error(ErrorCode::io, "cannot write " + out.string() + ": folder " + out_dir.string() +
                                   " does not exist - create it first");
  const ModelConfig c = load_model_config(in_dir / "config.json");
  check_expressible(c);
  const Tokenizer tok = Tokenizer::load(in_dir / "tokenizer.json");
  ModelWeights w = ModelWeights::open_dir(in_dir);

  GgufWriter gw;
  fs::path abs = fs::absolute(in_dir).lexically_normal();
  if (abs.filename().empty()) abs = abs.parent_path();
  put_config(gw, c, abs.filename().string(), opt.type);
  try {
    tok.to_gguf(gw, c.vocab_size > 0 ? static_cast<size_t>(c.vocab_size) : 0);
  } catch (const Error& e) {
    throw Error(e.code(), "tokenizer.json (" + (in_dir / "tokenizer.json").string() +
                              "): cannot write it as GGUF metadata: " + e.what());
  }
  // config.json's special ids win over the tokenizer's, as when loading the folder.
  if (!c.bos_ids.empty()) gw.put_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(c.bos_ids.front()));
  if (!c.eos_ids.empty()) gw.put_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_ids.front()));

  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
  const std::string why = "config.json says hidden_size=" + std::to_string(H) + ", intermediate_size=" +
                          std::to_string(I) + ", vocab_size=" + std::to_string(V) + ", heads=" +
                          std::to_string(c.n_heads) + "x" + std::to_string(c.head_dim) + ", kv_heads=" +
                          std::to_string(c.n_kv_heads);
  std::vector<Plan> plan;
  auto mat = [&](const std::string& g, const std::string& hf, int64_t rows, int64_t cols, int64_t heads = 0) {
    plan.push_back({g, &w.get(hf, {rows, cols}, why), rows, cols, heads});
  };
  auto vec = [&](const std::string& g, const std::string& hf, int64_t n, int64_t heads = 0) {
    plan.push_back({g, &w.get(hf, {n}, why), n, 0, heads});
  };
  // Llama's tensors, named by role in both sources (runtime/config/tensor_names.hpp).
  auto mat_r = [&](Role r, int64_t layer, int64_t rows, int64_t cols, int64_t heads = 0) {
    mat(gguf_tensor_name(r, layer), hf_tensor_name(r, layer), rows, cols, heads);
  };
  auto vec_r = [&](Role r, int64_t layer, int64_t n, int64_t heads = 0) {
    vec(gguf_tensor_name(r, layer), hf_tensor_name(r, layer), n, heads);
  };
  mat_r(Role::embed, 0, V, H);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    vec_r(Role::attn_norm, i, H);
    mat_r(Role::q, i, qd, H, c.n_heads);
    mat_r(Role::k, i, kvd, H, c.n_kv_heads);
    mat_r(Role::v, i, kvd, H);
    mat_r(Role::o, i, H, qd);
    if (c.attention_bias) {   // permuted as the weight rows they add to
      vec_r(Role::q_bias, i, qd, c.n_heads);
      vec_r(Role::k_bias, i, kvd, c.n_kv_heads);
      vec_r(Role::v_bias, i, kvd);
      if (w.find(hf_tensor_name(Role::o_bias, i))) vec_r(Role::o_bias, i, H);
    }
    vec_r(Role::mlp_norm, i, H);
    mat_r(Role::gate, i, I, H);
    mat_r(Role::up, i, I, H);
    mat_r(Role::down, i, H, I);
  }
  vec_r(Role::final_norm, 0, H);
  if (!c.tie_word_embeddings) {
    const std::string head = hf_tensor_name(Role::lm_head, 0);
    if (!w.find(head))
      throw Error(ErrorCode::format, "tensor " + head + " is missing from " + in_dir.string() +
                                         " and config.json has tie_word_embeddings=false: set it to true if the "
                                         "model shares its embedding table, or restore " + head);
    mat_r(Role::lm_head, 0, V, H);
  }

  QuantizeModelSummary sum;
  std::map<std::pair<int64_t, WType>, std::vector<std::string>> fallbacks;   // (row length, type) -> tensors
  for (const Plan& p : plan) {
    WType t = p.cols ? opt.type : WType::f32;
    if (wtype_is_quant(t) && p.cols % wtype_block_elems(t) != 0) {
      t = p.cols % 32 == 0 ? WType::q8_0 : WType::f16;
      fallbacks[{p.cols, t}].push_back(p.gguf_name);
    }
    std::vector<int64_t> shape = p.cols ? std::vector<int64_t>{p.rows, p.cols} : std::vector<int64_t>{p.rows};
    const unsigned threads = opt.threads;
    const Plan q = p;
    gw.add_tensor(p.gguf_name, ggml_type_of(t), shape, [q, t, threads](std::byte* dst) {
      const int64_t cols = q.cols ? q.cols : 1;
      std::vector<float> f(size_t(q.rows * cols));
      convert_to_f32(*q.src, f.data());
      if (q.permute_heads) {
        std::vector<float> tmp(f.size());
        permute_rotary_rows(f.data(), tmp.data(), q.rows, cols, q.permute_heads);
        f.swap(tmp);
      }
      if (t == WType::f32) {
        std::memcpy(dst, f.data(), f.size() * sizeof(float));
      } else if (t == WType::f16) {
        for (size_t i = 0; i < f.size(); ++i) {
          const uint16_t h = f32_to_f16_bits(f[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
      } else {
        quantize_matrix(t, f.data(), static_cast<uint32_t>(q.rows), static_cast<uint32_t>(cols), dst, threads);
      }
    });
    sum.types.emplace_back(p.gguf_name, t);
    sum.params += uint64_t(p.src->numel());
  }
  for (const auto& [key, names] : fallbacks) {
    if (!opt.on_note) break;
    std::string list;
    for (size_t i = 0; i < names.size() && i < 3; ++i) list += (i ? ", " : "") + names[i];
    if (names.size() > 3) list += " and " + std::to_string(names.size() - 3) + " more";
    opt.on_note(std::to_string(names.size()) + " matrices with rows of " + std::to_string(key.first) +
                " (not a multiple of " + wtype_name(opt.type) + "'s " + std::to_string(wtype_block_elems(opt.type)) +
                "-weight blocks) are written as " + wtype_name(key.second) + ": " + list);
  }
  sum.tensors = gw.n_tensors();
  sum.bytes = gw.data_bytes();
  gw.write(out, opt.on_progress);
  return sum;
}

}  // namespace reach
