// The fused mat-vec (Kernels::linear_matvec_fused, kernels/linear_fused.cpp;
// shaders/linear_matvec_fused.comp, linear_matvec_fused_q.comp) against a
// double-precision reference written here: RMSNorm of the input row, the
// SiLU / GELU-tanh gate, the dot with the exactly dequantized weights, bias and
// accumulate.  Every weight type, each fusion alone and combined, 1..3 outputs
// (mixed types too), M = 1 and 3, N off the workgroup, K off 4 (float) and off
// 256 (32-weight blocks), every mat-vec mode, texel and storage W, row chunks
// of small bindings; and with nothing fused, linear_matvec's bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"
#include "tests/support/quant_reference.hpp"

using namespace reach;
using namespace reach::test;

namespace {

// Weights as stored on the device, their exact values, and per weight the
// magnitude its rounding in the kernel scales with (|w|; quantized: |a·q| + |b|).
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> deq, mag;
};
Weights make_weights(WType t, uint32_t N, uint32_t K, uint32_t seed) {
  Weights w;
  const size_t n = size_t(N) * K;
  if (wtype_is_quant(t)) {
    const size_t nb = n / wtype_block_elems(t);
    const auto file = quant_random_blocks(t, nb, seed);
    w.bytes.resize(quant_device_bytes(t, N, K));
    quant_to_device_layout(t, N, K, file.data(), w.bytes.data());
    w.deq = quant_dequantize(t, file.data(), nb, &w.mag);
    return w;
  }
  float_weights(t, n, seed, w.bytes, w.deq);
  w.mag.resize(n);
  for (size_t i = 0; i < n; ++i) w.mag[i] = std::fabs(w.deq[i]);
  return w;
}

enum Fuse : uint32_t { kNorm = 1, kSilu = 2, kGelu = 4, kBias = 8, kAcc = 16 };
std::string fuse_name(uint32_t f) {
  std::string s;
  for (auto [bit, name] : {std::pair{kNorm, "norm"}, {kSilu, "silu"}, {kGelu, "gelu"}, {kBias, "bias"}, {kAcc, "acc"}})
    if (f & bit) s += (s.empty() ? "" : "+") + std::string(name);
  return s.empty() ? "none" : s;
}
// Each fusion alone, and combinations (the input transforms with the epilogues).
constexpr uint32_t kFusions[] = {kNorm, kSilu, kGelu, kBias, kAcc, kNorm | kBias, kSilu | kAcc, kGelu | kBias | kAcc,
                                 kNorm | kSilu, kNorm | kGelu | kBias | kAcc, 0};

constexpr WType kAllTypes[] = {WType::f32,  WType::f16,  WType::bf16, WType::q8_0, WType::q4_0, WType::q4_1,
                               WType::q5_0, WType::q5_1, WType::q4_k, WType::q5_k, WType::q6_k};
// K: float off a multiple of 4 (the scalar tail) and a model width; blocks of
// 32 off a multiple of 256; super-blocks one and three.
uint32_t k_for(WType t, size_t i) {
  if (!wtype_is_quant(t)) return i % 2 ? 576 : 99;
  if (wtype_block_elems(t) == 256) return i % 2 ? 768 : 256;
  return i % 2 ? 160 : 96;
}

// The reference's activations.
double silu(double a) { return a / (1 + std::exp(-a)); }
double gelu_tanh(double a) { return 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))); }

