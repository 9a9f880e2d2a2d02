// Linear kernels (gemm, matvec, linear; kernels/linear.cpp) against a
// double-precision CPU reference through tests/support/kernel_check: random
// inputs, edge sizes around the tile sizes, every weight type, every kernel
// variant the specialization constants offer, weights split into several
// bindings, and nothing written outside Y.  The GEMM variant cases (test_suite "gemm") run as the test
// kernels_linear_gemm, the others as kernels_linear (tests/meson.build).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "kernels/spec.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"
#include "tests/support/linear_check.hpp"

using namespace reach;
using namespace reach::test;

namespace {

enum class Op { gemm, matvec, linear };
const char* op_name(Op op) { return op == Op::gemm ? "linear_gemm" : op == Op::matvec ? "linear_matvec" : "linear"; }

// Weights as stored on the device plus their exactly dequantized f32 values.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;
};
Weights make_weights(WType t, uint64_t n, uint32_t seed) {
  Weights w;
  float_weights(t, n, seed, w.bytes, w.deq);
  return w;
}

// Y[m, n] = sum_k X[m, k] W[n, k] in double, W dequantized exactly.
std::vector<double> linear_ref(const std::vector<float>& x, const std::vector<float>& w, uint32_t M, uint32_t N,
                               uint32_t K) {
  std::vector<double> y(size_t(M) * N);
  for (uint32_t m = 0; m < M; ++m)
    for (uint32_t n = 0; n < N; ++n) {
      double acc = 0;
      const float* xr = &x[size_t(m) * K];
      const float* wr = &w[size_t(n) * K];
      for (uint32_t kk = 0; kk < K; ++kk) acc += double(xr[kk]) * double(wr[kk]);
      y[size_t(m) * N + n] = acc;
    }
  return y;
}

// Every product is bounded by max|x|·max|w| (the reference uses the dequantized
// weights, so only f32 rounding differs).  f32 accumulation of K terms errs by
// at most ~K·2^-24 relative to Σ|x·w| ≤ K·max|x|·max|w|; for the K of this
// suite that worst case is below 1e-5·K·max|x|·max|w|, while a wrong element, a
// dropped tail term or a stale value is far above it.
const char* const kWhy = "f32 accumulation of K terms errs by <= ~K*2^-24 relative to sum|x*w| <= K*max|x|*max|w|, "
                         "below 1e-5*K*max|x|*max|w| for every K here; a wrong, dropped or stale term is far above";

struct Case {
  Op op;
  uint32_t M, N, K;
  WType type;
  // Byte offsets of X, W, Y inside their buffers (exercise the element-offset path).
  uint32_t x_off = 0, w_off = 0, y_off = 0;
};

// Runs one case on `k`: Y is pre-filled with a sentinel, and the elements
// around [y_off, y_off + M*N) must keep it.
void check_case(Kernels& k, const Case& c, const std::string& variant, uint32_t seed) {
  const uint32_t M = c.M, N = c.N, K = c.K;
  std::vector<float> x(size_t(M) * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed * 7 + 1);
  const Weights w = make_weights(c.type, uint64_t(N) * K, seed * 7 + 2);
  float maxx = 0, maxw = 0;
  for (float v : x) maxx = std::max(maxx, std::fabs(v));
  for (float v : w.deq) maxw = std::max(maxw, std::fabs(v));
  check_linear({
      .op = op_name(c.op),
      .params = str("M=", M, " N=", N, " K=", K, " ", wtype_name(c.type), " variant=", variant,
                    " offsets(x,w,y)=", c.x_off, ",", c.w_off, ",", c.y_off, " (x hash seed ", seed * 7 + 1,
                    ", w hash seed ", seed * 7 + 2, ")"),
      .seed = seed,
      .tol = Tolerance::max_abs(1e-5 * K * maxx * maxw + 1e-30, kWhy),
      .M = M, .N = N, .K = K, .type = c.type, .x_off = c.x_off, .w_off = c.w_off, .y_off = c.y_off,
      .x = &x, .w = &w.bytes,
      .reference = [&] { return linear_ref(x, w.deq, M, N, K); },
      .record =
          [&](CommandList& cmd, const Act& ax, const Mat& mw, const Act& ay) {
            if (c.op == Op::gemm) k.linear_gemm(cmd, ax, mw, ay);
            else if (c.op == Op::matvec) k.linear_matvec(cmd, ax, mw, ay);
            else k.linear(cmd, ax, mw, ay);
          },
  });
}

constexpr WType kTypes[] = {WType::f32, WType::f16, WType::bf16};

