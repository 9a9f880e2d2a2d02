// The cooperative-matrix GEMM (kernels/linear_coopmat.cpp; shaders/linear_gemm_coopmat*.comp) against
// plain f64 products of the same X and W (f32 / f16 / bf16 weights as stored, block formats through
// tests/support/quant_reference, the CPU dequantizer the other linear suites use): every weight type,
// M, N and K off the tile, M = 1..3, large K, row chunks of small bindings, offsets.  These run
// where the device has VK_KHR_cooperative_matrix (tools/coopmat_check.sh runs them on a recent
// lavapipe); elsewhere they say SKIP.  The tile choice (a pure function of the device's shape list
// and limits) is checked on synthetic devices everywhere.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "kernels/quant_layout.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"
#include "tests/support/linear_check.hpp"
#include "tests/support/quant_reference.hpp"

using namespace reach;
using namespace reach::test;

namespace {

// ---- tile choice on synthetic devices ---------------------------------------

Capabilities synthetic(std::vector<CoopmatShape> shapes, uint32_t sub, uint32_t sub_min, uint32_t sub_max,
                       bool size_control, uint32_t shared, uint32_t max_inv) {
  Capabilities c;
  c.cooperative_matrix = true;
  c.coopmat_shapes = std::move(shapes);
  c.subgroup_size = sub;
  c.subgroup_min = sub_min;
  c.subgroup_max = sub_max;
  c.subgroup_size_control = size_control;
  c.subgroup_size_stages = size_control ? VK_SHADER_STAGE_COMPUTE_BIT : 0;
  c.max_shared_memory = shared;
  c.max_workgroup_invocations = max_inv;
  c.max_workgroup_size[0] = max_inv;
  return c;
}

void check_tile(const CoopmatTile& t, uint32_t cm, uint32_t cn, uint32_t ck, uint32_t bm, uint32_t bn, uint32_t sg,
                uint32_t wg, bool pin) {
  CHECK(t.valid());
  CHECK(t.cm == cm);
  CHECK(t.cn == cn);
  CHECK(t.ck == ck);
  CHECK(t.bm == bm);
  CHECK(t.bn == bn);
  CHECK(t.bk == 32);
  CHECK(t.sg_m == sg);
  CHECK(t.sg_n == sg);
  CHECK(t.workgroup() == wg);
  CHECK(t.pin_subgroup == pin);
}

// ---- GEMM cases ---------------------------------------------------------------

// The kernel stages X as two f16 halves, hi = f16(x) and lo = f16((x - hi)·2^11) (xsplit; one half,
// x rounded to f16, without), rounds W to f16 where it is not f16 or bf16 already (those are exact),
// multiplies exactly (an f16 x f16 product fits f32) and accumulates in f32 in an order the hardware
// chooses.  Per term that is at most 2^-21 |x||w| from X (2^-11 without xsplit), 2^-11 |x||w| from
// a rounded W (quantized W: relative to the rounding magnitude |a·q| + |b|, which bounds |w| and the
// f32 dequantization's own error), plus the f16 subnormal step 2^-25 for values below 2^-14; the
// f32 sum adds (K + 64)·2^-24 of Σ|x||w|.  So
//   |y - ref| <= S·(ex + ew + (K + 64)·2^-24) + K·2^-24·max|w|,   S = max over outputs of Σ_k |x_k|·m_k,
// where ref is the exact product of the unrounded inputs.  With inputs in [-1, 1) the bound for f16
// W is ~2^-21·K/4 plus the sum's rounding, 2^-10·K/4 (0.15 at K = 576) for rounded W without
// xsplit, while a missing 32-deep slab moves an output by ~1.6 and a wrong row or column by the
// size of the output itself (~0.3·sqrt(K)).
const char* const kWhy = "f16 inputs: <= S*(ex + ew + (K+64)*2^-24) + K*2^-24*max|w|, S = max over outputs of "
                         "sum_k |x_k|*m_k (m: |w|, or |a*q|+|b| for blocks): X as f16 hi + lo (ex 2^-21; "
                         "2^-11 as one f16), W rounded to f16 (ew 2^-11; 0 for f16, bf16), f32 accumulation";

struct Case {
  uint32_t M, N, K;
  WType type;
  uint32_t x_off = 0, w_off = 0, y_off = 0;   // byte offsets (w_off a multiple of 16 for blocks)
};

// W as the device holds it, the values it stands for and their rounding magnitudes.
struct Weights {
  std::vector<uint8_t> device;
  std::vector<float> value, mag;
};
Weights make_weights(WType t, uint32_t N, uint32_t K, uint32_t seed) {
  Weights w;
  if (wtype_is_quant(t)) {
    const size_t nb = size_t(N) * K / wtype_block_elems(t);
    const auto file = quant_random_blocks(t, nb, seed);
    w.device.resize(quant_device_bytes(t, N, K));
    quant_to_device_layout(t, N, K, file.data(), w.device.data());
    w.value = quant_dequantize(t, file.data(), nb, &w.mag);
  } else {
    float_weights(t, uint64_t(N) * K, seed, w.device, w.value);
    w.mag.resize(w.value.size());
    for (size_t i = 0; i < w.value.size(); ++i) w.mag[i] = std::fabs(w.value[i]);
  }
  return w;
}

void check_case(Kernels& k, const Case& c, const std::string& variant, uint32_t seed, bool through_linear = false) {
  const uint32_t M = c.M, N = c.N, K = c.K;
  std::vector<float> x(size_t(M) * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed * 7 + 1);
  const Weights w = make_weights(c.type, N, K, seed * 7 + 2);
  std::vector<double> ref(size_t(M) * N);
  double s = 0, wmax = 0;
  for (float m : w.mag) wmax = std::max<double>(wmax, m);
  for (uint32_t m = 0; m < M; ++m)
    for (uint32_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (uint32_t kk = 0; kk < K; ++kk) {
        const double xv = x[size_t(m) * K + kk];
        acc += xv * w.value[size_t(n) * K + kk];
        mag += std::fabs(xv) * w.mag[size_t(n) * K + kk];
      }
      ref[size_t(m) * N + n] = acc;
      s = std::max(s, mag);
    }
  // X: hi + lo f16 halves, about 2^-21 relative (rounded to one f16, 2^-11, without xsplit).  W: f16 and
  // bf16 values are exact in f16, f32 and the block types' dequantized values are rounded (2^-11).
  const bool w_exact = c.type == WType::f16 || c.type == WType::bf16;
  const double x_round = k.config().coopmat.xsplit ? std::ldexp(1.0, -21) : std::ldexp(1.0, -11);
  const double tol = s * (x_round + (w_exact ? 0.0 : std::ldexp(1.0, -11)) + (K + 64) * std::ldexp(1.0, -24)) +
                     K * std::ldexp(1.0, -24) * wmax;
  check_linear({
      .op = through_linear ? "linear" : "linear_gemm_coopmat",
      .params = str("M=", M, " N=", N, " K=", K, " ", wtype_name(c.type), " variant=", variant,
                    " offsets(x,w,y)=", c.x_off, ",", c.w_off, ",", c.y_off),
      .seed = seed,
      .tol = Tolerance::max_abs(tol, kWhy),
      .M = M, .N = N, .K = K, .type = c.type, .x_off = c.x_off, .w_off = c.w_off, .y_off = c.y_off,
      .x = &x, .w = &w.device, .w_tail = 16,
      .reference = [&] { return ref; },
      .record =
          [&](CommandList& cmd, const Act& ax, const Mat& mw, const Act& ay) {
            if (through_linear) k.linear(cmd, ax, mw, ay);
            else k.linear_gemm_coopmat(cmd, ax, mw, ay);
          },
  });
}

// The device's tile, or a SKIP message (and false) where it has none.
bool have_coopmat() {
  const KernelConfig cfg = base_config();
  if (cfg.coopmat.valid()) return true;
  MESSAGE("SKIP: cooperative-matrix GEMM on this device: " << cfg.coopmat_why
          << " (tools/coopmat_check.sh runs this suite on a lavapipe that has it)");
  return false;
}

constexpr WType kFloatTypes[] = {WType::f32, WType::f16, WType::bf16};

}  // namespace