// Rounding of the kernel (f32) against the exact result, per output element:
//  * the dot: at most ~K/4 + 64 roundings relative to Σ|x'|·mag (dot chains of 4,
//    sub-block terms, subgroup / shared trees; as tests/test_kernels_linear_quant);
//  * x' itself: the gate's exp, division and products (lavapipe's exp is within
//    ~2^-19 relative: 32 ULP allowed) and the norm's scale, whose f32 sum of
//    squares over K is within K ULP (rsqrt and the two products: 4 more): each
//    a relative error of x'_k, so it enters as ULP · Σ|x'_k|·mag_k too;
//  * bias and accumulate: one rounding each, of |bias| + |dot| and |y_old| + |that|.
// A wrong element (a weight, a row, a missed fusion) is off by ~|x|·|w| ~ 1e-2 or more.
const char* const kWhy =
    "f32: <= 2^-24 * ((K + 64) + 32 [gate] + (K + 4) [norm]) * sum_k |x'_k| * mag_k + 2^-23 * (|bias| + |y_old| + "
    "2|dot|), mag = |w| or the quantized rounding magnitude |a*q| + |b|";

struct FCase {
  std::vector<WType> types;   // one per output (1..3)
  std::vector<uint32_t> ns;
  uint32_t M = 1, K = 32, fuse = 0;
  uint32_t x_off = 0;         // bytes
  uint32_t norm_off = 4;      // bytes: 4 binds the norm from an aligned start (floats), 0 as vec4s
  bool norm_texel = true;     // MatvecInput::norm_texel: texel variants read the norm as a texel buffer
};

