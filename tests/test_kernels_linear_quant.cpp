// Quantized weights (GGML block formats q8_0 ... q6_k) in the linear kernels
// (gemm, matvec, linear; kernels/linear_quant.cpp) and the embedding gather
// (embed), against tests/support/quant_reference, a CPU dequantizer written
// from the format specification, itself checked bit for bit against the PyPI
// gguf package's gguf.quants.dequantize (tests/python/quant_tool.py).
// Shapes around block and tile edges, every kernel variant (CPU register tiles
// and the GPU variants forced), row chunks of small bindings, Mat offsets.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"
#include "tests/support/data.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"
#include "tests/support/linear_check.hpp"
#include "tests/support/quant_reference.hpp"

using namespace reach;
using namespace reach::test;

namespace {

std::optional<std::string> run_command(const std::string& cmd, int* status) {
  std::string out;
  std::FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return std::nullopt;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::vector<uint8_t> from_hex(const std::string& h) {
  std::vector<uint8_t> out(h.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::stoul(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

// Weights of one quantized matrix: the file blocks, the device layout, the
// exact dequantized values and the rounding magnitudes |a·q| + |b|.
struct QWeights {
  std::vector<uint8_t> file, device;
  std::vector<float> deq, mag;
};
QWeights make_qweights(WType t, uint32_t rows, uint32_t cols, uint32_t seed) {
  QWeights w;
  const size_t nb = size_t(rows) * cols / wtype_block_elems(t);
  w.file = quant_random_blocks(t, nb, seed);
  w.device.resize(quant_device_bytes(t, rows, cols));
  quant_to_device_layout(t, rows, cols, w.file.data(), w.device.data());
  w.deq = quant_dequantize(t, w.file.data(), nb, &w.mag);
  return w;
}

enum class Op { gemm, matvec, linear };
const char* op_name(Op op) { return op == Op::gemm ? "linear_gemm" : op == Op::matvec ? "linear_matvec" : "linear"; }

// The kernels evaluate each sub-block of 32 weights as a·Σq·x + b·Σx and sum
// the sub-blocks in f32: every rounding is relative to Σ|x|·(|a·q| + |b|), and
// a result passes through at most ~K/32 + 40 roundings (dot chains of 4,
// half sums of 16, the sub-block terms, subgroup / shared-memory trees).
// (K + 64)·2^-24·max_mn Σ_k |x_k|·mag_k is a safe bound; a wrong weight is
// off by at least d·|x| ~ 2^-9·0.1, far above it.
const char* const kWhy = "f32: <= (K+64)*2^-24 * max over outputs of sum_k |x_k|*(|a*q|+|b|)_k (the rounding "
                         "magnitude of the factored dequantization)";

struct Case {
  Op op;
  uint32_t M, N, K;
  WType type;
  uint32_t x_off = 0, w_off = 0, y_off = 0;   // byte offsets in the buffers (w_off a multiple of 16)
};

void check_case(Kernels& k, const Case& c, const std::string& variant, uint32_t seed) {
  const uint32_t M = c.M, N = c.N, K = c.K;
  std::vector<float> x(size_t(M) * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed * 7 + 1);
  const QWeights w = make_qweights(c.type, N, K, seed * 7 + 2);
  std::vector<double> ref(size_t(M) * N);
  double bound = 0;
  for (uint32_t m = 0; m < M; ++m)
    for (uint32_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (uint32_t kk = 0; kk < K; ++kk) {
        const double xv = x[size_t(m) * K + kk];
        acc += xv * w.deq[size_t(n) * K + kk];
        mag += std::fabs(xv) * w.mag[size_t(n) * K + kk];
      }
      ref[size_t(m) * N + n] = acc;
      bound = std::max(bound, mag);
    }
  check_linear({
      .op = op_name(c.op),
      .params = str("M=", M, " N=", N, " K=", K, " ", wtype_name(c.type), " variant=", variant,
                    " offsets(x,w,y)=", c.x_off, ",", c.w_off, ",", c.y_off),
      .seed = seed,
      .tol = Tolerance::max_abs((K + 64) * std::ldexp(1.0, -24) * bound + 1e-30, kWhy),
      .M = M, .N = N, .K = K, .type = c.type, .x_off = c.x_off, .w_off = c.w_off, .y_off = c.y_off,
      .x = &x, .w = &w.device, .w_tail = 16,
      .reference = [&] { return ref; },
      .record =
          [&](CommandList& cmd, const Act& ax, const Mat& mw, const Act& ay) {
            if (c.op == Op::gemm) k.linear_gemm(cmd, ax, mw, ay);
            else if (c.op == Op::matvec) k.linear_matvec(cmd, ax, mw, ay);
            else k.linear(cmd, ax, mw, ay);
          },
  });
}

// K in blocks: one, a few, not a multiple of 4 (fewer for the 256-weight types).
std::vector<uint32_t> k_values(WType t) {
  if (wtype_block_elems(t) == 256) return {256, 768, 1280};
  return {32, 96, 160, 576};
}

constexpr bool kTexel[] = {false, true};
std::string wpath(bool texel) { return texel ? " W:texel" : " W:ssbo"; }

// Sampled (kernel_check.hpp): every (type, K) pair and every N at least once,
// plus a few more; a case's seed is its index in the full sweep (type, N, K).
void matvec_sweep(const KernelConfig& cfg, const std::string& variant, bool all_n = true) {
  Kernels k(*gpu().device, cfg);
  const uint32_t per_group = cfg.matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE ? cfg.matvec_wg * cfg.matvec_rows : cfg.matvec_rows;
  const auto ns = all_n ? sizes_around(per_group, {67}) : std::vector<uint32_t>{per_group + 1, 67};
  struct TK {
    WType t;
    uint32_t K, first;   // first: the seed offset of the type's first case
    size_t k_index;
  };
  std::vector<TK> tks;
  uint32_t first = 0;
  for (WType t : kQuantTypes) {
    const auto ks = k_values(t);
    for (size_t i = 0; i < ks.size(); ++i) tks.push_back({t, ks[i], first, i});
    first += uint32_t(ns.size() * ks.size());
  }
  for_sample("quant matvec " + variant, {tks.size(), ns.size()}, 6, [&](const SweepPick& p) {
    const TK& tk = tks[p[0]];
    const uint32_t N = ns[p[1]], K = tk.K;
    const uint32_t M = (N + K / 32) % 3 == 0 ? 2 : 1;
    const uint32_t seed = 100 + tk.first + uint32_t(p[1] * k_values(tk.t).size() + tk.k_index);
    check_case(k, {Op::matvec, M, N, K, tk.t}, variant, seed);
  });
}

// Sampled: every type, M and N at least once, plus a few more; K cycles with (M, N).
void gemm_sweep(const KernelConfig& cfg, const std::string& variant, uint32_t tile_m, uint32_t tile_n) {
  Kernels k(*gpu().device, cfg);
  const uint32_t ms[] = {1u, 2u, 7u, 33u, 65u, tile_m + 1};
  const uint32_t ns[] = {1u, tile_n - 1 ? tile_n - 1 : 2u, tile_n + 1, 67u};
  for_sample("quant gemm " + variant, {std::size(kQuantTypes), std::size(ms), std::size(ns)}, 6,
             [&](const SweepPick& p) {
               const WType t = kQuantTypes[p[0]];
               const auto ks = k_values(t);
               const uint32_t M = ms[p[1]], N = ns[p[2]], seed = 1 + uint32_t(p.flat);
               const uint32_t K = ks[(M + N + seed) % ks.size()];
               check_case(k, {Op::gemm, M, N, K, t}, variant, seed);
             });
}

}  // namespace

TEST_CASE("quant reference: equals gguf.quants.dequantize bit for bit") {
  for (WType t : kQuantTypes) {
    CAPTURE(wtype_name(t));
    const std::string cmd = "python3 " + (source_root() / "tests/python/quant_tool.py").string() + " dequant " +
                            wtype_name(t) + " 96 " + std::to_string(int(t) * 11);
    int status = 0;
    const auto out = run_command(cmd, &status);
    if (status == 3) {
      MESSAGE("SKIP: python3 cannot import gguf/numpy (tools/get_smollm2.sh installs them)");
      return;
    }
    REQUIRE(out);
    REQUIRE_MESSAGE(status == 0, cmd);
    const auto j = nlohmann::json::parse(*out);
    const auto blocks = from_hex(j["blocks"].get<std::string>());
    const auto vbytes = from_hex(j["values"].get<std::string>());
    REQUIRE(blocks.size() == 96 * wtype_block_bytes(t));
    REQUIRE(vbytes.size() == 96 * wtype_block_elems(t) * 4);
    const auto ours = quant_dequantize(t, blocks.data(), 96);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &ours[i], 4);
      std::memcpy(&b, &vbytes[i * 4], 4);
      if (a != b && !bad++) first = i;
    }
    CHECK_MESSAGE(bad == 0, wtype_name(t), ": ", bad, " weights differ from gguf.quants, first at ", first);
  }
}

TEST_CASE("quant layout: same bytes as the file, every byte placed once") {
  for (WType t : kQuantTypes) {
    CAPTURE(wtype_name(t));
    const QuantPlanes pl = quant_planes(t);
    CHECK(pl.quant_bytes % 16 == 0);
    CHECK(pl.meta_bytes % 2 == 0);
    CHECK(pl.quant_bytes + pl.meta_bytes == wtype_block_bytes(t));
    const uint32_t rows = 3, cols = 2 * wtype_block_elems(t);
    CHECK(quant_device_bytes(t, rows, cols) == uint64_t(rows) * wtype_row_bytes(t, cols));
    // Blocks whose bytes are their own file positions (mod 251): the device copy
    // must be a permutation of them, with d (the first meta unit) where the kernels read it.
    std::vector<uint8_t> file(quant_device_bytes(t, rows, cols)), dev(file.size());
    for (size_t i = 0; i < file.size(); ++i) file[i] = uint8_t(i % 251);
    quant_to_device_layout(t, rows, cols, file.data(), dev.data());
    auto a = file, b = dev;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    CHECK(a == b);
    const size_t meta0 = size_t(rows) * 2 * pl.quant_bytes;
    const size_t d_at = t == WType::q6_k ? 208 : 0;
    CHECK(dev[meta0] == file[d_at]);
    CHECK(dev[meta0 + 1] == file[d_at + 1]);
  }
}

TEST_CASE("quant matvec: default variants at edge sizes") {
  for (bool texel : kTexel) {
    KernelConfig cfg = base_config();
    cfg.weights_texel = texel;
    matvec_sweep(cfg, "default" + wpath(texel));
  }
}

TEST_CASE("quant matvec: GPU modes (subgroupAdd, shared-memory tree)") {
  const auto& caps = gpu().device->caps();
  for (uint32_t mode : {spec::MATVEC_MODE_SUBGROUP, spec::MATVEC_MODE_SHARED}) {
    if (mode == spec::MATVEC_MODE_SUBGROUP && !caps.has_subgroup_arithmetic()) continue;
    for (uint32_t wg : {8u, 64u})
      for (bool xshared : {false, true}) {
        KernelConfig cfg = base_config();
        cfg.weights_texel = false;
        cfg.matvec_mode = mode;
        cfg.matvec_wg = wg;
        cfg.matvec_rows = 4;
        cfg.matvec_xshared = xshared;
        matvec_sweep(cfg, str("mode", mode, " wg", wg, " rows4", xshared ? " X in shared memory" : ""), false);
      }
  }
}

TEST_CASE("quant gemm: register tiles (CPU) and shared-memory tiles (GPU)") {
  {
    KernelConfig cfg = base_config();
    cfg.gemm_shared = false;
    for (bool texel : kTexel) {
      cfg.weights_texel = texel;
      const uint32_t tm = cfg.qgemm_tm ? cfg.qgemm_tm : cfg.gemm_tm, tn = cfg.qgemm_tn ? cfg.qgemm_tn : cfg.gemm_tn;
      gemm_sweep(cfg, "registers default" + wpath(texel), tm, cfg.gemm_wg * tn);
    }
  }
  {
    KernelConfig cfg = base_config();
    cfg.gemm_shared = false;
    cfg.weights_texel = false;
    cfg.gemm_wg = 16;
    cfg.gemm_tm = 3;
    cfg.gemm_tn = 2;
    cfg.qgemm_tm = cfg.qgemm_tn = 0;   // 0: the float tile
    gemm_sweep(cfg, "registers wg16 tm3 tn2", 3, 32);
  }
  for (bool texel : kTexel) {
    // The quantized tile overrides the float one (odd sizes: partial tiles in both directions).
    KernelConfig cfg = base_config();
    cfg.gemm_shared = false;
    cfg.weights_texel = texel;
    cfg.gemm_wg = 8;
    cfg.gemm_tm = cfg.gemm_tn = 1;
    cfg.qgemm_tm = 5;
    cfg.qgemm_tn = 3;
    gemm_sweep(cfg, "registers qgemm tm5 tn3" + wpath(texel), 5, 24);
  }
  {
    KernelConfig cfg = base_config();
    cfg.gemm_shared = true;
    cfg.weights_texel = false;
    cfg.gemm_tile_m = cfg.gemm_tile_n = 32;
    cfg.gemm_tm = 4;
    cfg.gemm_tn = 2;
    gemm_sweep(cfg, "shared 32x32 tm4 tn2", 32, 32);
  }
}

TEST_CASE("quant linear: linear() picks matvec or gemm; offsets of X, W and Y") {
  Kernels& k = *gpu().kernels;
  Kernels by_path[2] = {kernels_with([] { KernelConfig c = base_config(); c.weights_texel = false; return c; }()),
                        kernels_with([] { KernelConfig c = base_config(); c.weights_texel = true; return c; }())};
  // Per type, 2 linear() cases then (W path, op, offset kind): 14 cases, seeds 500 + 14 * type + case.
  // Sampled: every type and every one of the 14 cases at least once, plus a few more.
  for_sample("quant linear offsets", {std::size(kQuantTypes), 14}, 6, [&](const SweepPick& p) {
    const WType t = kQuantTypes[p[0]];
    const uint32_t K = wtype_block_elems(t) * 2, seed = 500 + uint32_t(p.flat);
    const size_t c = p[1];
    if (c < 2) {
      check_case(k, {Op::linear, c == 0 ? 1u : 3u, 37, K, t}, "default", seed);
      return;
    }
    const bool texel = kTexel[(c - 2) / 6];
    const Op op = (c - 2) % 6 < 3 ? Op::gemm : Op::matvec;
    Kernels& kt = by_path[texel ? 1 : 0];
    switch ((c - 2) % 3) {
      case 0: check_case(kt, {op, 3, 37, K, t, 4, 16, 4}, "default" + wpath(texel), seed); break;
      case 1: check_case(kt, {op, 2, 19, K, t, 16, 48, 12}, "default" + wpath(texel), seed); break;
      default: check_case(kt, {op, 1, 70, K, t, 256, 256, 256}, "default" + wpath(texel), seed); break;
    }
  });
}

TEST_CASE("quant linear: weights, X and Y split over several bindings") {
  for (bool texel : kTexel)
    for (uint64_t max_binding : {4096ull, 20000ull}) {
      KernelConfig cfg = base_config();
      cfg.max_binding = max_binding;
      cfg.weights_texel = texel;
      Kernels k(*gpu().device, cfg);
      const std::string name = str("max_binding=", max_binding, wpath(texel));
      const Op ops[] = {Op::gemm, Op::matvec};
      // Sampled: every type, op and shape at least once per (W path, max_binding).
      for_sample("quant " + name, {std::size(kQuantTypes), std::size(ops), 2}, 4, [&](const SweepPick& p) {
        const WType t = kQuantTypes[p[0]];
        const Op op = ops[p[1]];
        const uint32_t seed = 1300 + uint32_t(p.flat);
        // One row must fit a binding: 256-weight types get K = 256 (<= 210 bytes per row).
        const uint32_t K = wtype_block_elems(t) == 256 ? 256 : 96;
        if (p[2] == 0) check_case(k, {op, 5, 300, K, t}, name, seed);
        else check_case(k, {op, 2, 129, K, t, 0, 16 * 3, 0}, name, seed);   // W not aligned to the binding alignment
      });
    }
}

TEST_CASE("quant linear: misuse is an error") {
  auto& g = gpu();
  Buffer b = g.zeros(1 << 16);
  Kernels& k = *g.kernels;
  CommandList cmd(*g.device);
  cmd.begin();
  // K not a multiple of the block; W offset not a multiple of 16.
  CHECK_THROWS_AS(k.linear_matvec(cmd, Act{&b, 0, 1, 48}, Mat{&b, 0, WType::q4_0, 4, 48}, Act{&b, 0, 1, 4}), Error);
  CHECK_THROWS_AS(k.linear_matvec(cmd, Act{&b, 0, 1, 64}, Mat{&b, 8, WType::q8_0, 4, 64}, Act{&b, 0, 1, 4}), Error);
  CHECK_THROWS_AS(k.linear_gemm(cmd, Act{&b, 0, 2, 256}, Mat{&b, 0, WType::q4_k, 4, 128}, Act{&b, 0, 2, 4}), Error);
  cmd.end();
}

TEST_CASE("quant embed: every type, out-of-range ids, row chunks, workgroup sizes") {
  auto& g = gpu();
  for (WType t : kQuantTypes)
    for (uint64_t max_binding : {0ull, 4096ull})
      for (uint32_t wg : {1u, 8u, 64u}) {
        Kernels k = kernels_with(wg, max_binding);
        const uint32_t rows = 37, cols = wtype_block_elems(t) * 3;
        const uint32_t seed = uint32_t(t) * 100 + wg;
        const QWeights w = make_qweights(t, rows, cols, seed);
        const std::vector<int32_t> ids = {0, 36, 5, -1, 37, 1 << 30, 20, 20, 36, 1};
        const uint32_t n = uint32_t(ids.size());
        const uint32_t y_front = 4;   // y at a 16-byte offset
        check_kernel({
            .op = "embed",
            .params = str(wtype_name(t), " table=[", rows, ",", cols, "] tokens=", n, " reduce_wg=", wg,
                          " max_binding=", max_binding),
            .seed = seed,
            .tol = Tolerance::exact("dequantization as the specification computes it: one rounding at most, "
                                    "the same one as the reference"),
            .device =
                [&] {
                  std::vector<uint8_t> tb(256 + w.device.size());
                  std::memcpy(tb.data() + 256, w.device.data(), w.device.size());
                  Buffer bt = g.upload_bytes(tb.data(), tb.size(), Arena::weights, "table");
                  Buffer bi = g.upload_bytes(ids.data(), n * 4);
                  Buffer by = g.upload_f32(std::vector<float>(y_front + size_t(n) * cols, 7.0f));
                  g.run([&](CommandList& cmd) {
                    k.embed(cmd, {&bt, 256, t, rows, cols}, bi.range(), n, {&by, y_front * 4, n, cols});
                  });
                  return Values::bits_of(g.download_f32(by, y_front + size_t(n) * cols));
                },
            .reference =
                [&] {
                  std::vector<float> y(y_front + size_t(n) * cols, 7.0f);
                  for (uint32_t i = 0; i < n; ++i)
                    for (uint32_t c = 0; c < cols; ++c) {
                      const bool valid = ids[i] >= 0 && uint32_t(ids[i]) < rows;
                      y[y_front + size_t(i) * cols + c] = valid ? w.deq[size_t(ids[i]) * cols + c] : 0.0f;
                    }
                  return Values::bits_of(y);
                },
            .guard_front = y_front,
        });
      }
}

namespace {

// Batched decode: an M-row quantized matvec must give, for every row, exactly
// the bits of a 1-row matvec of that row alone (each row keeps its own
// accumulation order); values are also checked against the reference (check_case).
void batched_bitwise(const KernelConfig& cfg, const std::string& variant, uint32_t seed0) {
  auto& g = gpu();
  Kernels k(*g.device, cfg);
  const uint32_t per_group = cfg.matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE ? cfg.matvec_wg * cfg.matvec_rows : cfg.matvec_rows;
  const uint32_t ms[] = {2, 3, 8, 11};
  // Sampled: every type and M at least once, plus a few more; seeds as in the full sweep.
  for_sample("quant batched " + variant, {std::size(kQuantTypes), std::size(ms)}, 4, [&](const SweepPick& p) {
    const WType t = kQuantTypes[p[0]];
    const uint32_t M = ms[p[1]], seed = seed0 + uint32_t(p.flat);
    const uint32_t K = wtype_block_elems(t) == 256 ? 512 : 96, N = per_group + 3;
    {
      std::vector<float> x(size_t(M) * K);
      for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed * 7 + 1);
      const QWeights w = make_qweights(t, N, K, seed * 7 + 2);
      Buffer bx = g.upload_f32(x);
      Buffer bw = g.upload_bytes(w.device.data(), w.device.size(), Arena::weights);
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
      INFO("quant matvec batched vs single rows, M=", M, " N=", N, " K=", K, " ", wtype_name(t), " variant=", variant);
      CHECK(bad == 0);
      check_case(k, {Op::matvec, M, N, K, t}, variant, seed);
    }
  });
}

}  // namespace

TEST_CASE("quant matvec: M X rows per call equal M one-row calls bit for bit") {
  const auto& caps = gpu().device->caps();
  uint32_t seed = 2000;
  for (bool texel : kTexel) {
    KernelConfig cfg = base_config();
    cfg.weights_texel = texel;
    batched_bitwise(cfg, "default" + wpath(texel), seed);
    seed += 100;
  }
  for (uint32_t mode : {spec::MATVEC_MODE_SUBGROUP, spec::MATVEC_MODE_SHARED}) {
    if (mode == spec::MATVEC_MODE_SUBGROUP && !caps.has_subgroup_arithmetic()) continue;
    KernelConfig cfg = base_config();
    cfg.weights_texel = false;
    cfg.matvec_mode = mode;
    cfg.matvec_wg = 32;
    cfg.matvec_rows = 4;
    for (bool xshared : {false, true}) {
      cfg.matvec_xshared = xshared;
      batched_bitwise(cfg, str("mode", mode, " wg32 rows4", xshared ? " X in shared memory" : ""), seed);
      seed += 100;
    }
  }
}

TEST_CASE("quant linear: M = 1..8 uses matvec, above it GEMM; both correct") {
  Kernels& k = *gpu().kernels;
  uint32_t seed = 3000;
  for (WType t : {WType::q8_0, WType::q4_1})
    for (uint32_t M = 1; M <= 10; ++M) check_case(k, {Op::linear, M, 67, 96, t}, "default", seed++);
}

TEST_CASE("quant mxfp4: matvec, gemm and linear against the OCP values, storage and texel weights, offsets") {
  // mxfp4's meta plane is one byte per block (its meta offsets count bytes): odd block counts and row chunks
  // that start mid 16-bit unit are the cases its binding must get right.
  uint32_t seed = 900;
  for (bool texel : kTexel) {
    KernelConfig cfg = base_config();
    cfg.weights_texel = texel;
    Kernels k(*gpu().device, cfg);
    for (Op op : {Op::matvec, Op::gemm, Op::linear})
      for (uint32_t K : {32u, 96u, 160u})
        for (uint32_t M : {1u, 3u}) {
          check_case(k, Case{op, M, 67, K, WType::mxfp4}, "mxfp4" + wpath(texel), seed++);
          check_case(k, Case{op, M, 5, K, WType::mxfp4, 4, 16, 8}, "mxfp4 offsets" + wpath(texel), seed++);
        }
  }
  // Row chunks: a binding span of a few rows, so chunks start at odd blocks of the meta plane.
  for (bool texel : kTexel) {
    KernelConfig cfg = base_config();
    cfg.weights_texel = texel;
    cfg.max_binding = 512;
    Kernels k(*gpu().device, cfg);
    check_case(k, Case{Op::matvec, 2, 61, 96, WType::mxfp4}, "mxfp4 chunks" + wpath(texel), seed++);
    check_case(k, Case{Op::gemm, 9, 61, 96, WType::mxfp4}, "mxfp4 chunks" + wpath(texel), seed++);
  }
}