TEST_CASE("coopmat tile: NVIDIA-like shapes (16x16x16, 16x8x16, 16x8x8; f16 and f32 accumulators)") {
  std::string why;
  const auto t = choose_coopmat_tile(synthetic({{16, 8, 8, false}, {16, 8, 16, false}, {16, 16, 16, true},
                                                {16, 16, 16, false}},
                                               32, 32, 32, true, 49152, 1024),
                                     why);
  // The largest f32 shape; 2 x 2 subgroups of 2 x 2 matrices: 64 x 64, 128 invocations.
  check_tile(t, 16, 16, 16, 64, 64, 2, 128, false);
  CHECK(why.empty());
}

TEST_CASE("coopmat tile: AMD-like (16x16x16, wave 32..64)") {
  std::string why;
  const auto shapes = std::vector<CoopmatShape>{{16, 16, 16, true}, {16, 16, 16, false}};
  // A varying subgroup size is pinned to the device's default.
  check_tile(choose_coopmat_tile(synthetic(shapes, 64, 32, 64, true, 65536, 1024), why), 16, 16, 16, 64, 64, 2, 256,
             true);
  // ... and without subgroupSizeControl there is no tile.
  CHECK_FALSE(choose_coopmat_tile(synthetic(shapes, 64, 32, 64, false, 65536, 1024), why).valid());
  CHECK(why.find("subgroupSizeControl") != std::string::npos);
  // ... nor with it where compute is not among the stages that take a required size.
  Capabilities no_compute = synthetic(shapes, 64, 32, 64, true, 65536, 1024);
  no_compute.subgroup_size_stages = VK_SHADER_STAGE_MESH_BIT_EXT;
  CHECK_FALSE(choose_coopmat_tile(no_compute, why).valid());
  CHECK(why.find("requiredSubgroupSizeStages") != std::string::npos);
}