void check_fused(Kernels& k, const FCase& c, const std::string& variant, uint32_t seed) {
  auto& g = gpu();
  const uint32_t M = c.M, K = c.K, outs = uint32_t(c.types.size());
  const bool gated = c.fuse & (kSilu | kGelu), norm = c.fuse & kNorm;
  const uint32_t xc = gated ? 2 * K : K;
  const float eps = 1e-5f;
  std::vector<float> x(size_t(M) * xc), nw(K);
  // Gate inputs in about [-4, 4] so that both tails of the activation are met.
  for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed * 11 + 1) * (gated && i % xc < K ? 4.0f : 1.0f);
  for (uint32_t i = 0; i < K; ++i) nw[i] = 0.5f + hash_value(i, seed * 11 + 2);

  // x' per row, and Σ|x'|·mag bounds per output element.
  std::vector<double> xin(size_t(M) * K);
  for (uint32_t m = 0; m < M; ++m) {
    double ss = 0;
    for (uint32_t kk = 0; kk < K; ++kk) {
      const double a = x[size_t(m) * xc + kk];
      double v = a;
      if (c.fuse & kSilu) v = silu(a) * x[size_t(m) * xc + K + kk];
      if (c.fuse & kGelu) v = gelu_tanh(a) * x[size_t(m) * xc + K + kk];
      xin[size_t(m) * K + kk] = v;
      ss += v * v;
    }
    if (norm) {
      const double r = 1 / std::sqrt(ss / K + eps);
      for (uint32_t kk = 0; kk < K; ++kk) xin[size_t(m) * K + kk] *= r * nw[kk];
    }
  }
  const double ulps = (K + 64.0) + (gated ? 32.0 : 0.0) + (norm ? K + 4.0 : 0.0);

  struct Out {
    Weights w;
    std::vector<float> bias, y0;
    size_t at = 0;   // first element in the Y buffer
  };
  std::vector<Out> o(outs);
  const size_t gap = 3;   // sentinels before, between and after the outputs (Y offsets off 16 bytes)
  size_t y_total = gap;
  for (uint32_t i = 0; i < outs; ++i) {
    const uint32_t N = c.ns[i];
    o[i].w = make_weights(c.types[i], N, K, seed * 11 + 3 + i);
    o[i].bias.resize(N);
    for (uint32_t n = 0; n < N; ++n) o[i].bias[n] = hash_value(n, seed * 11 + 6 + i);
    o[i].y0.resize(size_t(M) * N);
    for (size_t j = 0; j < o[i].y0.size(); ++j) o[i].y0[j] = 2 * hash_value(j, seed * 11 + 9 + i);
    o[i].at = y_total;
    y_total += size_t(M) * N + gap;
  }
  const float sentinel = -12345.0f;
  std::vector<float> y_init(y_total, sentinel);
  for (uint32_t i = 0; i < outs; ++i)
    if (c.fuse & kAcc) std::copy(o[i].y0.begin(), o[i].y0.end(), y_init.begin() + ptrdiff_t(o[i].at));

  std::vector<double> ref(y_init.begin(), y_init.end());
  double tol = 0;
  for (uint32_t i = 0; i < outs; ++i) {
    const uint32_t N = c.ns[i];
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t n = 0; n < N; ++n) {
        double dot = 0, mag = 0;
        for (uint32_t kk = 0; kk < K; ++kk) {
          const double v = xin[size_t(m) * K + kk];
          dot += v * o[i].w.deq[size_t(n) * K + kk];
          mag += std::fabs(v) * o[i].w.mag[size_t(n) * K + kk];
        }
        double y = dot, e = std::ldexp(ulps, -24) * mag;
        if (c.fuse & kBias) {
          y += o[i].bias[n];
          e += std::ldexp(std::fabs(o[i].bias[n]) + std::fabs(dot), -23);
        }
        if (c.fuse & kAcc) {
          const double y_old = o[i].y0[size_t(m) * N + n];
          y += y_old;
          e += std::ldexp(std::fabs(y_old) + std::fabs(dot), -23);
        }
        ref[o[i].at + size_t(m) * N + n] = y;
        tol = std::max(tol, e);
      }
  }

  std::string types, ns;
  for (uint32_t i = 0; i < outs; ++i) {
    types += (i ? "," : "") + std::string(wtype_name(c.types[i]));
    ns += (i ? "," : "") + std::to_string(c.ns[i]);
  }
  check_kernel({
      .op = "linear_matvec_fused",
      .params = str("M=", M, " K=", K, " N=", ns, " W=", types, " fuse=", fuse_name(c.fuse), " x_off=", c.x_off,
                    " norm_off=", c.norm_off, c.norm_texel ? "" : " norm:ssbo", " variant=", variant),
      .seed = seed,
      .tol = Tolerance::max_abs(tol + 1e-30, kWhy),
      .device =
          [&] {
            std::vector<uint8_t> xbytes(c.x_off + x.size() * 4, 0xCD);
            std::memcpy(xbytes.data() + c.x_off, x.data(), x.size() * 4);
            Buffer bx = g.upload_bytes(xbytes.data(), xbytes.size());
            // The norm weights after norm_off bytes.
            std::vector<float> nbuf(c.norm_off / 4 + K, 0.0f);
            std::copy(nw.begin(), nw.end(), nbuf.begin() + c.norm_off / 4);
            Buffer bn = g.upload_f32(nbuf);
            Buffer by = g.upload_f32(y_init);
            std::vector<Buffer> bw, bb;
            for (uint32_t i = 0; i < outs; ++i) {
              bw.push_back(g.upload_bytes(o[i].w.bytes.data(), o[i].w.bytes.size(), Arena::weights));
              bb.push_back(g.upload_f32(o[i].bias));
            }
            MatvecInput in;
            if (norm) in.norm = bn.range(c.norm_off, VkDeviceSize(K) * 4);
            in.norm_texel = c.norm_texel;
            in.eps = eps;
            in.gate = c.fuse & kSilu ? GateActivation::silu : c.fuse & kGelu ? GateActivation::gelu_tanh
                                                                             : GateActivation::none;
            std::vector<MatvecOutput> mo(outs);
            for (uint32_t i = 0; i < outs; ++i) {
              mo[i].w = Mat{&bw[i], 0, c.types[i], c.ns[i], K};
              mo[i].y = Act{&by, o[i].at * 4, M, c.ns[i]};
              if (c.fuse & kBias) mo[i].bias = bb[i].range(0, VkDeviceSize(c.ns[i]) * 4);
              mo[i].accumulate = c.fuse & kAcc;
            }
            const Act ax{&bx, c.x_off, M, xc};
            g.run([&](CommandList& cmd) { k.linear_matvec_fused(cmd, ax, in, mo); });
            return Values::of(g.download_f32(by, y_total));
          },
      .reference = [&] { return Values::of(ref); },
      .guard_front = gap,
      .guard_back = gap,
      .where = [&](size_t e) {
        for (uint32_t i = 0; i < outs; ++i)
          if (e >= o[i].at && e < o[i].at + size_t(M) * c.ns[i])
            return str("output ", i, " (m,n)=(", (e - o[i].at) / c.ns[i], ",", (e - o[i].at) % c.ns[i], ")");
        return str("element ", e, " of the Y buffer, outside every output");
      },
  });
}

