// Host quantization, the GGUF writer and `reach quantize`, against the PyPI
// gguf package (tests/python/quant_ref.py): quantize_matrix byte-identical to
// gguf.quants.quantize (q8_0, q4_0) and to ggml's reference Q4_K quantizer
// (gguf.quants has none); written files read back by reach's GgufFile and by
// gguf.GGUFReader alike; a quantized tiny model dequantized by gguf.quants
// within the formats' error bounds, its q/k rows restored by
// tools/convert_smollm2.py's unpermute.  Python parts SKIP without gguf.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/half.hpp"
#include "base/platform/process.hpp"
#include "include/reach.h"
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

template <class T>
void write_vec(const fs::path& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
  REQUIRE(f.good());
}

template <class T>
std::vector<T> read_vec(const fs::path& p) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  REQUIRE(f.good());
  std::vector<T> v(size_t(f.tellg()) / sizeof(T));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
  return v;
}

// Runs quant_ref.py with `args`; false (after a SKIP message) when python3 lacks gguf / numpy (exit 3).
bool quant_ref(const std::string& args) {
  const std::string cmd = "python3 " + (source_root() / "tests/python/quant_ref.py").string() + " " + args;
  const int rc = std::system(cmd.c_str());
  REQUIRE(reach::platform::command_exit_code(rc) >= 0);
  if (reach::platform::command_exit_code(rc) == 3) {
    MESSAGE("SKIP: python3 cannot import gguf/numpy (tools/get_smollm2.sh installs them)");
    return false;
  }
  REQUIRE_MESSAGE(reach::platform::command_exit_code(rc) == 0, "command failed: " << cmd);
  return true;
}

// Gaussian rows with the cases a quantizer gets wrong, by row (mod 8): an all-zero
// first block, tiny and huge magnitudes, a negative value of largest magnitude
// (and a +/- tie for it), exact .5 ties, constant blocks, a lone non-zero value.
std::vector<float> hard_matrix(WType t, uint32_t rows, uint32_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const uint32_t blk = wtype_block_elems(t);
  std::vector<float> m(size_t(rows) * cols);
  for (float& x : m) x = normal(rng);
  // Q4_K squares values and sums 32 of them in f32: 1e15 keeps that finite.
  const float huge = t == WType::q4_k ? 1e15f : 1e30f;
  for (uint32_t r = 0; r < rows; ++r) {
    float* row = m.data() + size_t(r) * cols;
    switch (r % 8) {
      case 1: std::fill(row, row + blk, 0.f); break;
      case 2: for (uint32_t c = 0; c < cols; ++c) row[c] *= 1e-20f; break;
      case 3: for (uint32_t c = 0; c < cols; ++c) row[c] *= huge; break;
      case 4:
        for (uint32_t b = 0; b < cols; b += blk) {
          row[b + 3] = -5.f;
          if (b % (2 * blk) == 0) row[b + 9] = 5.f;   // |max| tie: the first one (negative) wins
        }
        break;
      case 5:   // exact ties: q8_0 (amax 127: d = 1), q4_0 (max -8: d = 1), q4_k (integer levels)
        for (uint32_t c = 0; c < cols; ++c) {
          if (t == WType::q4_k) row[c] = float(int(rng() % 16));
          else row[c] = float(int(rng() % 15) - 7) + 0.5f;
        }
        for (uint32_t b = 0; b < cols && t != WType::q4_k; b += blk) row[b] = t == WType::q8_0 ? 127.f : -8.f;
        break;
      case 6:
        for (uint32_t c = 0; c < cols; ++c) row[c] = (c / blk) % 2 ? 0.75f : -2.5f;
        break;
      case 7:
        std::fill(row, row + cols, 0.f);
        row[cols / 2 + 1] = -0.3f;
        break;
    }
  }
  return m;
}

size_t first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i]) return i;
  return a.size() == b.size() ? SIZE_MAX : std::min(a.size(), b.size());
}

}  // namespace