TEST_CASE("coopmat tile: lavapipe's 8x8x8 (f16 and f32 accumulators, subgroup 8, 32 KiB shared)") {
  std::string why;
  const auto t = choose_coopmat_tile(synthetic({{8, 8, 8, true}, {8, 8, 8, false}}, 8, 8, 8, false, 32768, 1024), why);
  check_tile(t, 8, 8, 8, 32, 32, 2, 32, false);
}

TEST_CASE("coopmat tile: lavapipe at 4 or 16 lanes has none (its lowering assumes 8), other devices keep theirs") {
  std::string why;
  for (uint32_t lanes : {4u, 16u}) {
    Capabilities c = synthetic({{8, 8, 8, true}, {8, 8, 8, false}}, lanes, lanes, lanes, false, 32768, 1024);
    c.type = VK_PHYSICAL_DEVICE_TYPE_CPU;
    c.vendor_id = 0x10005;
    CHECK_FALSE(choose_coopmat_tile(c, why).valid());
    CHECK(why.find("lavapipe") != std::string::npos);
    CHECK(why.find(std::to_string(lanes)) != std::string::npos);
    c.type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;   // the rule is lavapipe's, not the width's
    CHECK(choose_coopmat_tile(c, why).valid());
  }
  Capabilities at8 = synthetic({{8, 8, 8, false}}, 8, 8, 8, false, 32768, 1024);
  at8.type = VK_PHYSICAL_DEVICE_TYPE_CPU;
  at8.vendor_id = 0x10005;
  check_tile(choose_coopmat_tile(at8, why), 8, 8, 8, 32, 32, 2, 32, false);
}

TEST_CASE("coopmat tile: limits shrink the tile; unusable lists give none, with the reason") {
  std::string why;
  // 5 KiB of shared memory (X staged twice, hi and lo): 64 x 64 (19.5 KiB), 32 x 32 of 4 subgroups
  // (11.5 KiB) and of 1 subgroup (8.5 KiB) do not fit; one subgroup with one 16 x 16 matrix (4.75 KiB) does.
  check_tile(choose_coopmat_tile(synthetic({{16, 16, 16, false}}, 32, 32, 32, false, 5120, 1024), why), 16, 16, 16, 16,
             16, 1, 32, false);
  // 64 invocations: one subgroup of 32 (two would be 4 x 32 = 128).
  check_tile(choose_coopmat_tile(synthetic({{16, 16, 16, false}}, 32, 32, 32, false, 49152, 64), why), 16, 16, 16, 32,
             32, 1, 32, false);
  // Only f16 accumulators, or K not dividing the 32-deep slab, or no shapes: none.
  CHECK_FALSE(choose_coopmat_tile(synthetic({{16, 16, 16, true}}, 32, 32, 32, false, 49152, 1024), why).valid());
  CHECK(why.find("f32") != std::string::npos);
  CHECK_FALSE(choose_coopmat_tile(synthetic({{16, 16, 64, false}}, 32, 32, 32, false, 49152, 1024), why).valid());
  CHECK_FALSE(choose_coopmat_tile(synthetic({}, 32, 32, 32, false, 49152, 1024), why).valid());
  // Not even one subgroup's tile fits.
  CHECK_FALSE(choose_coopmat_tile(synthetic({{16, 16, 16, false}}, 32, 32, 32, false, 1024, 1024), why).valid());
  CHECK(why.find("limits") != std::string::npos);
}

