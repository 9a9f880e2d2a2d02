// norm_rms and norm_softmax (kernels/norm.cpp) on the Vulkan device vs plain C++
// double references, through tests/support/kernel_check: random inputs, edge
// sizes around every reduction workgroup size the kernels may be given (1, 8,
// 12, 32, 64, 256 and the device's default), more rows than one dispatch's
// grid, and rows past llvmpipe's loop-trip budget.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"

using namespace reach;
using namespace reach::test;

namespace {

std::vector<double> rmsnorm_ref(const std::vector<float>& x, const std::vector<float>& w, uint32_t rows,
                                uint32_t cols, float eps) {
  std::vector<double> y(x.size());
  for (uint32_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (uint32_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / cols + double(eps));
    for (uint32_t c = 0; c < cols; ++c) y[r * cols + c] = double(x[r * cols + c]) * inv * w[c];
  }
  return y;
}

// Fully masked rows (all -inf) give zeros.
std::vector<double> softmax_ref(const std::vector<float>& x, uint32_t rows, uint32_t cols, float scale) {
  std::vector<double> y(x.size());
  for (uint32_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (uint32_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]) * scale);
    for (uint32_t c = 0; c < cols; ++c) s += std::exp(double(x[r * cols + c]) * scale - m);
    for (uint32_t c = 0; c < cols; ++c)
      y[r * cols + c] = m == -INFINITY ? 0.0 : std::exp(double(x[r * cols + c]) * scale - m) / s;
  }
  return y;
}

std::function<std::string(size_t)> row_col(uint32_t cols) {
  return [cols](size_t i) { return str("(row ", i / cols, ", col ", i % cols, ")"); };
}

// Each lane sums cols/wg squares in f32 (<= 512 terms here; positive terms,
// relative error ~sqrt(n)·2^-24 typical, n·2^-24 = 3e-5 only in the adversarial
// worst case), inversesqrt is <= 2 ULP and the two products 1 ULP each.
const char* const kRmsWhy = "f32 sums of <= 512 squares per lane (~sqrt(n)*2^-24 typical), inversesqrt <= 2 ULP, "
                            "two products 1 ULP each; +1e-7 absolute for y near 0";

// Inputs in [-8, 8], scale 1 or 0.125 (exact products): exp is <= 3+2|x| ULP in
// Vulkan (|x| <= 16: <= 35 ULP = 2.1e-6), v - max rounds to <= 2^-20 absolute
// (1e-6 relative after exp), and the f32 sum runs over up to 49152/8 = 6144
// positive terms per lane (typical relative error ~sqrt(n)·2^-24 = 5e-6;
// measured errors are ~1e-6).
const char* const kSoftmaxWhy = "exp <= 35 ULP for |x| <= 16, v - max rounds to <= 2^-20, f32 sums of <= 6144 "
                                "positive terms per lane (~5e-6 typical; ~1e-6 measured)";

}  // namespace

TEST_CASE("kernel norm_rms: edge sizes, workgroup sizes, in place") {
  auto& g = gpu();
  const Tolerance tol = Tolerance::close(2e-5, 1e-7, kRmsWhy);
  double worst_rel = 0;
  for (uint32_t wg : reduce_workgroup_sizes()) {
    Kernels k = kernels_with(wg);
    for (uint32_t cols : sizes_around(wg, {13, 1000, 4096}))
      for (bool in_place : {false, true}) {
        const uint32_t rows = 3, seed = 100 + cols;
        const float eps = 1e-5f;
        auto x = random_floats(size_t(rows) * cols, seed, -2.0f, 2.0f);
        const auto w = random_floats(cols, seed + 100, -1.5f, 1.5f);
        x[0] = 0.0f;   // a zero element; (cols==1: an all-zero row -> 0 * rsqrt(eps))
        const auto s = check_kernel({
            .op = "norm_rms",
            .params = str("dtype=f32 shape=[", rows, ",", cols, "] eps=", eps, " reduce_wg=", wg,
                          " in_place=", in_place, " (w seed ", seed + 100, ", x[0]=0)"),
            .seed = seed,
            .tol = tol,
            .device =
                [&] {
                  Buffer bx = g.upload_f32(x), bw = g.upload_f32(w), by = g.zeros(x.size() * 4);
                  Act ax{&bx, 0, rows, cols}, ay = in_place ? ax : Act{&by, 0, rows, cols};
                  g.run([&](CommandList& cmd) { k.norm_rms(cmd, ax, bw.range(), ay, eps); });
                  return Values::of(g.download_f32(in_place ? bx : by, x.size()));
                },
            .reference = [&] { return Values::of(rmsnorm_ref(x, w, rows, cols, eps)); },
            .where = row_col(cols),
        });
        worst_rel = std::max(worst_rel, s.max_rel);
      }
  }
  MESSAGE("norm_rms: worst relative error over all cases " << worst_rel << " (tolerance " << tol.rel << ")");
}

