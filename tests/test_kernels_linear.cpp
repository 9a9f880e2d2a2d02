// Linear kernels (gemm, matvec, linear) against a double-precision CPU
// reference, in the spirit of llama.cpp's test-backend-ops: random inputs,
// edge sizes around the tile sizes, every weight type, every kernel variant
// the specialization constants offer, weights split into several bindings.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/error.hpp"
#include "tests/test_device.hpp"

using namespace reach;
using reach::test::gpu;

namespace {

enum class Op { gemm, matvec, linear };
const char* op_name(Op op) { return op == Op::gemm ? "gemm" : op == Op::matvec ? "matvec" : "linear"; }

// Cheap deterministic values in [-1, 1) (the big-weight case needs 34 M of them).
inline float hash_value(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(int32_t(z >> 40) - (1 << 23)) / float(1 << 23);
}

// Weights as stored on the device plus their exactly dequantized f32 values.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;
};
Weights make_weights(WType t, uint64_t n, uint32_t seed) {
  Weights w;
  w.deq.resize(n);
  w.bytes.resize(n * wtype_size(t));
  for (uint64_t i = 0; i < n; ++i) {
    const float v = hash_value(i, seed);
    if (t == WType::f32) {
      w.deq[i] = v;
      std::memcpy(&w.bytes[i * 4], &v, 4);
    } else {
      const uint16_t b = t == WType::f16 ? reach::test::f32_to_f16_bits(v) : reach::test::f32_to_bf16_bits(v);
      w.deq[i] = t == WType::f16 ? reach::test::f16_bits_to_f32(b) : reach::test::bf16_bits_to_f32(b);
      std::memcpy(&w.bytes[i * 2], &b, 2);
    }
  }
  return w;
}

struct Case {
  Op op;
  uint32_t M, N, K;
  WType type;
  // Byte offsets of X, W, Y inside their buffers (exercise the element-offset path).
  uint32_t x_off = 0, w_off = 0, y_off = 0;
};

struct Outcome {
  double max_err = 0, tol = 0;
  uint32_t worst_m = 0, worst_n = 0;
};

// Runs one case on `k` and compares every output with the reference.
Outcome run_case(Kernels& k, const Case& c, uint32_t seed) {
  auto& g = gpu();
  const uint32_t M = c.M, N = c.N, K = c.K;
  std::vector<float> x(size_t(M) * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed * 7 + 1);
  const Weights w = make_weights(c.type, uint64_t(N) * K, seed * 7 + 2);

  std::vector<uint8_t> xbytes(c.x_off + x.size() * 4, 0xCD);
  std::memcpy(xbytes.data() + c.x_off, x.data(), x.size() * 4);
  std::vector<uint8_t> wbytes(c.w_off + w.bytes.size(), 0xCD);
  std::memcpy(wbytes.data() + c.w_off, w.bytes.data(), w.bytes.size());
  Buffer bx = g.upload_bytes(xbytes.data(), xbytes.size());
  Buffer bw = g.upload_bytes(wbytes.data(), wbytes.size(), Arena::weights);
  // Y is pre-filled with a sentinel: elements outside [y_off, y_off + M*N) must keep it.
  const size_t y_total = c.y_off / 4 + size_t(M) * N + 5;
  std::vector<float> sentinel(y_total, -12345.0f);
  Buffer by = g.upload_f32(sentinel);

  Act ax{&bx, c.x_off, M, K};
  Mat mw{&bw, c.w_off, c.type, N, K};
  Act ay{&by, c.y_off, M, N};
  CommandList cmd(*g.device);
  cmd.begin();
  if (c.op == Op::gemm) k.gemm(cmd, ax, mw, ay);
  else if (c.op == Op::matvec) k.matvec(cmd, ax, mw, ay);
  else k.linear(cmd, ax, mw, ay);
  cmd.end();
  cmd.run();
  const auto y = g.download_f32(by, y_total);

  // Tolerance: every product is bounded by max|x|·max|w| (the reference uses the
  // dequantized weights, so only f32 rounding differs).  f32 accumulation of K
  // terms errs by at most ~K·2^-24 relative to Σ|x·w| ≤ K·max|x|·max|w|; for
  // the K of this suite that worst case is below 1e-5·K·max|x|·max|w|, while a
  // wrong element, a dropped tail term or a stale value is far above it.
  float maxx = 0, maxw = 0;
  for (float v : x) maxx = std::max(maxx, std::fabs(v));
  for (float v : w.deq) maxw = std::max(maxw, std::fabs(v));
  Outcome o;
  o.tol = 1e-5 * K * maxx * maxw + 1e-30;
  for (uint32_t m = 0; m < M; ++m)
    for (uint32_t n = 0; n < N; ++n) {
      double ref = 0;
      const float* xr = &x[size_t(m) * K];
      const float* wr = &w.deq[size_t(n) * K];
      for (uint32_t kk = 0; kk < K; ++kk) ref += double(xr[kk]) * double(wr[kk]);
      const double got = y[c.y_off / 4 + size_t(m) * N + n];
      const double err = std::isfinite(got) ? std::fabs(got - ref) : INFINITY;
      if (err > o.max_err || !(err == err)) {
        o.max_err = err;
        o.worst_m = m;
        o.worst_n = n;
      }
    }
  // Nothing written outside Y.
  for (size_t i = 0; i < c.y_off / 4; ++i)
    if (y[i] != -12345.0f) o.max_err = INFINITY;
  for (size_t i = c.y_off / 4 + size_t(M) * N; i < y_total; ++i)
    if (y[i] != -12345.0f) o.max_err = INFINITY;
  return o;
}