// Both ways of reading W: storage buffers and uniform texel buffers (the
// texel kernels are used where the weight format supports them).
constexpr bool kTexel[] = {false, true};
std::string wpath(bool texel) { return texel ? " W:texel" : " W:ssbo"; }

// GEMM sweep for one config: M around the M tile, N around the N tile, K edges.
// Sampled (kernel_check.hpp): every type, every M and every N (the edges 1,
// tile-1, tile, tile+1 among them) at least once, plus a few more tuples; a
// tuple's seed is its index in the full sweep, as in the exhaustive run.
void gemm_sweep(const KernelConfig& cfg, const std::string& variant, uint32_t tile_m, uint32_t tile_n) {
  Kernels k(*gpu().device, cfg);
  const std::vector<uint32_t> ks = {1, 3, 4, 8, 13, 67};
  const std::vector<uint32_t> ms = sizes_around(tile_m, {13, 67}), ns = sizes_around(tile_n, {13, 67});
  // Cycle K so every (M, N) meets a few K values without the full cube.
  for_sample("gemm " + variant, {std::size(kTypes), ms.size(), ns.size(), 2}, 6, [&](const SweepPick& p) {
    const uint32_t seed = 1 + uint32_t(p.flat);
    const uint32_t M = ms[p[1]], N = ns[p[2]];
    const uint32_t K = ks[(M + N + uint32_t(p[3]) * 3 + seed) % ks.size()];
    check_case(k, {Op::gemm, M, N, K, kTypes[p[0]]}, variant, seed);
  });
}

// Matvec sweep: N around the rows a workgroup covers, K edges, M = 1 and 3.
// Sampled: every type, N and K at least once, plus a few more.
void matvec_sweep(const KernelConfig& cfg, const std::string& variant) {
  Kernels k(*gpu().device, cfg);
  const uint32_t per_group = cfg.matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE ? cfg.matvec_wg * cfg.matvec_rows : cfg.matvec_rows;
  const std::vector<uint32_t> ns = sizes_around(per_group, {13, 67}), ks = {1, 4, 7, 13, 64, 67, 259};
  for_sample("matvec " + variant, {std::size(kTypes), ns.size(), ks.size()}, 5, [&](const SweepPick& p) {
    const uint32_t N = ns[p[1]], K = ks[p[2]];
    const uint32_t M = (N + K) % 5 == 0 ? 3 : 1;
    check_case(k, {Op::matvec, M, N, K, kTypes[p[0]]}, variant, 100 + uint32_t(p.flat));
  });
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
  const uint32_t ms[] = {1, 2, 4, 9}, ns[] = {1, 67, 300}, ks[] = {5, 64, 131};
  // Sampled: every type, M (both sides of the matvec/GEMM switch), N and K at least once.
  for_sample("linear picks", {std::size(kTypes), std::size(ms), std::size(ns), std::size(ks)}, 6,
             [&](const SweepPick& p) {
               check_case(k, {Op::linear, ms[p[1]], ns[p[2]], ks[p[3]], kTypes[p[0]]}, "default",
                          500 + uint32_t(p.flat));
             });
}

TEST_CASE("linear: unaligned offsets of X, W and Y") {
  for (bool texel : kTexel) {
  KernelConfig cfg = base_config();
  cfg.weights_texel = texel;
  Kernels k(*gpu().device, cfg);
  const std::string name = "default" + wpath(texel);
  const Op ops[] = {Op::gemm, Op::matvec};
  const uint32_t ks[] = {8, 13, 64};
  // Sampled: every type, op, K and offset kind at least once per W path.
  for_sample("offsets" + wpath(texel), {std::size(kTypes), std::size(ops), std::size(ks), 3}, 4,
             [&](const SweepPick& p) {
               const WType t = kTypes[p[0]];
               const Op op = ops[p[1]];
               const uint32_t K = ks[p[2]], seed = 900 + uint32_t(p.flat);
               const uint32_t es = wtype_size(t);
               // Offsets of one element (never aligned to minStorageBufferOffsetAlignment),
               // of 4 elements (vec4 path still possible) and of an aligned 256 bytes.
               if (p[3] == 0) check_case(k, {op, 3, 37, K, t, 4, es, 4}, name, seed);
               else if (p[3] == 1) check_case(k, {op, 2, 19, K, t, 16, 4 * es, 12}, name, seed);
               else check_case(k, {op, 1, 70, K, t, 256, 256, 256}, name, seed);
             });
  }
}