TEST_CASE("kernel norm_rms: many rows (grid-stride over rows) and misuse") {
  auto& g = gpu();
  const uint32_t rows = 70000, cols = 3;   // more rows than the 65535 workgroups dispatched
  const auto x = random_floats(size_t(rows) * cols, 7);
  const std::vector<float> w{0.5f, -1.0f, 2.0f};
  Buffer bx = g.upload_f32(x), bw = g.upload_f32(w), by = g.zeros(x.size() * 4);
  check_kernel({
      .op = "norm_rms",
      .params = str("dtype=f32 shape=[", rows, ",", cols, "] eps=1e-6 w={0.5,-1,2} default config"),
      .seed = 7,
      .tol = Tolerance::close(2e-5, 1e-7, kRmsWhy),
      .device =
          [&] {
            g.run([&](CommandList& cmd) {
              g.kernels->norm_rms(cmd, {&bx, 0, rows, cols}, bw.range(), {&by, 0, rows, cols}, 1e-6f);
            });
            return Values::of(g.download_f32(by, x.size()));
          },
      .reference = [&] { return Values::of(rmsnorm_ref(x, w, rows, cols, 1e-6f)); },
      .where = row_col(cols),
  });

  // Shape errors are thrown at record time.
  CommandList bad(*g.device);
  bad.begin();
  CHECK_THROWS_AS(g.kernels->norm_rms(bad, {&bx, 0, rows, cols}, bw.range(), {&by, 0, rows, cols + 1}, 1e-6f), Error);
  CHECK_THROWS_AS(g.kernels->norm_rms(bad, {&bx, 0, 1, 4}, bw.range(), {&by, 0, 1, 4}, 1e-6f), Error);   // w too short
  CHECK_THROWS_AS(g.kernels->norm_rms(bad, {&bx, 0, rows + 1, cols}, bw.range(), {&by, 0, rows, cols}, 1e-6f), Error);
  bad.end();
}

TEST_CASE("kernel norm_softmax: edge sizes, workgroup sizes, masked entries, vocab-size rows") {
  auto& g = gpu();
  const Tolerance tol = Tolerance::close(5e-5, 1e-12, kSoftmaxWhy);
  const float ninf = -std::numeric_limits<float>::infinity();
  double worst_rel = 0;
  for (uint32_t wg : reduce_workgroup_sizes()) {
    Kernels k = kernels_with(wg);
    for (uint32_t cols : sizes_around(wg, {13, 1000, 49152})) {
      const uint32_t rows = cols > 10000 ? 2 : 4, seed = 300 + cols + wg;
      const float scale = (cols % 2) ? 1.0f : 0.125f;
      auto x = random_floats(size_t(rows) * cols, seed, -8.0f, 8.0f);
      // Row 1: some masked (-inf) entries; row 2 (when present): fully masked -> all zeros.
      for (uint32_t c = 0; c < cols; c += 3) x[cols + c] = ninf;
      if (cols > 1) x[cols + 1] = 0.5f;   // keep row 1 not fully masked
      if (rows == 4)
        for (uint32_t c = 0; c < cols; ++c) x[2 * cols + c] = ninf;
      const auto s = check_kernel({
          .op = "norm_softmax",
          .params = str("dtype=f32 shape=[", rows, ",", cols, "] scale=", scale, " reduce_wg=", wg,
                        " (row 1: every third entry -inf; row 2 of 4: all -inf)"),
          .seed = seed,
          .tol = tol,
          .device =
              [&] {
                Buffer bx = g.upload_f32(x);
                g.run([&](CommandList& cmd) { k.norm_softmax(cmd, {&bx, 0, rows, cols}, scale); });
                return Values::of(g.download_f32(bx, x.size()));
              },
          .reference = [&] { return Values::of(softmax_ref(x, rows, cols, scale)); },
          .where = row_col(cols),
      });
      worst_rel = std::max(worst_rel, s.max_rel);
    }
  }
  MESSAGE("norm_softmax: worst relative error over all cases " << worst_rel << " (tolerance " << tol.rel << ")");
}