void check_case(Kernels& k, const Case& c, const std::string& variant, uint32_t seed) {
  const Outcome o = run_case(k, c, seed);
  INFO(op_name(c.op), " M=", c.M, " N=", c.N, " K=", c.K, " ", wtype_name(c.type), " variant=", variant,
       " offsets(x,w,y)=", c.x_off, ",", c.w_off, ",", c.y_off, " max_err=", o.max_err, " tol=", o.tol,
       " worst (m,n)=", o.worst_m, ",", o.worst_n);
  CHECK(o.max_err <= o.tol);
}

constexpr WType kTypes[] = {WType::f32, WType::f16, WType::bf16};

KernelConfig base_config() { return KernelConfig::from(gpu().device->caps()); }

// Both ways of reading W: storage buffers and uniform texel buffers (the
// texel kernels are used where the weight format supports them).
constexpr bool kTexel[] = {false, true};
std::string wpath(bool texel) { return texel ? " W:texel" : " W:ssbo"; }

// A grid of sizes around `tile` along one dimension plus non-multiples of 8.
std::vector<uint32_t> around(uint32_t tile) {
  std::vector<uint32_t> v = {1, tile - 1, tile, tile + 1, 13, 67};
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  v.erase(std::remove(v.begin(), v.end(), 0u), v.end());
  return v;
}

// GEMM sweep for one config: M around the M tile, N around the N tile, K edges.
void gemm_sweep(const KernelConfig& cfg, const std::string& variant, uint32_t tile_m, uint32_t tile_n) {
  Kernels k(*gpu().device, cfg);
  uint32_t seed = 1;
  const std::vector<uint32_t> ks = {1, 3, 4, 8, 13, 67};
  for (WType t : kTypes)
    for (uint32_t M : around(tile_m))
      for (uint32_t N : around(tile_n)) {
        // Cycle K so every (M, N) meets a few K values without the full cube.
        for (uint32_t j = 0; j < 2; ++j) {
          const uint32_t K = ks[(M + N + j * 3 + seed) % ks.size()];
          check_case(k, {Op::gemm, M, N, K, t}, variant, seed++);
        }
      }
}

// Matvec sweep: N around the rows a workgroup covers, K edges, M = 1 and 3.
void matvec_sweep(const KernelConfig& cfg, const std::string& variant) {
  Kernels k(*gpu().device, cfg);
  const uint32_t per_group = cfg.matvec_mode == 0 ? cfg.matvec_wg * cfg.matvec_rows : cfg.matvec_rows;
  uint32_t seed = 100;
  for (WType t : kTypes)
    for (uint32_t N : around(per_group))
      for (uint32_t K : {1u, 4u, 7u, 13u, 64u, 67u, 259u}) {
        const uint32_t M = (N + K) % 5 == 0 ? 3 : 1;
        check_case(k, {Op::matvec, M, N, K, t}, variant, seed++);
      }
}

}  // namespace

TEST_CASE("linear: default variants at edge sizes") {
  for (bool texel : kTexel) {
    KernelConfig cfg = base_config();
    cfg.weights_texel = texel;
    const uint32_t tm = cfg.gemm_shared ? cfg.gemm_tile_m : cfg.gemm_bcast ? cfg.subgroup * cfg.gemm_tm : cfg.gemm_tm;
    const uint32_t tn = cfg.gemm_shared ? cfg.gemm_tile_n : cfg.gemm_wg * cfg.gemm_tn;
    gemm_sweep(cfg, "default" + wpath(texel), tm, tn);
    matvec_sweep(cfg, "default" + wpath(texel));
  }
}