TEST_CASE("linear_gemm: register-tile variants" * doctest::test_suite("gemm")) {
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

TEST_CASE("linear_gemm: shared-memory tiled variants" * doctest::test_suite("gemm")) {
  struct V { uint32_t tile_m, tile_n, tm, tn, bk; };
  for (V v : {V{32, 32, 4, 2, 16}, V{16, 16, 2, 2, 8}, V{64, 64, 4, 4, 16}, V{16, 32, 1, 4, 4}, V{128, 128, 8, 8, 16}}) {
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

TEST_CASE("linear_matvec: every mode at workgroup sizes 8/32/64, X from memory or staged in shared memory") {
  const auto& caps = gpu().device->caps();
  for (uint32_t mode : {spec::MATVEC_MODE_ROW_PER_LANE, spec::MATVEC_MODE_SUBGROUP, spec::MATVEC_MODE_SHARED}) {
    if (mode == spec::MATVEC_MODE_SUBGROUP && !caps.has_subgroup_arithmetic()) continue;
    for (bool xshared : {false, true})
    for (uint32_t wg : {8u, 32u, 64u})
      for (uint32_t rows : {1u, 4u, 8u}) {
        if (mode == spec::MATVEC_MODE_ROW_PER_LANE && rows == 8 && wg == 64) continue;
        // Staged X (modes 1 and 2 only): each workgroup size, fewer row counts.
        if (xshared && (mode == spec::MATVEC_MODE_ROW_PER_LANE || rows == 4)) continue;
        KernelConfig cfg = base_config();
        cfg.matvec_mode = mode;
        cfg.matvec_wg = wg;
        cfg.matvec_rows = rows;
        cfg.matvec_xshared = xshared;
        matvec_sweep(cfg, "mode" + std::to_string(mode) + " wg" + std::to_string(wg) + " rows" + std::to_string(rows) +
                              (xshared ? " X in shared memory" : ""));
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
    const Op ops[] = {Op::gemm, Op::matvec, Op::linear};
    // Sampled: every type, op and shape at least once per (max_binding, W path).
    for_sample(name, {std::size(kTypes), std::size(ops), 3}, 3, [&](const SweepPick& p) {
      const WType t = kTypes[p[0]];
      const Op op = ops[p[1]];
      const uint32_t seed = 1300 + uint32_t(p.flat);
      if (p[2] == 0) check_case(k, {op, 5, 300, 67, t}, name, seed);
      else if (p[2] == 1) check_case(k, {op, 2, 129, 64, t, 0, 2 * wtype_size(t), 0}, name, seed);   // W not aligned
      else check_case(k, {op, 1, 77, 200, t}, name, seed);
    });
  }
}

TEST_CASE("linear: bad shapes are errors") {
  auto& g = gpu();
  Buffer b = g.zeros(4096);
  Kernels& k = *g.kernels;
  CommandList cmd(*g.device);
  cmd.begin();
  CHECK_THROWS_AS(k.linear(cmd, Act{&b, 0, 2, 8}, Mat{&b, 0, WType::f32, 4, 9}, Act{&b, 0, 2, 4}), Error);
  CHECK_THROWS_AS(k.linear_gemm(cmd, Act{&b, 0, 2, 8}, Mat{&b, 0, WType::f32, 4, 8}, Act{&b, 0, 3, 4}), Error);
  CHECK_THROWS_AS(k.linear_matvec(cmd, Act{&b, 0, 2, 8}, Mat{&b, 0, WType::f16, 4, 8}, Act{&b, 0, 2, 5}), Error);
  CHECK_THROWS_AS(k.linear_gemm(cmd, Act{&b, 0, 2, 8}, Mat{&b, 4000, WType::f32, 4, 8}, Act{&b, 0, 2, 4}), Error);
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
    check_kernel({
        .op = "linear",
        .params = str("f32 M=", M, " N=", N, " K=", K, wpath(texel), " chunks=", chunks.size(),
                      " (second from row ", chunks[1].first_row, ") (w hash seed 77, x hash seed ", 78 + M, ")"),
        .seed = 78 + M,
        .tol = Tolerance::max_abs(1e-5 * K, str(kWhy, "; |x|, |w| < 1")),
        .device =
            [&] {
              Buffer bx = g.upload_f32(x), by = g.zeros(size_t(M) * N * 4);
              const uint32_t dispatches = g.run([&](CommandList& cmd) {
                kernels.linear(cmd, Act{&bx, 0, M, K}, Mat{&bw, 0, WType::f32, N, K}, Act{&by, 0, M, N});
              });
              // The texel path may split finer: maxTexelBufferElements can bind less than the
              // storage range (NVIDIA: 2^27 texels against 4 GiB).
              if (texel) CHECK(dispatches >= chunks.size());
              else CHECK(dispatches == chunks.size());
              return Values::of(g.download_f32(by, size_t(M) * N));
            },
        .reference = [&] { return Values::of(linear_ref(x, w, M, N, K)); },
        .where = [&](size_t i) {
          const uint32_t n = uint32_t(i % N);
          size_t chunk = 0;
          while (chunk + 1 < chunks.size() && n >= chunks[chunk + 1].first_row) ++chunk;
          return str("(m,n)=(", i / N, ",", n, ") in weight chunk ", chunk);
        },
    });
  }
}

namespace {

// Batched decode: an M-row matvec must give, for every row, exactly the bits
// of a 1-row matvec of that row alone (each row keeps its own accumulation
// order), so decoding sequences together gives the same tokens as alone.
// Values are also checked against the double reference (check_case).
void batched_bitwise(const KernelConfig& cfg, const std::string& variant, uint32_t seed0) {
  auto& g = gpu();
  Kernels k(*g.device, cfg);
  const uint32_t per_group = cfg.matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE ? cfg.matvec_wg * cfg.matvec_rows : cfg.matvec_rows;
  const uint32_t ks[] = {7, 64, 67}, ms[] = {2, 3, 5, 8, 11};
  // Sampled: every type, K and M at least once; a tuple's seed is its index in the full sweep.
  for_sample("batched " + variant, {std::size(kTypes), std::size(ks), std::size(ms)}, 3, [&](const SweepPick& p) {
    const WType t = kTypes[p[0]];
    const uint32_t K = ks[p[1]], M = ms[p[2]], seed = seed0 + uint32_t(p.flat);
    const uint32_t N = per_group + 1 + (K % 3);
    {
      {
        std::vector<float> x(size_t(M) * K);
        for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed * 7 + 1);
        const Weights w = make_weights(t, uint64_t(N) * K, seed * 7 + 2);
        Buffer bx = g.upload_f32(x);
        Buffer bw = g.upload_bytes(w.bytes.data(), w.bytes.size(), Arena::weights);
        Buffer by = g.upload_f32(std::vector<float>(size_t(M) * N, 0.0f));
        Buffer b1 = g.upload_f32(std::vector<float>(size_t(M) * N, 0.0f));
        const Mat mw{&bw, 0, t, N, K};
        g.run([&](CommandList& cmd) {
          k.linear_matvec(cmd, Act{&bx, 0, M, K}, mw, Act{&by, 0, M, N});
          for (uint32_t m = 0; m < M; ++m)
            k.linear_matvec(cmd, Act{&bx, uint64_t(m) * K * 4, 1, K}, mw, Act{&b1, uint64_t(m) * N * 4, 1, N});
        });
        const auto yb = g.download_f32(by, size_t(M) * N), y1 = g.download_f32(b1, size_t(M) * N);
        size_t bad = 0;
        for (size_t i = 0; i < yb.size(); ++i)
          if (std::memcmp(&yb[i], &y1[i], 4) != 0 && bad++ == 0)
            MESSAGE("first difference at (m,n)=(", i / N, ",", i % N, "): ", yb[i], " vs ", y1[i]);
        INFO("matvec batched vs single rows, M=", M, " N=", N, " K=", K, " ", wtype_name(t), " variant=", variant);
        CHECK(bad == 0);
        check_case(k, {Op::matvec, M, N, K, t}, variant, seed);
      }
    }
  });
}

}  // namespace

TEST_CASE("linear_matvec: M X rows per call equal M one-row calls bit for bit") {
  const auto& caps = gpu().device->caps();
  uint32_t seed = 2000;
  for (bool texel : kTexel) {
    KernelConfig cfg = base_config();
    cfg.weights_texel = texel;
    batched_bitwise(cfg, "default" + wpath(texel), seed);
    seed += 100;
  }
  for (uint32_t mode : {spec::MATVEC_MODE_ROW_PER_LANE, spec::MATVEC_MODE_SUBGROUP, spec::MATVEC_MODE_SHARED}) {
    if (mode == spec::MATVEC_MODE_SUBGROUP && !caps.has_subgroup_arithmetic()) continue;
    KernelConfig cfg = base_config();
    cfg.matvec_mode = mode;
    cfg.matvec_wg = 32;
    cfg.matvec_rows = 4;
    cfg.matvec_max_acc = mode == spec::MATVEC_MODE_ROW_PER_LANE ? 8 : 0;
    cfg.weights_texel = false;
    batched_bitwise(cfg, "mode" + std::to_string(mode) + " wg32 rows4", seed);
    seed += 100;
  }
}

TEST_CASE("linear: M = 1..8 uses matvec, above it GEMM; both correct") {
  Kernels& k = *gpu().kernels;
  uint32_t seed = 3000;
  for (WType t : {WType::f32, WType::f16})
    for (uint32_t M = 1; M <= 10; ++M) check_case(k, {Op::linear, M, 131, 68, t}, "default", seed++);
}