TEST_CASE("coopmat selection: block types by default on GPUs, REACH_COOPMAT=1 every type, =0 none") {
  const Capabilities& caps = gpu().device->caps();
  auto with = [&](CoopmatUse use) {
    KernelSettings s;
    s.coopmat = use;
    return KernelConfig::from(caps, s);
  };
  const KernelConfig off = with(CoopmatUse::off), on = with(CoopmatUse::all), dflt = with(CoopmatUse::device);
  CHECK_FALSE(off.coopmat.valid());
  CHECK_FALSE(off.coopmat_auto);
  CHECK_FALSE(off.coopmat_auto_quant);
  CHECK(off.coopmat_why.find("REACH_COOPMAT=0") != std::string::npos);
  // By default: quantized weights on GPUs only; float weights keep the f32 GEMM (as fast on an H100,
  // X not rounded to f16); =1 every type on every device.
  CHECK_FALSE(dflt.coopmat_auto);
  CHECK(dflt.coopmat_auto_quant == (dflt.coopmat.valid() && !caps.is_cpu()));
  CHECK(on.coopmat_auto_quant == dflt.coopmat.valid());
  CHECK(on.coopmat_auto == dflt.coopmat.valid());
  // Without the capability the reason names what is missing.
  if (!dflt.coopmat.valid()) CHECK_FALSE(dflt.coopmat_why.empty());
  // Asking for the kernel anyway is a clear error, not a crash.
  Kernels k(*gpu().device, off);
  auto& g = gpu();
  Buffer b = g.upload_f32(std::vector<float>(64, 0.5f));
  Act x{&b, 0, 4, 8};
  Mat w{&b, 0, WType::f32, 2, 8};
  Act y{&b, 0, 4, 2};
  CHECK_THROWS_WITH_AS(g.run([&](CommandList& cmd) { k.linear_gemm_coopmat(cmd, x, w, y); }),
                       doctest::Contains("REACH_COOPMAT=0"), Error);
}

TEST_CASE("coopmat selection: an adopted device uses cooperative matrices only where the host enabled them") {
  // The host's device enables no optional feature; the physical device may still list the extension.
  HostVulkan host;
  AdoptedDevice h;
  h.instance = host.instance;
  h.physical_device = host.phys;
  h.device = host.device;
  h.queue_family = host.family;
  h.queue = host.queue;
  h.fp16_arithmetic_enabled = true;   // claimed, but not the cooperative matrices
  auto dev = Device::adopt(h);
  CHECK_FALSE(dev->caps().cooperative_matrix);
  const KernelConfig cfg = KernelConfig::from(dev->caps());
  CHECK_FALSE(cfg.coopmat.valid());
  CHECK((cfg.coopmat_why.find("absent") != std::string::npos || cfg.coopmat_why.find("not built") != std::string::npos));
}

TEST_CASE("coopmat gemm: f32, f16 and bf16 weights, M, N, K off the tile, M = 1..3, large K") {
  if (!have_coopmat()) return;
  const KernelConfig cfg = base_config();
  Kernels k(*gpu().device, cfg);
  const uint32_t bm = cfg.coopmat.bm, bn = cfg.coopmat.bn;
  const uint32_t ms[] = {1u, 2u, 3u, bm - 1, bm + 1, 2 * bm + 5};
  const uint32_t ns[] = {1u, bn - 1, bn, bn + 1, 67u};
  const uint32_t ks[] = {8u, 31u, 32u, 33u, 100u, 576u};
  for_sample("coopmat gemm float", {std::size(kFloatTypes), std::size(ms), std::size(ns), std::size(ks)}, 8,
             [&](const SweepPick& p) {
               check_case(k, {ms[p[1]], ns[p[2]], ks[p[3]], kFloatTypes[p[0]]}, "default", 1 + uint32_t(p.flat));
             });
  // Large K: thousands of f32 additions per output (the bound grows with K).
  for (WType t : kFloatTypes) check_case(k, {3, 5, 4099, t}, "large K", 900 + uint32_t(t));
}