TEST_CASE("linear: linear() picks matvec or gemm, both correct") {
  Kernels& k = *gpu().kernels;
  uint32_t seed = 500;
  for (WType t : kTypes)
    for (uint32_t M : {1u, 2u, 4u, 9u})
      for (uint32_t N : {1u, 67u, 300u})
        for (uint32_t K : {5u, 64u, 131u}) check_case(k, {Op::linear, M, N, K, t}, "default", seed++);
}

TEST_CASE("linear: unaligned offsets of X, W and Y") {
  for (bool texel : kTexel) {
  KernelConfig cfg = base_config();
  cfg.weights_texel = texel;
  Kernels k(*gpu().device, cfg);
  const std::string name = "default" + wpath(texel);
  uint32_t seed = 900;
  for (WType t : kTypes)
    for (Op op : {Op::gemm, Op::matvec})
      for (uint32_t K : {8u, 13u, 64u}) {
        const uint32_t es = wtype_size(t);
        // Offsets of one element (never aligned to minStorageBufferOffsetAlignment),
        // of 4 elements (vec4 path still possible) and of an aligned 256 bytes.
        check_case(k, {op, 3, 37, K, t, 4, es, 4}, name, seed++);
        check_case(k, {op, 2, 19, K, t, 16, 4 * es, 12}, name, seed++);
        check_case(k, {op, 1, 70, K, t, 256, 256, 256}, name, seed++);
      }
  }
}

TEST_CASE("gemm: register-tile variants") {
  const auto& caps = gpu().device->caps();
  struct V { uint32_t wg, tm, tn; bool bcast; };
  // (The default config is one more variant; each variant compiles 6 pipelines, so the list stays short.)
  for (V v : {V{8, 1, 1, false}, V{32, 4, 2, false}, V{16, 3, 1, false}, V{8, 1, 1, true}, V{16, 2, 3, true}}) {
    KernelConfig cfg = base_config();
    cfg.gemm_shared = false;
    cfg.gemm_bcast = v.bcast;
    // The shuffle variant covers whole subgroups: workgroups are multiples of the real subgroup size.
    if (v.bcast) {
      if (caps.subgroup_min != caps.subgroup_max) continue;
      cfg.subgroup = caps.subgroup_size;
      v.wg = std::max(v.wg / 8, 1u) * caps.subgroup_size;
      if (v.wg > caps.max_workgroup_invocations) continue;
    }
    cfg.gemm_wg = v.wg;
    cfg.gemm_tm = v.tm;
    cfg.gemm_tn = v.tn;
    const std::string name = std::string(v.bcast ? "regs+broadcast" : "regs") + " wg" + std::to_string(v.wg) + " tm" +
                             std::to_string(v.tm) + " tn" + std::to_string(v.tn);
    gemm_sweep(cfg, name, v.bcast ? cfg.subgroup * v.tm : v.tm, v.wg * v.tn);
  }
}

TEST_CASE("gemm: shared-memory tiled variants") {
  struct V { uint32_t tile_m, tile_n, tm, tn, bk; };
  for (V v : {V{32, 32, 4, 2, 16}, V{16, 16, 2, 2, 8}, V{64, 64, 4, 4, 16}, V{16, 32, 1, 4, 4}}) {
    KernelConfig cfg = base_config();
    cfg.gemm_shared = true;
    cfg.gemm_tile_m = v.tile_m;
    cfg.gemm_tile_n = v.tile_n;
    cfg.gemm_tm = v.tm;
    cfg.gemm_tn = v.tn;
    cfg.gemm_bk = v.bk;
    const std::string name = "shared " + std::to_string(v.tile_m) + "x" + std::to_string(v.tile_n) + " tm" +
                             std::to_string(v.tm) + " tn" + std::to_string(v.tn) + " bk" + std::to_string(v.bk);
    gemm_sweep(cfg, name, v.tile_m, v.tile_n);
  }
}

TEST_CASE("matvec: every mode at workgroup sizes 8/32/64") {
  const auto& caps = gpu().device->caps();
  for (uint32_t mode : {0u, 1u, 2u}) {
    if (mode == 1 && !caps.has_subgroup_arithmetic()) continue;
    for (uint32_t wg : {8u, 32u, 64u})
      for (uint32_t rows : {1u, 4u, 8u}) {
        if (mode == 0 && rows == 8 && wg == 64) continue;
        KernelConfig cfg = base_config();
        cfg.matvec_mode = mode;
        cfg.matvec_wg = wg;
        cfg.matvec_rows = rows;
        matvec_sweep(cfg, "mode" + std::to_string(mode) + " wg" + std::to_string(wg) + " rows" + std::to_string(rows));
      }
  }
}