uint32_t per_group(const KernelConfig& cfg) {
  return cfg.matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE ? cfg.matvec_wg * cfg.matvec_rows : cfg.matvec_rows;
}

// Sampled: every type, fusion, output count, M and W path at least once; N
// around the workgroup's rows, K per type (k_for).  The inputs are a function
// of the tuple (its flat index is the seed).
void fused_sweep(const std::vector<KernelConfig>& cfgs, const std::string& variant, size_t extra, uint32_t seed0,
                 std::span<const WType> types = kAllTypes, std::span<const uint32_t> fusions = kFusions) {
  const uint32_t ms[] = {1, 3};
  const bool texel[] = {false, true};
  for_sample("fused " + variant, {types.size(), fusions.size(), 3, std::size(ms), 2, cfgs.size()}, extra,
             [&](const SweepPick& p) {
               const KernelConfig& base = cfgs[p[5]];
               const uint32_t ns[] = {per_group(base) + 1, 67, 5};
               KernelConfig cfg = base;
               cfg.weights_texel = base.weights_texel && texel[p[4]];
               Kernels k(*gpu().device, cfg);
               const WType t = types[p[0]];
               FCase c;
               c.types.assign(p[2] + 1, t);
               for (size_t i = 0; i <= p[2]; ++i) c.ns.push_back(ns[(p.flat + i) % std::size(ns)]);
               c.M = ms[p[3]];
               c.K = k_for(t, p.flat / 7);
               c.fuse = fusions[p[1]];
               c.x_off = p.flat % 3 == 0 ? 4 : 0;
               c.norm_off = p.flat % 2 ? 4 : 0;
               c.norm_texel = p.flat % 5 != 0;   // else W falls back to storage buffers
               check_fused(k, c,
                           variant + " mode" + std::to_string(cfg.matvec_mode) + " wg" + std::to_string(cfg.matvec_wg) +
                               " rows" + std::to_string(cfg.matvec_rows) +
                               (cfg.matvec_norm_subgroup ? "" : " norm:lane") +
                               (cfg.weights_texel ? " W:texel" : " W:ssbo"),
                           seed0 + uint32_t(p.flat));
             });
}

}  // namespace

TEST_CASE("linear_matvec_fused: every type and fusion, 1..3 outputs (default variant)") {
  fused_sweep({base_config()}, "default", 0, 1000);
}

TEST_CASE("linear_matvec_fused: GPU modes (subgroup, shared tree), mode 0 summing squares per lane") {
  // One sweep over the configurations (a dimension of it): the fused parts
  // (input rows, row scales, stores) do not depend on the weight type.
  const auto& caps = gpu().device->caps();
  std::vector<KernelConfig> cfgs;
  KernelConfig lane = base_config();
  lane.matvec_mode = spec::MATVEC_MODE_ROW_PER_LANE;
  lane.matvec_wg = 16;
  lane.matvec_rows = 4;
  lane.matvec_norm_subgroup = false;
  cfgs.push_back(lane);
  for (uint32_t mode : {spec::MATVEC_MODE_SUBGROUP, spec::MATVEC_MODE_SHARED}) {
    if (mode == spec::MATVEC_MODE_SUBGROUP && !caps.has_subgroup_arithmetic()) continue;
    KernelConfig cfg = base_config();
    cfg.matvec_mode = mode;
    cfg.matvec_wg = 32;
    cfg.matvec_rows = 4;
    cfg.matvec_max_acc = 0;
    cfg.weights_texel = false;
    cfg.activations_texel = false;
    cfg.matvec_xshared = false;
    cfgs.push_back(cfg);
    // X (after the norm or gate) staged once per workgroup in shared memory: GPUs' default.
    cfg.matvec_xshared = true;
    cfgs.push_back(cfg);
  }
  // Both kernel bodies, the three float types, blocks of 32 and of 256; the
  // fusions whose code differs by mode (the row scales) and the others once.
  const WType types[] = {WType::f32, WType::f16, WType::bf16, WType::q4_1, WType::q5_k, WType::q6_k};
  const uint32_t fusions[] = {kNorm, kNorm | kGelu | kBias | kAcc, kSilu | kAcc, kBias};
  fused_sweep(cfgs, "forced", 0, 20000, types, fusions);
}