TEST_CASE("quantize: q8_0, q4_0 and q4_k are byte-identical to gguf.quants / ggml's reference") {
  TempDir dir("quant");
  struct Case {
    WType t;
    uint32_t rows, cols;
  };
  const std::vector<Case> cases = {
      {WType::q8_0, 1, 32}, {WType::q8_0, 9, 96},  {WType::q8_0, 40, 320},
      {WType::q4_0, 1, 32}, {WType::q4_0, 9, 96},  {WType::q4_0, 40, 320},
      {WType::q4_k, 1, 256}, {WType::q4_k, 9, 512}, {WType::q4_k, 24, 768},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    INFO(std::string(wtype_name(c.t)) << " [" << c.rows << ", " << c.cols << "]");
    const std::vector<float> m = hard_matrix(c.t, c.rows, c.cols, seed++);
    std::vector<uint8_t> one(size_t(c.rows) * wtype_row_bytes(c.t, c.cols)), four(one.size());
    quantize_matrix(c.t, m.data(), c.rows, c.cols, one.data(), 1);
    quantize_matrix(c.t, m.data(), c.rows, c.cols, four.data(), 4);
    CHECK(one == four);   // threads split rows; the bytes do not depend on them
    write_vec(dir / "in.f32", m);
    const std::string shape = std::to_string(c.rows) + " " + std::to_string(c.cols) + " ";
    if (!quant_ref(std::string("quantize ") + wtype_name(c.t) + " " + shape + (dir / "in.f32").string() + " " +
                   (dir / "ref.bin").string()))
      return;
    const std::vector<uint8_t> ref = read_vec<uint8_t>(dir / "ref.bin");
    const size_t d = first_diff(one, ref);
    CHECK_MESSAGE(d == SIZE_MAX, "first differing byte " << d << " (block " << d / wtype_block_bytes(c.t)
                                                         << ") of " << ref.size());
  }
}

TEST_CASE("quantize: reach's q4_k dequantized by gguf.quants is within the format's error") {
  // The Q4_K reference is reach's own reading of ggml; gguf.quants' dequantizer
  // checks the block layout independently.  Bound per 32-value sub-block of range
  // R (max(x,0) - min(x,0)): one level step R/15, plus the 6-bit rounding of the
  // sub-block's scale and min against the super-block's largest (Rmax): 8 steps
  // of Rmax/(15*63) for the scale, half a step of Rmax/63 for the min.
  TempDir dir("quant_k");
  const uint32_t rows = 16, cols = 1024;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> m(size_t(rows) * cols);
  for (size_t i = 0; i < m.size(); ++i) m[i] = normal(rng) * (1.f + float(i % 97) / 20.f) + (i % 3 ? 0.f : 0.7f);
  std::vector<uint8_t> q(size_t(rows) * wtype_row_bytes(WType::q4_k, cols));
  quantize_matrix(WType::q4_k, m.data(), rows, cols, q.data());
  write_vec(dir / "q.bin", q);
  if (!quant_ref("dequantize q4_k " + std::to_string(rows) + " " + std::to_string(cols) + " " +
                 (dir / "q.bin").string() + " " + (dir / "out.f32").string()))
    return;
  const std::vector<float> y = read_vec<float>(dir / "out.f32");
  REQUIRE(y.size() == m.size());
  double worst = 0;
  for (size_t sb = 0; sb < m.size(); sb += 256) {
    float rmax = 0;
    for (size_t j = sb; j < sb + 256; j += 32) {
      float lo = 0, hi = 0;
      for (size_t i = j; i < j + 32; ++i) lo = std::min(lo, m[i]), hi = std::max(hi, m[i]);
      rmax = std::max(rmax, hi - lo);
    }
    for (size_t j = sb; j < sb + 256; j += 32) {
      float lo = 0, hi = 0;
      for (size_t i = j; i < j + 32; ++i) lo = std::min(lo, m[i]), hi = std::max(hi, m[i]);
      const double bound = (hi - lo) / 15.0 + rmax * (8.0 / (15 * 63) + 0.5 / 63) + 1e-6;
      for (size_t i = j; i < j + 32; ++i) {
        worst = std::max(worst, std::fabs(double(y[i]) - m[i]) / bound);
        if (std::fabs(double(y[i]) - m[i]) > bound) {
          FAIL_CHECK("value " << i << ": " << m[i] << " -> " << y[i] << ", bound " << bound);
          return;
        }
      }
    }
  }
  MESSAGE("q4_k: worst error " << worst << " of the bound");
}