TEST_CASE("linear: weights, X and Y split over several bindings") {
  // A tiny max_binding forces W row chunks and M passes on small shapes.
  for (bool texel : kTexel)
  for (uint64_t max_binding : {4096ull, 20000ull}) {
    KernelConfig cfg = base_config();
    cfg.max_binding = max_binding;
    cfg.weights_texel = texel;
    Kernels k(*gpu().device, cfg);
    const std::string name = "max_binding=" + std::to_string(max_binding) + wpath(texel);
    uint32_t seed = 1300;
    for (WType t : kTypes)
      for (Op op : {Op::gemm, Op::matvec, Op::linear}) {
        check_case(k, {op, 5, 300, 67, t}, name, seed++);
        check_case(k, {op, 2, 129, 64, t, 0, 2 * wtype_size(t), 0}, name, seed++);   // W not aligned
        check_case(k, {op, 1, 77, 200, t}, name, seed++);
      }
  }
}

TEST_CASE("linear: bad shapes are errors") {
  auto& g = gpu();
  Buffer b = g.zeros(4096);
  Kernels& k = *g.kernels;
  CommandList cmd(*g.device);
  cmd.begin();
  CHECK_THROWS_AS(k.linear(cmd, Act{&b, 0, 2, 8}, Mat{&b, 0, WType::f32, 4, 9}, Act{&b, 0, 2, 4}), Error);
  CHECK_THROWS_AS(k.gemm(cmd, Act{&b, 0, 2, 8}, Mat{&b, 0, WType::f32, 4, 8}, Act{&b, 0, 3, 4}), Error);
  CHECK_THROWS_AS(k.matvec(cmd, Act{&b, 0, 2, 8}, Mat{&b, 0, WType::f16, 4, 8}, Act{&b, 0, 2, 5}), Error);
  CHECK_THROWS_AS(k.gemm(cmd, Act{&b, 0, 2, 8}, Mat{&b, 4000, WType::f32, 4, 8}, Act{&b, 0, 2, 4}), Error);
  cmd.end();
}

TEST_CASE("linear: a weight larger than maxStorageBufferRange") {
  auto& g = gpu();
  const auto& caps = g.device->caps();
  // f32 [N, 1024] just over the device's binding limit (135 MB on lavapipe's 128 MiB).
  const uint32_t K = 1024;
  const uint64_t limit = std::min<uint64_t>(g.kernels->config().max_binding, caps.max_storage_buffer_range);
  const uint32_t N = static_cast<uint32_t>(limit / (K * 4) + 800);
  if (uint64_t(N) * K * 4 > caps.max_buffer_size || uint64_t(N) * K * 4 > caps.device_local_bytes / 2) {
    MESSAGE("device cannot hold a weight larger than maxStorageBufferRange; skipped");
    return;
  }
  const auto chunks = split_rows(Mat{nullptr, 0, WType::f32, N, K}, limit, caps.min_storage_buffer_offset_alignment);
  REQUIRE(chunks.size() >= 2);
  std::vector<float> w(size_t(N) * K);
  for (size_t i = 0; i < w.size(); ++i) w[i] = hash_value(i, 77);
  Buffer bw = g.upload_f32(w, Arena::weights, "big_weight");
  for (bool texel : kTexel)
  for (uint32_t M : {1u, 3u}) {
    CAPTURE(M);
    CAPTURE(texel);
    KernelConfig cfg = g.kernels->config();
    cfg.weights_texel = texel;
    Kernels kernels(*g.device, cfg);
    std::vector<float> x(size_t(M) * K);
    for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, 78 + M);
    Buffer bx = g.upload_f32(x), by = g.zeros(size_t(M) * N * 4);
    CommandList cmd(*g.device);
    cmd.begin();
    kernels.linear(cmd, Act{&bx, 0, M, K}, Mat{&bw, 0, WType::f32, N, K}, Act{&by, 0, M, N});
    cmd.end();
    cmd.run();
    CHECK(cmd.dispatch_count() == chunks.size());
    const auto y = g.download_f32(by, size_t(M) * N);
    const double tol = 1e-5 * K;   // |x|, |w| < 1
    double max_err = 0, max_err_second = 0;
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t n = 0; n < N; ++n) {
        double ref = 0;
        for (uint32_t k = 0; k < K; ++k) ref += double(x[size_t(m) * K + k]) * double(w[size_t(n) * K + k]);
        const double err = std::fabs(ref - y[size_t(m) * N + n]);
        max_err = std::max(max_err, err);
        if (n >= chunks[1].first_row) max_err_second = std::max(max_err_second, err);
      }
    INFO("linear f32 M=", M, " N=", N, " K=", K, " chunks=", chunks.size(), " second chunk from row ",
         chunks[1].first_row, " max_err=", max_err, " (rows in later chunks ", max_err_second, ") tol=", tol);
    CHECK(max_err <= tol);
    CHECK(max_err_second <= tol);
  }
}