TEST_CASE("linear_matvec_fused: outputs of different types (q/k in one type, v in another)") {
  Kernels k(*gpu().device, base_config());
  const std::vector<std::vector<WType>> mixes = {{WType::q4_k, WType::q4_k, WType::q6_k},
                                                 {WType::q6_k, WType::q4_k, WType::q6_k},
                                                 {WType::f16, WType::q8_0, WType::f16},
                                                 {WType::q4_0, WType::q8_0},
                                                 {WType::bf16, WType::f32, WType::f16}};
  uint32_t seed = 50000;
  for (const auto& mix : mixes)
    for (uint32_t fuse : {seed % 2 ? uint32_t(kNorm | kBias) : uint32_t(kSilu | kAcc)}) {
      const bool k256 = std::any_of(mix.begin(), mix.end(), [](WType t) { return wtype_block_elems(t) == 256; });
      FCase c;
      c.types = mix;
      c.ns = {130, 64, 33};
      c.ns.resize(mix.size());
      c.M = seed % 2 ? 3 : 1;
      c.K = k256 ? 512 : 96;
      c.fuse = fuse;
      check_fused(k, c, "mixed", seed++);
    }
}

TEST_CASE("linear_matvec_fused: weights, X and Y split over several bindings") {
  // Tiny binding spans force W row chunks (one dispatch per output chunk) and M passes.
  uint32_t seed = 60000;
  for (uint64_t max_binding : {4096ull, 20000ull})
    for (bool texel : {false, true}) {
      KernelConfig cfg = base_config();
      cfg.max_binding = max_binding;
      cfg.weights_texel = cfg.weights_texel && texel;
      Kernels k(*gpu().device, cfg);
      for (WType t : {WType::f16, WType::q4_1, WType::q6_k, WType::mxfp4}) {
        FCase c;
        c.types = {t, t};
        c.ns = {150, 41};
        c.M = 3;
        c.K = t == WType::q6_k ? 256 : 96;
        c.fuse = seed % 2 ? (kNorm | kBias | kAcc) : (kGelu | kBias);
        check_fused(k, c, "max_binding=" + std::to_string(max_binding) + (cfg.weights_texel ? " W:texel" : " W:ssbo"),
                    seed++);
      }
    }
}