// llvmpipe silently stops a loop after 65535 trips per invocation (all loops
// together); the host widens the workgroup for rows that would exceed that.
// These rows are past the budget at the given workgroup (e.g. softmax at wg=1:
// 3 passes x 100000/4 trips) and went wrong before the guard existed.
TEST_CASE("kernel norm_rms/norm_softmax: rows past llvmpipe's loop-trip budget") {
  auto& g = gpu();
  // Rows this long: the f32 sums run over up to cols/wg terms per lane (4 accumulators);
  // 1e-4 relative still separates a correct row from a truncated one (errors of 1e3 and more).
  const char* why = "f32 sums of up to cols/wg terms per lane; a truncated row errs by 1e3 and more";
  for (auto [wg, cols] : {std::pair<uint32_t, uint32_t>{1, 100000}, {1, 300000}, {8, 1000000}, {0, 1000000}}) {
    Kernels k = kernels_with(wg);
    const uint32_t seed = cols + wg;
    const auto x = random_floats(cols, seed, -8.0f, 8.0f);
    const std::vector<float> w(cols, 1.25f);
    Buffer bx = g.upload_f32(x), bw = g.upload_f32(w), by = g.zeros(size_t(cols) * 4);
    const std::string params = str("dtype=f32 shape=[1,", cols, "] reduce_wg=", wg, " (widened by the host)");
    // Run one after the other: rmsnorm reads x, which softmax then rewrites in place.
    check_kernel({
        .op = "norm_rms",
        .params = params + " eps=1e-5 w=1.25",
        .seed = seed,
        .tol = Tolerance::close(1e-4, 1e-7, why),
        .device =
            [&] {
              g.run([&](CommandList& cmd) { k.norm_rms(cmd, {&bx, 0, 1, cols}, bw.range(), {&by, 0, 1, cols}, 1e-5f); });
              return Values::of(g.download_f32(by, cols));
            },
        .reference = [&] { return Values::of(rmsnorm_ref(x, w, 1, cols, 1e-5f)); },
    });
    check_kernel({
        .op = "norm_softmax",
        .params = params + " scale=1",
        .seed = seed,
        .tol = Tolerance::close(1e-4, 1e-12, why),
        .device =
            [&] {
              g.run([&](CommandList& cmd) { k.norm_softmax(cmd, {&bx, 0, 1, cols}, 1.0f); });
              return Values::of(g.download_f32(bx, cols));
            },
        .reference = [&] { return Values::of(softmax_ref(x, 1, cols, 1.0f)); },
    });
  }
}

TEST_CASE("kernel norm_rms add_to_y: y += norm(x) equals norm_rms then elementwise_add bit for bit") {
  auto& g = gpu();
  for (uint32_t wg : reduce_workgroup_sizes()) {
    Kernels k = kernels_with(wg);
    for (uint32_t cols : sizes_around(wg, {13, 640, 2304})) {
      const uint32_t rows = 3, seed = 700 + cols;
      const auto x = random_floats(size_t(rows) * cols, seed, -2.0f, 2.0f);
      const auto w = random_floats(cols, seed + 1, -1.5f, 1.5f);
      const auto y0 = random_floats(size_t(rows) * cols, seed + 2, -3.0f, 3.0f);
      INFO("wg " << wg << " cols " << cols);
      Buffer bx = g.upload_f32(x), bw = g.upload_f32(w), fused = g.upload_f32(y0), plain = g.upload_f32(y0),
             t = g.zeros(x.size() * 4);
      const Act ax{&bx, 0, rows, cols}, af{&fused, 0, rows, cols}, ap{&plain, 0, rows, cols}, at{&t, 0, rows, cols};
      g.run([&](CommandList& cmd) {
        k.norm_rms(cmd, ax, bw.range(), af, 1e-6f, true);
        k.norm_rms(cmd, ax, bw.range(), at, 1e-6f);
        cmd.barrier();
        k.elementwise_add(cmd, ap.range(), at.range(), ap.range(), rows * cols, rows * cols);
      });
      const auto f = g.download_f32(fused, x.size()), p = g.download_f32(plain, x.size());
      // And against the float64 reference: y0 + norm(x), within the plain norm's tolerance.
      const auto ref = rmsnorm_ref(x, w, rows, cols, 1e-6f);
      size_t same = 0;
      double worst = 0;
      for (size_t i = 0; i < f.size(); ++i) {
        same += f[i] == p[i];
        worst = std::max(worst, std::fabs(double(f[i]) - (double(y0[i]) + ref[i])) / (1.0 + std::fabs(ref[i])));
      }
      CHECK(same == f.size());
      CHECK(worst <= 2e-5);
    }
  }
  Buffer b = g.zeros(64 * 4), w = g.zeros(64 * 4);
  CommandList cmd(*g.device);
  cmd.begin();
  CHECK_THROWS_AS(g.kernels->norm_rms(cmd, {&b, 0, 1, 64}, w.range(), {&b, 0, 1, 64}, 1e-6f, true), Error);
  cmd.end();
}
