// moe_matvec and moe_combine (kernels/moe_matvec.cpp, kernels/moe.cpp) on the Vulkan device vs plain C++
// references in double: every chosen (row, expert) slot times its expert's matrix for every weight type (the
// float types and each block type, mxfp4 included, dequantized by tests/support/quant_reference), with experts
// no row chose, one expert every row chose, top-k = 1 and = E, several rows; the activated input of down
// (silu, gelu_tanh, gpt-oss's clamped SwiGLU) and the experts' biases; stacks cut into groups of experts
// across bindings; both mat-vec modes and the texel / storage weight paths; the weighted sum of the slots.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/half.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"
#include "tests/support/quant_reference.hpp"

using namespace reach;
using namespace reach::test;

namespace {

// E experts' [N, K] matrices of type t stacked in one weights buffer at a 256-byte stride, and their exact
// values (what the device must read) with the rounding magnitudes |a·q| + |b| of the block types.
struct Stack {
  std::vector<float> w, mag;   // [E][N][K]
  Buffer buf;
  std::vector<Mat> mats;
};

void make_stack(Stack& s, WType t, uint32_t E, uint32_t N, uint32_t K, uint32_t seed) {
  const bool quant = wtype_is_quant(t);
  const uint64_t mbytes = quant ? quant_device_bytes(t, N, K) : uint64_t(N) * K * wtype_size(t);
  const uint64_t stride = (mbytes + 255) / 256 * 256;
  std::vector<uint8_t> dev(stride * E, 0xCD);
  s.w.clear(), s.mag.clear();
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 0.5f);
  for (uint32_t e = 0; e < E; ++e) {
    uint8_t* out = dev.data() + e * stride;
    if (quant) {
      const size_t nb = size_t(N) * K / wtype_block_elems(t);
      const auto blocks = quant_random_blocks(t, nb, seed * 31 + e);
      quant_to_device_layout(t, N, K, blocks.data(), out);
      std::vector<float> mag;
      const auto deq = quant_dequantize(t, blocks.data(), nb, &mag);
      s.w.insert(s.w.end(), deq.begin(), deq.end());
      s.mag.insert(s.mag.end(), mag.begin(), mag.end());
      continue;
    }
    for (uint64_t i = 0; i < uint64_t(N) * K; ++i) {
      float v = nd(rng);
      if (t == WType::f32) {
        std::memcpy(out + i * 4, &v, 4);
      } else {
        const uint16_t h = t == WType::f16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
        std::memcpy(out + i * 2, &h, 2);
        v = t == WType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      s.w.push_back(v);
      s.mag.push_back(std::fabs(v));
    }
  }
  s.buf = gpu().upload_bytes(dev.data(), dev.size(), Arena::weights, "experts");
  s.mats.clear();
  for (uint32_t e = 0; e < E; ++e) s.mats.push_back(Mat{&s.buf, e * stride, t, N, K});
}

// Each row's k distinct experts: `pool` experts only (the others get no row), `always` in every row when set.
std::vector<int32_t> choose(uint32_t rows, uint32_t k, uint32_t pool, int32_t always, std::mt19937& rng) {
  std::vector<int32_t> ids;
  for (uint32_t r = 0; r < rows; ++r) {
    std::vector<int32_t> p(pool);
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    if (always >= 0) {
      std::iter_swap(p.begin(), std::find(p.begin(), p.end(), always));
      std::shuffle(p.begin(), p.begin() + k, rng);   // not always the first slot
    }
    ids.insert(ids.end(), p.begin(), p.begin() + k);
  }
  return ids;
}

double act_ref(MoeActivation a, double g, double u, double alpha, double limit) {
  switch (a) {
    case MoeActivation::silu: return g / (1 + std::exp(-g)) * u;
    case MoeActivation::gelu_tanh: return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u;
    case MoeActivation::swiglu_clamped: {
      const double gc = std::min(g, limit), uc = std::clamp(u, -limit, limit);
      return (uc + 1) * gc / (1 + std::exp(-alpha * gc));
    }
    case MoeActivation::none: break;
  }
  return g;
}

struct MvCase {
  WType t;
  uint32_t E, N, K, rows, k;
  uint32_t pool;            // experts the rows choose from (E: all)
  int32_t always = -1;      // an expert every row chose
  MoeActivation act = MoeActivation::none;
  bool bias = false;
  bool norm = false;        // the layer's RMSNorm folded into the input (act none)
};

// Runs one case through `kern` and checks every slot's outputs (and that the columns beside them are untouched).
void check_mv(Kernels& kern, const MvCase& c, uint32_t seed, const std::string& variant) {
  auto& g = gpu();
  CAPTURE(variant);
  const std::string type = wtype_name(c.t);
  CAPTURE(type);
  CAPTURE(c.E);
  CAPTURE(c.N);
  CAPTURE(c.K);
  CAPTURE(c.rows);
  CAPTURE(c.k);
  CAPTURE(uint32_t(c.act));
  Stack st;
  make_stack(st, c.t, c.E, c.N, c.K, seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  const uint32_t slots = c.rows * c.k;
  const bool gated = c.act != MoeActivation::none;
  const uint32_t xrows = gated ? slots : c.rows, xcols = gated ? 2 * c.K : c.K;
  std::vector<float> x(size_t(xrows) * xcols), bias(size_t(c.E) * c.N);
  for (float& v : x) v = gated ? 3 * nd(rng) : nd(rng);   // gated: past the clamp limit now and then
  for (float& v : bias) v = nd(rng);
  std::vector<float> norm(c.K);
  for (float& v : norm) v = 1.0f + 0.5f * nd(rng);
  const double eps = 1e-5;
  const auto ids = choose(c.rows, c.k, c.pool, c.always, rng);
  const double alpha = 1.702, limit = 2.5;

  // Y: [slots][ldy] with the outputs at column y_col (as up's half of [gate | up]); the rest keeps a sentinel.
  const uint32_t y_col = 3, ldy = c.N + 5;
  const float sentinel = -777.0f;
  Buffer bn = g.upload_f32(norm), bx = g.upload_f32(x), bb = g.upload_f32(bias), by = g.upload_f32(std::vector<float>(size_t(slots) * ldy, sentinel));
  std::vector<float> ids_f(ids.size());
  std::memcpy(ids_f.data(), ids.data(), ids.size() * 4);
  Buffer bi = g.upload_f32(ids_f);
  MoeMatvecArgs a;
  a.x = Act{&bx, 0, xrows, xcols};
  a.x_div = gated ? 1 : c.k;
  a.act = c.act, a.alpha = float(alpha), a.limit = float(limit);
  a.ids = bi.range(), a.slots = slots;
  a.y = Act{&by, y_col * 4, slots, ldy};
  if (c.bias) a.bias = bb.range();
  if (c.norm) a.norm = bn.range(), a.eps = float(eps);
  g.run([&](CommandList& cmd) { kern.moe_matvec(cmd, st.mats, a); });
  const auto y = g.download_f32(by, size_t(slots) * ldy);

  double worst = 0;
  size_t bad_guard = 0;
  for (uint32_t s = 0; s < slots; ++s) {
    const uint32_t e = uint32_t(ids[s]);
    const float* xr = &x[size_t(gated ? s : s / c.k) * xcols];
    double r = 1;   // norm_rms's scale of the row
    if (c.norm) {
      double ss = 0;
      for (uint32_t kk = 0; kk < c.K; ++kk) ss += double(xr[kk]) * xr[kk];
      r = 1 / std::sqrt(ss / c.K + eps);
    }
    for (uint32_t col = 0; col < ldy; ++col) {
      const float got = y[size_t(s) * ldy + col];
      if (col < y_col || col >= y_col + c.N) {
        bad_guard += got != sentinel;
        continue;
      }
      const uint32_t n = col - y_col;
      double acc = 0, mag = 0;
      for (uint32_t kk = 0; kk < c.K; ++kk) {
        const double xv = gated ? act_ref(c.act, xr[kk], xr[c.K + kk], alpha, limit)
                                : double(xr[kk]) * (c.norm ? r * norm[kk] : 1.0);
        const size_t wi = (size_t(e) * c.N + n) * c.K + kk;
        acc += xv * st.w[wi];
        mag += std::fabs(xv) * st.mag[wi];
      }
      if (c.bias) acc += bias[size_t(e) * c.N + n];
      // f32 sums: (K + 64) 2^-24 of the magnitudes; the activation's exp a few ulps more (2^-18 of them).
      // The norm: its sum of squares over K in f32 rounds the scale by up to ~K 2^-24 more.
      const double tol = (c.K + 64) * std::ldexp(1.0, -24) * mag + (gated ? std::ldexp(mag, -18) : 0) +
                         (c.norm ? 2 * c.K * std::ldexp(mag, -24) : 0) + 1e-6;
      worst = std::max(worst, std::fabs(got - acc) / tol);
    }
  }
  CHECK(bad_guard == 0);
  CHECK(worst <= 1.0);
}

constexpr WType kAllTypes[] = {WType::f32,  WType::f16,  WType::bf16, WType::q8_0, WType::q4_0, WType::q4_1,
                               WType::q5_0, WType::q5_1, WType::q4_k, WType::q5_k, WType::q6_k, WType::mxfp4};

uint32_t k_for(WType t) { return wtype_block_elems(t) == 256 ? 512 : 96; }

}  // namespace

TEST_CASE("kernel moe_matvec: every weight type, chosen slots only (unchosen experts, one taking every row, "
          "top-k 1 and E, several rows)") {
  Kernels& kern = *gpu().kernels;
  uint32_t seed = 1;
  for (WType t : kAllTypes) {
    const uint32_t K = k_for(t);
    check_mv(kern, {t, 6, 67, K, 1, 2, 6}, seed++, "one row");
    check_mv(kern, {t, 6, 67, K, 3, 2, 3, 1}, seed++, "3 rows, experts 3..5 unchosen, 1 in every row");
    check_mv(kern, {t, 5, 33, K, 2, 1, 5}, seed++, "top-1");
    check_mv(kern, {t, 4, 33, K, 2, 4, 4}, seed++, "top-k = E");
    check_mv(kern, {t, 8, 19, K, 8, 2, 8}, seed++, "8 rows");
  }
}

TEST_CASE("kernel moe_matvec: activated input (silu, gelu_tanh, clamped SwiGLU) and the experts' biases") {
  Kernels& kern = *gpu().kernels;
  uint32_t seed = 100;
  for (WType t : {WType::f32, WType::bf16, WType::q4_k, WType::mxfp4})
    for (MoeActivation act : {MoeActivation::silu, MoeActivation::gelu_tanh, MoeActivation::swiglu_clamped})
      for (bool bias : {false, true}) {
        CAPTURE(bias);
        MvCase c{t, 6, 40, k_for(t), 2, 3, 6};
        c.act = act, c.bias = bias;
        check_mv(kern, c, seed++, "activated");
      }
  // Gate / up biases without an activation too, and the MoE block's RMSNorm folded into gate / up's input.
  check_mv(kern, {WType::q8_0, 4, 21, 64, 3, 2, 4, -1, MoeActivation::none, true}, seed++, "bias only");
  for (WType t : {WType::f32, WType::f16, WType::q4_k, WType::q4_0, WType::mxfp4})
    for (uint32_t K : {k_for(t), wtype_block_elems(t) == 1 ? 83u : k_for(t)}) {   // 83: the f32 tail loop
      MvCase c{t, 5, 37, K, 3, 2, 5, -1, MoeActivation::none, true, true};
      check_mv(kern, c, seed++, "norm");
    }
}

TEST_CASE("kernel moe_matvec: mat-vec modes, texel and storage weights, stacks split across bindings") {
  const auto& caps = gpu().device->caps();
  uint32_t seed = 200;
  for (uint32_t mode : {spec::MATVEC_MODE_ROW_PER_LANE, spec::MATVEC_MODE_SUBGROUP})
    for (bool texel : {false, true})
      for (bool split : {false, true}) {
        if (mode == spec::MATVEC_MODE_SUBGROUP && !caps.has_subgroup_arithmetic()) continue;
        KernelConfig cfg = base_config();
        cfg.matvec_mode = mode, cfg.weights_texel = texel;
        cfg.matvec_wg = mode == spec::MATVEC_MODE_SUBGROUP ? 16 : cfg.matvec_wg;
        // A binding span of about two 256-padded experts of [67, 96] q4_0 (3.3 KiB each): groups of 1 or 2.
        if (split) cfg.max_binding = 8192;
        Kernels kern(*gpu().device, cfg);
        const std::string v = str("mode ", mode, texel ? " texel" : " ssbo", split ? " split" : "");
        for (WType t : {WType::f32, WType::f16, WType::q4_0, WType::q5_1, WType::q6_k, WType::mxfp4}) {
          MvCase normed{t, 4, 9, wtype_block_elems(t) == 256 ? 256u : 96u, 2, 2, 4, -1, MoeActivation::none, false, true};
          check_mv(kern, normed, seed++, v + " norm");
          if (split && wtype_block_elems(t) == 256) {
            check_mv(kern, {t, 5, 9, 256, 3, 2, 5}, seed++, v);   // 256-weight blocks: a smaller matrix
            continue;
          }
          if (split && !wtype_is_quant(t)) {
            check_mv(kern, {t, 5, 9, 96, 3, 2, 5}, seed++, v);
            continue;
          }
          check_mv(kern, {t, 7, 67, k_for(t), 3, 3, 7}, seed++, v);
        }
      }
}

TEST_CASE("kernel moe_matvec: a stack with an expert out of place is refused") {
  Stack st;
  make_stack(st, WType::q4_0, 3, 8, 32, 1);
  std::vector<Mat> bad = st.mats;
  bad[2].offset += 256;
  CHECK_THROWS_AS(expert_stack(bad), Error);
  CHECK(expert_stack(st.mats).count == 3);
}

TEST_CASE("kernel moe_combine: y += the row's slots by their weights; columns past y's ignored") {
  auto& g = gpu();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  for (uint32_t k : {1u, 2u, 8u}) {
    CAPTURE(k);
    const uint32_t T = 5, H = 37, ldx = 41, E = 8;
    const auto ids = choose(T, k, E, -1, rng);
    std::vector<float> w(size_t(T) * k), x(size_t(T) * k * ldx), y0(size_t(T) * H);
    for (float& v : w) v = std::fabs(nd(rng));
    for (float& v : x) v = nd(rng);
    for (float& v : y0) v = nd(rng);
    std::vector<float> ids_f(ids.size());
    std::memcpy(ids_f.data(), ids.data(), ids.size() * 4);
    Buffer bi = g.upload_f32(ids_f), bw = g.upload_f32(w), bx = g.upload_f32(x), by = g.upload_f32(y0);
    g.run([&](CommandList& cmd) {
      g.kernels->moe_combine(cmd, bi.range(), bw.range(), k, Act{&bx, 0, T * k, ldx}, Act{&by, 0, T, H});
    });
    const auto y = g.download_f32(by, size_t(T) * H);
    double worst = 0;
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t j = 0; j < H; ++j) {
        double acc = y0[size_t(t) * H + j], mag = std::fabs(acc);
        for (uint32_t s = 0; s < k; ++s) {
          acc += double(w[t * k + s]) * x[(size_t(t) * k + s) * ldx + j];
          mag += std::fabs(double(w[t * k + s]) * x[(size_t(t) * k + s) * ldx + j]);
        }
        worst = std::max(worst, std::fabs(y[size_t(t) * H + j] - acc) / (mag * 1e-6 + 1e-30));
      }
    CHECK(worst <= 1.0);
  }
}