TEST_CASE("coopmat gemm: quantized weights (q8_0 ... q6_k) dequantized into shared memory") {
  if (!have_coopmat()) return;
  const KernelConfig cfg = base_config();
  Kernels k(*gpu().device, cfg);
  const uint32_t bm = cfg.coopmat.bm, bn = cfg.coopmat.bn;
  const uint32_t ms[] = {1u, 3u, bm - 1, bm + 1};
  const uint32_t ns[] = {1u, bn - 1, bn + 1, 67u};
  for_sample("coopmat gemm quant", {std::size(kQuantTypes), std::size(ms), std::size(ns)}, 6,
             [&](const SweepPick& p) {
               const WType t = kQuantTypes[p[0]];
               const uint32_t be = wtype_block_elems(t), seed = 1000 + uint32_t(p.flat);
               const uint32_t K = be == 256 ? 256u * (1 + seed % 3) : 32u * (1 + seed % 5);
               check_case(k, {ms[p[1]], ns[p[2]], K, t}, "default", seed);
             });
  // Large K for a 32-block and a 256-block type.
  check_case(k, {2, 9, 4096, WType::q4_0}, "large K", 950);
  check_case(k, {2, 9, 4096, WType::q6_k}, "large K", 951);
}

TEST_CASE("coopmat gemm: row chunks of small bindings, and offsets of X, W and Y") {
  if (!have_coopmat()) return;
  // A 16 KiB binding span: W splits into row chunks (writing columns of Y) and X / Y into row passes.
  KernelConfig cfg = base_config();
  cfg.max_binding = 16384;
  Kernels small(*gpu().device, cfg);
  check_case(small, {37, 150, 96, WType::f16}, "16 KiB bindings", 1200);
  check_case(small, {37, 150, 96, WType::f32}, "16 KiB bindings", 1201);
  check_case(small, {37, 150, 96, WType::q4_1}, "16 KiB bindings", 1202);
  check_case(small, {20, 70, 256, WType::q4_k}, "16 KiB bindings", 1203);
  Kernels k(*gpu().device, base_config());
  for (WType t : {WType::f32, WType::bf16, WType::q8_0, WType::q6_k}) {
    const uint32_t K = wtype_is_quant(t) ? wtype_block_elems(t) * 2 : 44;
    check_case(k, {19, 21, K, t, 12, wtype_is_quant(t) ? 48u : 6u * wtype_size(t), 20}, "offsets", 1300 + uint32_t(t));
  }
}

// The kernels linear() records for M rows (labels of a profiled command list; empty without timestamps).
// W's bytes are 0.5f's whatever the type (a q4_0 block's scale is then 0): only the labels matter.
static std::vector<std::string> linear_kernels(Kernels& k, uint32_t M, WType t = WType::f32) {
  auto& g = gpu();
  const uint32_t K = 64, N = 40;
  Buffer bx = g.upload_f32(std::vector<float>(size_t(M) * K, 0.25f));
  Buffer bw = g.upload_f32(std::vector<float>(size_t(N) * K, 0.5f), Arena::weights);
  Buffer by = g.zeros(size_t(M) * N * 4);
  CommandList cmd(*g.device, true);
  cmd.begin();
  k.linear(cmd, Act{&bx, 0, M, K}, Mat{&bw, 0, t, N, K}, Act{&by, 0, M, N});
  cmd.end();
  cmd.run();
  std::vector<std::string> out;
  for (const KernelTiming& t : cmd.timings()) out.push_back(t.label);
  return out;
}

TEST_CASE("coopmat linear: linear() takes the cooperative-matrix GEMM from coopmat_min_m rows when coopmat_auto") {
  if (!have_coopmat()) return;
  KernelConfig cfg = base_config();
  cfg.coopmat_auto = true;
  Kernels k(*gpu().device, cfg);
  const uint32_t m = std::max(cfg.coopmat_min_m, cfg.linear_matvec_max_m + 1);
  check_case(k, {m, 40, 64, WType::f16}, "linear", 1400, true);
  check_case(k, {m + 17, 40, 64, WType::q4_0}, "linear", 1401, true);
  if (!gpu().device->caps().timestamps) {
    MESSAGE("SKIP: which kernel linear() records (the device has no timestamps to label dispatches)");
    return;
  }
  using Labels = std::vector<std::string>;
  CHECK(linear_kernels(k, m) == Labels{"linear_gemm_coopmat"});
  if (m > cfg.linear_matvec_max_m + 1) CHECK(linear_kernels(k, m - 1) == Labels{"linear_gemm"});
  cfg.coopmat_auto = false;
  Kernels manual(*gpu().device, cfg);
  CHECK(linear_kernels(manual, m) == Labels{"linear_gemm"});
  // GPUs' default: the block types only.
  cfg.coopmat_auto_quant = true;
  Kernels quant(*gpu().device, cfg);
  CHECK(linear_kernels(quant, m) == Labels{"linear_gemm"});
  CHECK(linear_kernels(quant, m, WType::q4_0) == Labels{"linear_gemm_coopmat"});
  CHECK(linear_kernels(manual, m, WType::q4_0) == Labels{"linear_gemm_q"});
}
