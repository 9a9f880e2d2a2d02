// The GGUF writer (runtime/formats/gguf_write.hpp) and `reach quantize`
// (runtime/quant/quantize_model.hpp, cli/cmd_quantize.cpp): files read back by
// reach's GgufFile and by gguf.GGUFReader (tests/python/quant_ref.py dump).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/platform/process.hpp"
#include "runtime/config/gguf_config.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/formats/gguf_write.hpp"
#include "runtime/formats/safetensors.hpp"
#include "runtime/quant/quantize.hpp"
#include "runtime/quant/quantize_model.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/model_fixture.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace reach;
using reach::test::error_of;
using reach::test::source_root;
using reach::test::TempDir;

namespace {

std::vector<uint8_t> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> file_f32(const fs::path& p) {
  const std::vector<uint8_t> b = file_bytes(p);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// gguf.GGUFReader's view of `gguf` in `out` (meta.json, i.bin, i.f32); false after a SKIP message.
bool py_dump(const fs::path& gguf, const fs::path& out, const std::string& extra = "") {
  fs::create_directories(out);
  const std::string cmd = "python3 " + (source_root() / "tests/python/quant_ref.py").string() + " dump " +
                          gguf.string() + " " + out.string() + extra;
  const int rc = std::system(cmd.c_str());
  REQUIRE(reach::platform::command_exit_code(rc) >= 0);
  if (reach::platform::command_exit_code(rc) == 3) {
    MESSAGE("SKIP: python3 cannot import gguf/numpy (tools/get_smollm2.sh installs them)");
    return false;
  }
  REQUIRE_MESSAGE(reach::platform::command_exit_code(rc) == 0, "command failed: " << cmd);
  return true;
}

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = std::byte(rng() & 0xff);
  return v;
}

std::vector<std::byte> as_bytes(const std::vector<uint16_t>& v) {
  std::vector<std::byte> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

bool no_temp_files(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

}  // namespace

TEST_CASE("gguf writer: every metadata type and tensor type, read by GgufFile and gguf.GGUFReader alike") {
  TempDir dir("gguf_write");
  GgufWriter w;
  w.put_string("general.architecture", "llama");
  w.put_u32("general.alignment", 64);
  w.put_u32("a.u32", 1);
  w.put_string("a.str", "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  w.put_string("a.empty", "");
  w.put_i32("a.i32", -2000000000);
  w.put_f32("a.f32", 0.1f);
  w.put_bool("a.true", true);
  w.put_bool("a.false", false);
  w.put_string_array("a.strs", {"x", "", "\xc4\xa0the", std::string(300, 'y')});
  w.put_i32_array("a.i32s", {3, -1, 2147483647});
  w.put_f32_array("a.f32s", {0.5f, -2.f, 1e-7f});
  w.put_i32_array("a.none", {});
  w.put_u32("a.u32", 4000000000u);   // again: keeps its place, takes the new value

  struct T {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<T> ts;
  std::vector<float> f32 = {1.5f, -2.f, 3.25f, 0.f, 1e-30f, 7.f, -8.f, 9.f, 10.f, 11.f, 12.f, 13.f, 14.f, 15.f, 16.f};
  std::vector<std::byte> fb(f32.size() * 4);
  std::memcpy(fb.data(), f32.data(), fb.size());
  ts.push_back({"f32", GgmlType::f32, {3, 5}, fb});
  ts.push_back({"f16", GgmlType::f16, {7}, as_bytes({0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3555, 0x1234})});
  ts.push_back({"bf16", GgmlType::bf16, {2, 1, 2, 2}, as_bytes({0x3f80, 0xc000, 0x4049, 0x0000, 1, 2, 3, 4})});
  std::vector<float> m(3 * 64);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(float(i));
  for (auto [t, rows, cols] : {std::tuple{WType::q8_0, 3u, 64u}, std::tuple{WType::q4_0, 3u, 64u},
                               std::tuple{WType::q4_k, 1u, 256u}}) {
    std::vector<float> src(size_t(rows) * cols);
    for (size_t i = 0; i < src.size(); ++i) src[i] = std::cos(float(i) * 0.37f);
    std::vector<std::byte> q(rows * wtype_row_bytes(t, cols));
    quantize_matrix(t, src.data(), rows, cols, q.data());
    ts.push_back({std::string("blk.0.") + wtype_name(t) + ".weight", ggml_type_of(t), {rows, cols}, q});
  }
  uint32_t seed = 1;
  for (auto [t, shape] : {std::pair{GgmlType::q4_1, std::vector<int64_t>{2, 96}},
                          std::pair{GgmlType::q5_0, std::vector<int64_t>{2, 3, 32}},
                          std::pair{GgmlType::q5_1, std::vector<int64_t>{64}},
                          std::pair{GgmlType::q5_k, std::vector<int64_t>{512}},
                          std::pair{GgmlType::q6_k, std::vector<int64_t>{3, 1, 256}}}) {
    ts.push_back({std::string("raw.") + ggml_type_traits(t).name, t, shape,
                  random_bytes(GgufWriter::tensor_bytes(t, shape), seed++)});
  }
  for (const T& t : ts) w.add_tensor(t.name, t.type, t.shape, t.bytes);
  const std::vector<std::byte> produced = random_bytes(32 * 18, 99);
  w.add_tensor("produced", GgmlType::q4_0, {1, 1024}, [&](std::byte* out) {
    std::memcpy(out, produced.data(), produced.size());
  });
  ts.push_back({"produced", GgmlType::q4_0, {1, 1024}, produced});

  const fs::path p = dir / "all.gguf";
  uint64_t last = 0, total = 0;
  w.write(p, [&](uint64_t d, uint64_t t) { last = d, total = t; return true; });
  CHECK(last == total);
  CHECK(total == w.data_bytes());
  CHECK(no_temp_files(dir.path));

  GgufFile f = GgufFile::open(p);
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  const std::vector<std::string> keys = {"general.architecture", "general.alignment", "a.u32", "a.str", "a.empty",
                                         "a.i32", "a.f32", "a.true", "a.false", "a.strs", "a.i32s", "a.f32s",
                                         "a.none"};
  CHECK(f.keys() == keys);
  CHECK(f.get_u32("a.u32") == 4000000000u);
  CHECK(f.get_string("a.str") == "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  CHECK(f.get_string("a.empty").empty());
  CHECK(f.get_i64("a.i32") == -2000000000);
  CHECK(f.find("a.i32")->type == GgufType::i32);
  CHECK(f.get_f64("a.f32") == double(0.1f));
  CHECK(f.get_bool("a.true"));
  CHECK_FALSE(f.get_bool("a.false"));
  const auto strs = f.get_string_array("a.strs");
  REQUIRE(strs.size() == 4);
  CHECK(strs[2] == "\xc4\xa0the");
  CHECK(strs[3] == std::string(300, 'y'));
  CHECK(f.get_int_array("a.i32s") == std::vector<int64_t>{3, -1, 2147483647});
  CHECK(f.get_f32_array("a.f32s") == std::vector<float>{0.5f, -2.f, 1e-7f});
  CHECK(f.array_size("a.none") == 0);
  REQUIRE(f.tensors().size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    INFO("tensor " << ts[i].name);
    CHECK(t.name == ts[i].name);
    CHECK(t.type == ts[i].type);
    CHECK(t.shape() == ts[i].shape);
    CHECK(t.offset % 64 == 0);
    REQUIRE(t.nbytes == ts[i].bytes.size());
    CHECK(std::memcmp(t.data, ts[i].bytes.data(), t.nbytes) == 0);
  }

  if (!py_dump(p, dir / "py")) return;
  const json meta = json::parse(reach::test::read_text(dir / "py" / "meta.json"));
  CHECK(meta["version"] == 3);
  CHECK(meta["alignment"] == 64);
  CHECK(meta["kv"].size() == keys.size());
  const json& kv = meta["kv"];
  CHECK(kv["a.u32"]["types"] == json{"UINT32"});
  CHECK(kv["a.u32"]["value"] == 4000000000u);
  CHECK(kv["a.str"]["value"] == "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  CHECK(kv["a.empty"]["value"] == "");
  CHECK(kv["a.i32"]["types"] == json{"INT32"});
  CHECK(kv["a.i32"]["value"] == -2000000000);
  CHECK(kv["a.f32"]["types"] == json{"FLOAT32"});
  CHECK(kv["a.f32"]["value"].get<double>() == double(0.1f));
  CHECK(kv["a.true"]["types"] == json{"BOOL"});
  CHECK(kv["a.true"]["value"] == true);
  CHECK(kv["a.false"]["value"] == false);
  CHECK(kv["a.strs"]["types"] == json{"ARRAY", "STRING"});
  CHECK(kv["a.strs"]["value"] == json{"x", "", "\xc4\xa0the", std::string(300, 'y')});
  CHECK(kv["a.i32s"]["types"] == json{"ARRAY", "INT32"});
  CHECK(kv["a.i32s"]["value"] == json{3, -1, 2147483647});
  CHECK(kv["a.f32s"]["types"] == json{"ARRAY", "FLOAT32"});
  CHECK(kv["a.f32s"]["value"] == json{double(0.5f), double(-2.f), double(1e-7f)});
  CHECK(kv["a.none"]["value"] == json::array());
  CHECK(kv["general.alignment"]["value"] == 64);
  REQUIRE(meta["tensors"].size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const json& e = meta["tensors"][i];
    INFO("tensor " << ts[i].name);
    CHECK(e["name"] == ts[i].name);
    CHECK(e["type"] == uint32_t(ts[i].type));
    CHECK(e["ne"].get<std::vector<int64_t>>() == f.tensors()[i].ne);
    const std::vector<uint8_t> b = file_bytes(dir / "py" / (std::to_string(i) + ".bin"));
    REQUIRE(b.size() == ts[i].bytes.size());
    CHECK(std::memcmp(b.data(), ts[i].bytes.data(), b.size()) == 0);
  }
}

TEST_CASE("gguf writer: bad tensors, unwritable paths and cancelling are clear errors, leaving no file") {
  TempDir dir("gguf_write_bad");
  GgufWriter w;
  w.put_string("general.architecture", "llama");
  CHECK_HAS(error_of([&] { w.add_tensor(std::string(65, 'n'), GgmlType::f32, {1}, random_bytes(4, 1)); },
                     ErrorCode::invalid_argument), "65 bytes");
  CHECK_HAS(error_of([&] { w.add_tensor("q", GgmlType::q8_0, {2, 48}, random_bytes(102, 1)); },
                     ErrorCode::invalid_argument), "not a multiple of Q8_0");
  CHECK_HAS(error_of([&] { w.add_tensor("z", GgmlType::f32, {0, 3}, std::vector<std::byte>{}); },
                     ErrorCode::invalid_argument), "'z'");
  CHECK_HAS(error_of([&] { w.add_tensor("five", GgmlType::f32, {1, 1, 1, 1, 1}, random_bytes(4, 1)); },
                     ErrorCode::invalid_argument), "5 dimensions");
  CHECK_HAS(error_of([&] { w.add_tensor("short", GgmlType::f16, {4}, random_bytes(6, 1)); },
                     ErrorCode::invalid_argument), "need 8");
  w.add_tensor("t", GgmlType::f32, {2}, random_bytes(8, 2));
  CHECK_HAS(error_of([&] { w.add_tensor("t", GgmlType::f32, {2}, random_bytes(8, 2)); },
                     ErrorCode::invalid_argument), "added twice");
  const fs::path missing = dir / "no_such_folder" / "x.gguf";
  CHECK_HAS(error_of([&] { w.write(missing); }, ErrorCode::io), missing.string());
  const fs::path p = dir / "x.gguf";
  CHECK_HAS(error_of([&] { w.write(p, [](uint64_t, uint64_t) { return false; }); }, ErrorCode::cancelled),
            p.string());
  CHECK_FALSE(fs::exists(p));
  CHECK(no_temp_files(dir.path));
  w.write(p);
  CHECK(GgufFile::open(p).tensors().size() == 1);
}

namespace {

// The HF tensor a GGUF tensor was written from (quantize_model's names).
std::string hf_name(const std::string& g) {
  static const std::map<std::string, std::string> global = {{"token_embd.weight", "model.embed_tokens.weight"},
                                                            {"output_norm.weight", "model.norm.weight"},
                                                            {"output.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> layer = {
      {"attn_norm", "input_layernorm"},     {"attn_q", "self_attn.q_proj"},   {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},       {"attn_output", "self_attn.o_proj"},
      {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"}};
  if (auto it = global.find(g); it != global.end()) return it->second;
  const size_t a = g.find('.', 4), b = g.rfind('.');
  REQUIRE((g.rfind("blk.", 0) == 0 && a != std::string::npos && b > a));
  const std::string part = g.substr(a + 1, b - a - 1);
  REQUIRE(layer.count(part));
  return "model.layers." + g.substr(4, a - 4) + "." + layer.at(part) + g.substr(b);
}

// Largest error a value of `block` may have after a round trip through type t
// (per block of the format; see the q4_k test in test_quantize.cpp for its terms).
double error_bound(WType t, const float* x, size_t n) {
  float amax = 0, lo = 0, hi = 0;
  for (size_t i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  switch (t) {
    case WType::f32: return 0;
    case WType::f16: return amax * 0x1p-11 + 0x1p-24;           // half an ulp, or a subnormal step
    case WType::q8_0: return amax / 127 * (0.5 + 127 * 0x1p-11) + 1e-12;   // half a step + the f16 scale's rounding
    case WType::q4_0: return amax / 8 * (1 + 16 * 0x1p-11) + 1e-12;        // -max clips from level 16 to 15: a step
    default: return (hi - lo) / 15.0 * 1.5 + 1e-9;   // q4_k within a sub-block (scale rounding: see test_quantize)
  }
}

// Quantizes `model` to `t` and checks the file against the source weights and config.
void check_quantized_model(const fs::path& model, WType t, const TempDir& dir) {
  INFO("model " << model.string() << " as " << std::string(wtype_name(t)));
  const fs::path out = dir / (std::string(wtype_name(t)) + ".gguf");
  std::vector<std::string> notes;
  QuantizeModelOptions o;
  o.type = t;
  o.on_note = [&](const std::string& s) { notes.push_back(s); };
  QuantizeModelSummary sum;
  try {
    sum = quantize_model(model, out, o);
  } catch (const Error& e) {
    // Until Tokenizer::to_gguf is implemented the tokenizer step refuses; nothing may be left behind.
    const std::string msg = e.what();
    REQUIRE_MESSAGE((e.code() == ErrorCode::unsupported && msg.find("tokenizer.json") != std::string::npos), msg);
    CHECK_FALSE(fs::exists(out));
    CHECK(no_temp_files(dir.path));
    MESSAGE("SKIP: " << msg);
    return;
  }
  CHECK(no_temp_files(dir.path));
  GgufFile f = GgufFile::open(out);
  const ModelConfig c = load_model_config(model / "config.json"), g = model_config_from_gguf(f);
  CHECK(g.hidden_size == c.hidden_size);
  CHECK(g.intermediate_size == c.intermediate_size);
  CHECK(g.n_layers == c.n_layers);
  CHECK(g.n_heads == c.n_heads);
  CHECK(g.n_kv_heads == c.n_kv_heads);
  CHECK(g.head_dim == c.head_dim);
  CHECK(g.vocab_size == c.vocab_size);
  CHECK(g.max_position_embeddings == c.max_position_embeddings);
  CHECK(g.rms_norm_eps == c.rms_norm_eps);
  CHECK(g.rope_theta == c.rope_theta);
  CHECK(g.rotary_dim == c.rotary_dim);
  CHECK(g.rope.type == c.rope.type);
  CHECK(g.rope.factor == c.rope.factor);
  CHECK(g.rope.original_max_position == c.rope.original_max_position);
  CHECK(g.rope.beta_fast == c.rope.beta_fast);
  CHECK(g.rope.beta_slow == c.rope.beta_slow);
  CHECK(g.tie_word_embeddings == c.tie_word_embeddings);
  CHECK(g.attention_bias == c.attention_bias);
  if (!c.bos_ids.empty()) CHECK(g.bos_ids == std::vector<int32_t>{c.bos_ids[0]});
  if (!c.eos_ids.empty()) CHECK(g.eos_ids == std::vector<int32_t>{c.eos_ids[0]});
  CHECK(f.tensors().size() == sum.tensors);

  const std::string heads = " --unpermute " + std::to_string(c.n_heads) + " " + std::to_string(c.n_kv_heads);
  if (!py_dump(out, dir / (std::string(wtype_name(t)) + "_py"), heads)) return;
  const fs::path py = dir / (std::string(wtype_name(t)) + "_py");
  const json meta = json::parse(reach::test::read_text(py / "meta.json"));
  REQUIRE(meta["tensors"].size() == f.tensors().size());
  const ModelWeights w = ModelWeights::open_dir(model);
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensor& gt = f.tensors()[i];
    INFO("tensor " << gt.name);
    CHECK(meta["tensors"][i]["name"] == gt.name);
    CHECK(meta["tensors"][i]["type"] == uint32_t(gt.type));
    const std::vector<uint8_t> b = file_bytes(py / (std::to_string(i) + ".bin"));
    REQUIRE(b.size() == gt.nbytes);
    CHECK(std::memcmp(b.data(), gt.data, b.size()) == 0);
    // Types: vectors f32; matrices the asked type, or q8_0 where rows do not split into its blocks.
    const TensorInfo& src = w.get(hf_name(gt.name));
    const int64_t cols = src.shape.back();
    WType want = src.shape.size() == 1 ? WType::f32 : t;
    if (wtype_is_quant(want) && cols % wtype_block_elems(want)) want = WType::q8_0;
    CHECK(gt.type == ggml_type_of(want));
    CHECK(gt.shape() == src.shape);
    // Values: gguf.quants' dequantization, q/k rows restored by convert_smollm2's unpermute.
    std::vector<float> x(size_t(src.numel()));
    convert_to_f32(src, x.data());
    const std::vector<float> y = file_f32(py / (std::to_string(i) + ".f32"));
    REQUIRE(y.size() == x.size());
    const size_t blk = src.shape.size() == 1 ? 1 : (want == WType::q4_k ? 32 : wtype_block_elems(want));
    size_t bad = 0;
    for (size_t s = 0; s < x.size(); s += std::max<size_t>(blk, 1)) {
      const size_t n = std::min(blk, x.size() - s);
      const double bound = error_bound(want, x.data() + s, n);
      for (size_t k = s; k < s + n; ++k)
        if (std::fabs(double(y[k]) - x[k]) > bound && bad++ < 3)
          FAIL_CHECK("value " << k << ": source " << x[k] << ", file " << y[k] << ", bound " << bound);
    }
    CHECK(bad == 0);
  }
  if (t == WType::q4_k && c.intermediate_size % 256) CHECK(notes.size() >= 1);
}

}  // namespace

TEST_CASE("reach quantize: tiny models read back with GgufFile and gguf.GGUFReader, within each type's error") {
  TempDir dir("quantize_model");
  // Untied with biases (bf16, yarn): ffn_down rows of 320 fall back to q8_0 under q4_k.
  const fs::path a = reach::test::tiny_model(
      "--hidden 256 --intermediate 320 --heads 4 --kv-heads 2 --bias --dtype bf16 --rope-scaling "
      "'{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 512}'");
  // Tied, head_dim 32 (key_length written), f32.
  const fs::path b = reach::test::tiny_model("--hidden 256 --intermediate 512 --heads 4 --kv-heads 1 --head-dim 32 "
                                             "--tie --rope-theta 500000");
  for (WType t : {WType::q4_k, WType::q8_0}) check_quantized_model(a, t, dir);
  for (WType t : {WType::q4_0, WType::f16, WType::f32}) check_quantized_model(b, t, dir);
}

TEST_CASE("reach quantize: unusable inputs are clear errors") {
  TempDir dir("quantize_bad");
  const fs::path tiny = reach::test::tiny_model("");
  QuantizeModelOptions o;
  o.type = WType::q5_k;
  CHECK_HAS(error_of([&] { quantize_model(tiny, dir / "x.gguf", o); }, ErrorCode::unsupported), "q5_k");
  o.type = WType::q8_0;
  CHECK_HAS(error_of([&] { quantize_model(dir / "nope", dir / "x.gguf", o); }, ErrorCode::io), "nope");
  CHECK_HAS(error_of([&] { quantize_model(tiny, dir / "missing" / "x.gguf", o); }, ErrorCode::io), "missing");
  CHECK_HAS(error_of([&] { quantize_model(tiny, dir.path, o); }, ErrorCode::invalid_argument), "directory");
  fs::create_directories(dir / "m");
  fs::copy_file(tiny / "config.json", dir / "m" / "config.json");
  CHECK_HAS(error_of([&] { quantize_model(dir / "m", dir / "x.gguf", o); }, ErrorCode::io), "tokenizer.json");
  const fs::path dyn =
      reach::test::tiny_model("--rope-scaling '{\"rope_type\": \"dynamic\", \"factor\": 2.0}'");
  CHECK_HAS(error_of([&] { quantize_model(dyn, dir / "x.gguf", o); }, ErrorCode::unsupported), "dynamic");
  CHECK_FALSE(fs::exists(dir / "x.gguf"));

  // The CLI: flags checked before any work or device.
  const std::string reach = (reach::test::build_root() / "cli" / "reach").string();
  auto run = [&](const std::string& args) {
    std::string out;
    std::FILE* p = popen((reach + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = pclose(p);
    return std::pair{reach::platform::command_exit_code(rc), out};
  };
  auto [rc1, o1] = run("quantize " + tiny.string() + " " + (dir / "y.gguf").string() + " --type q5_k");
  CHECK(rc1 == 1);
  CHECK_HAS(o1, "q8_0, q4_0, q4_k, f16 or f32");
  auto [rc2, o2] = run("quantize " + tiny.string());
  CHECK(rc2 == 1);
  CHECK_HAS(o2, "OUT.gguf");
  auto [rc3, o3] = run("run -m " + tiny.string() + " -p hi --quantize q6_k");
  CHECK(rc3 == 1);
  CHECK_HAS(o3, "--quantize 'q6_k' is not a type reach quantizes to: use q8_0, q4_0, q4_k");
  auto [rc4, o4] = run("quantize --help");
  CHECK(rc4 == 0);
  CHECK_HAS(o4, "--type T");
}