TEST_CASE("quantize: f32 -> f16 rounds as numpy's astype(float16)") {
  TempDir dir("quant_f16");
  std::vector<float> v = {0.f, -0.f, 1.f, 65504.f, 65519.99f, 65520.f, -65520.f, 1e9f, 6.103515625e-05f,
                          6.1035e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 4.4703484e-08f, 1e-10f,
                          0.1f, 1.0009766f, 1.00048828125f, 1.00146484375f, std::numeric_limits<float>::infinity()};
  std::mt19937 rng(3);
  while (v.size() < 300000) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isfinite(f)) v.push_back(f);
    v.push_back(std::ldexp(float(rng() % 4096) / 4096.f + 1.f, int(rng() % 50) - 30));   // near f16's range
  }
  write_vec(dir / "in.f32", v);
  if (!quant_ref("f16 " + (dir / "in.f32").string() + " " + (dir / "out.bin").string())) return;
  const std::vector<uint16_t> ref = read_vec<uint16_t>(dir / "out.bin");
  REQUIRE(ref.size() == v.size());
  size_t bad = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (f32_to_f16_bits(v[i]) != ref[i] && bad++ < 5)
      FAIL_CHECK(v[i] << ": reach " << f32_to_f16_bits(v[i]) << ", numpy " << ref[i]);
  }
  CHECK(bad == 0);
  CHECK((f32_to_f16_bits(std::nanf("")) & 0x7c00) == 0x7c00);
  CHECK((f32_to_f16_bits(std::nanf("")) & 0x3ff) != 0);
}

TEST_CASE("quantize: bad types and shapes are errors, never crashes") {
  std::vector<float> m(64, 1.f);
  std::vector<uint8_t> out(1024);
  CHECK_HAS(error_of([&] { quantize_matrix(WType::q5_k, m.data(), 1, 256, out.data()); }, ErrorCode::unsupported),
            "q5_k");
  CHECK_HAS(error_of([&] { quantize_matrix(WType::f16, m.data(), 1, 64, out.data()); }, ErrorCode::unsupported),
            "q8_0, q4_0, q4_k");
  error_of([&] { quantize_matrix(WType::q8_0, m.data(), 1, 48, out.data()); }, ErrorCode::internal);
  error_of([&] { quantize_matrix(WType::q4_k, m.data(), 1, 64, out.data()); }, ErrorCode::internal);
  CHECK(quantize_supported(WType::q8_0));
  CHECK(quantize_supported(WType::q4_0));
  CHECK(quantize_supported(WType::q4_k));
  CHECK_FALSE(quantize_supported(WType::q4_1));
  CHECK(wtype_from_name("Q4_K") == WType::q4_k);
  CHECK(wtype_from_name("f16") == WType::f16);
  CHECK_FALSE(wtype_from_name("q3_k"));
}

TEST_CASE("quantize: the C API's quantize field keeps reach_model_params' layout") {
  // It took reserved[0]: a binary built against the older header passes zeros there.
  CHECK(offsetof(reach_model_params, quantize) == offsetof(reach_model_params, require_tokenizer) + 4);
  CHECK(offsetof(reach_model_params, reserved) == offsetof(reach_model_params, quantize) + 4);
  CHECK(sizeof(reach_model_params) ==
        (offsetof(reach_model_params, require_tokenizer) + 4 + 16 * 4 + alignof(reach_model_params) - 1) /
            alignof(reach_model_params) * alignof(reach_model_params));
  CHECK(reach_model_default_params().quantize == REACH_QUANTIZE_NONE);
}