TEST_CASE("linear_matvec_fused: nothing fused is linear_matvec bit for bit") {
  auto& g = gpu();
  const auto& caps = g.device->caps();
  std::vector<KernelConfig> cfgs;
  for (bool texel : {false, true}) {
    KernelConfig cfg = base_config();
    cfg.weights_texel = cfg.weights_texel && texel;
    cfgs.push_back(cfg);
  }
  for (uint32_t mode : {spec::MATVEC_MODE_SUBGROUP, spec::MATVEC_MODE_SHARED}) {
    if (mode == spec::MATVEC_MODE_SUBGROUP && !caps.has_subgroup_arithmetic()) continue;
    KernelConfig cfg = base_config();
    cfg.matvec_mode = mode;
    cfg.matvec_wg = 32;
    cfg.matvec_rows = 4;
    cfg.weights_texel = cfg.activations_texel = false;
    for (bool xshared : {false, true}) {
      cfg.matvec_xshared = xshared;
      cfgs.push_back(cfg);
    }
  }
  for_sample("fused bitwise", {cfgs.size(), std::size(kAllTypes), 2}, 0, [&](const SweepPick& p) {
    Kernels k(*g.device, cfgs[p[0]]);
    const WType t = kAllTypes[p[1]];
    const uint32_t M = p[2] ? 3 : 1, K = k_for(t, p.flat), seed = 70000 + uint32_t(p.flat);
    const uint32_t ns[3] = {per_group(cfgs[p[0]]) + 3, 67, 8};
    std::vector<float> x(size_t(M) * K);
    for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed);
    Buffer bx = g.upload_f32(x);
    std::vector<Buffer> bw, ya, yb;
    bw.reserve(3), ya.reserve(3), yb.reserve(3);   // the Mat / Act point into them
    std::vector<MatvecOutput> mo(3);
    for (uint32_t i = 0; i < 3; ++i) {
      const Weights w = make_weights(t, ns[i], K, seed * 3 + i);
      bw.push_back(g.upload_bytes(w.bytes.data(), w.bytes.size(), Arena::weights));
      ya.push_back(g.zeros(size_t(M) * ns[i] * 4));
      yb.push_back(g.zeros(size_t(M) * ns[i] * 4));
      mo[i].w = Mat{&bw[i], 0, t, ns[i], K};
      mo[i].y = Act{&ya[i], 0, M, ns[i]};
    }
    const Act ax{&bx, 0, M, K};
    g.run([&](CommandList& cmd) {
      k.linear_matvec_fused(cmd, ax, MatvecInput{}, mo);
      for (uint32_t i = 0; i < 3; ++i) k.linear_matvec(cmd, ax, mo[i].w, Act{&yb[i], 0, M, ns[i]});
    });
    for (uint32_t i = 0; i < 3; ++i) {
      const auto got = g.download_f32(ya[i], size_t(M) * ns[i]), want = g.download_f32(yb[i], size_t(M) * ns[i]);
      size_t bad = 0;
      for (size_t e = 0; e < got.size(); ++e) bad += std::memcmp(&got[e], &want[e], 4) != 0;
      INFO(wtype_name(t), " M=", M, " K=", K, " output ", i, " config ", p[0]);
      CHECK(bad == 0);
    }
  });
}

TEST_CASE("linear_matvec_fused: misuse is refused") {
  auto& g = gpu();
  Kernels k(*g.device, base_config());
  Buffer bx = g.zeros(4 * 64), bw = g.zeros(4 * 64 * 8), by = g.zeros(4 * 8 * 4);
  const Act x{&bx, 0, 1, 64};
  MatvecOutput o{Mat{&bw, 0, WType::f32, 8, 64}, Act{&by, 0, 1, 8}};
  auto record = [&](const Act& xa, const MatvecInput& in, std::vector<MatvecOutput> outs) {
    g.run([&](CommandList& cmd) { k.linear_matvec_fused(cmd, xa, in, outs); });
  };
  CHECK_THROWS_AS(record(x, {}, {}), Error);
  CHECK_THROWS_AS(record(x, {}, {o, o, o, o}), Error);
  MatvecInput gated;
  gated.gate = GateActivation::silu;   // K = 32 then, but W has 64 columns
  CHECK_THROWS_AS(record(x, gated, {o}), Error);
  MatvecOutput alias = o;
  alias.y = Act{&bx, 0, 1, 8};   // Y inside X
  CHECK_THROWS_AS(record(x, {}, {alias}), Error);
  CHECK_THROWS_AS(record(x, {}, {o, o}), Error);   // two outputs on one Y
  MatvecInput short_norm;
  short_norm.norm = bx.range(0, 16);
  CHECK_THROWS_AS(record(x, short_norm, {o}), Error);
}
