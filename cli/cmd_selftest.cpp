// `reach selftest`: run each basic kernel once on small random data on the
// default device and compare with a CPU reference.  A quick "does this GPU /
// driver work with reach" check (well under 2 s on lavapipe).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/half.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "engine/command.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "engine/transfer.hpp"
#include "kernels/kernels.hpp"

namespace reach::cli {

namespace {

std::vector<float> randoms(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}


struct Ctx {
  Device& dev;
  Allocator& alloc;
  Transfer& tr;
  Kernels& k;
  Buffer up(const void* p, size_t bytes) {
    Buffer b = alloc.allocate(Arena::scratch, bytes, "selftest");
    tr.upload(b, 0, p, bytes);
    return b;
  }
  Buffer out(size_t bytes) { return alloc.allocate(Arena::scratch, bytes, "selftest out"); }
  template <class T>
  std::vector<T> down(const Buffer& b, size_t n) {
    std::vector<T> v(n);
    tr.download(b, 0, v.data(), n * sizeof(T));
    return v;
  }
  void run(const std::function<void(CommandList&)>& rec) {
    CommandList cmd(dev);
    cmd.begin();
    rec(cmd);
    cmd.end();
    cmd.run();
  }
};

// max |got - ref| / (1 + |ref|): relative for large values, absolute near 0.
double max_err(const std::vector<float>& got, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(double(got[i]) - ref[i]) / (1.0 + std::fabs(ref[i]));
    m = std::max(m, std::isnan(e) ? INFINITY : e);
  }
  return m;
}

}  // namespace

int cmd_selftest(const Args& args) {
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") {
      std::printf("usage: reach selftest\n"
                  "Runs each basic kernel once on small random data on the default device (REACH_DEVICE)\n"
                  "and compares it with a CPU reference.  Exit status 1 if any kernel fails.\n");
      return 0;
    }
    std::fprintf(stderr, "reach selftest: error: unknown option '%s' (see reach selftest --help)\n", a.c_str());
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  DeviceOptions opt;
  opt.settings = cli_settings();
  auto dev = Device::create(opt);
  Allocator alloc(*dev);
  Transfer tr(alloc);
  Kernels k(*dev);
  Ctx c{*dev, alloc, tr, k};
  std::printf("device: %s\n", dev->caps().summary().c_str());

  int ok = 0, failed = 0, skipped = 0;
  // Each check returns the max error; tol is the pass limit (see tests/test_kernels_<family>.cpp for derivations).
  auto report = [&](const char* name, double tol, const std::function<double()>& fn) {
    try {
      const double e = fn();
      const bool pass = e <= tol;
      (pass ? ok : failed)++;
      std::printf("%s  %-12s max_err=%.3g (tol %.3g)\n", pass ? "ok  " : "FAIL", name, e, tol);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::unsupported) {
        skipped++;
        std::printf("skip  %-12s %s\n", name, e.what());
      } else {
        failed++;
        std::printf("FAIL  %-12s %s\n", name, e.what());
      }
    }
    std::fflush(stdout);
  };

  const uint32_t rows = 3, cols = 1000, n = rows * cols;
  const auto x = randoms(n, 1, -2, 2), y0 = randoms(n, 2, -2, 2), w = randoms(cols, 3);

  report("elementwise_add", 1e-6, [&] {
    Buffer a = c.up(x.data(), n * 4), b = c.up(y0.data(), n * 4), y = c.out(n * 4);
    c.run([&](CommandList& cmd) { k.elementwise_add(cmd, a.range(), b.range(), y.range(), n, n); });
    auto got = c.down<float>(y, n);
    std::vector<double> ref(n);
    for (uint32_t i = 0; i < n; ++i) ref[i] = double(x[i]) + y0[i];
    return max_err(got, ref);
  });
  report("norm_rms", 2e-5, [&] {
    Buffer a = c.up(x.data(), n * 4), bw = c.up(w.data(), cols * 4), y = c.out(n * 4);
    c.run([&](CommandList& cmd) { k.norm_rms(cmd, {&a, 0, rows, cols}, bw.range(), {&y, 0, rows, cols}, 1e-5f); });
    auto got = c.down<float>(y, n);
    std::vector<double> ref(n);
    for (uint32_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (uint32_t i = 0; i < cols; ++i) ss += double(x[r * cols + i]) * x[r * cols + i];
      const double inv = 1.0 / std::sqrt(ss / cols + 1e-5);
      for (uint32_t i = 0; i < cols; ++i) ref[r * cols + i] = x[r * cols + i] * inv * w[i];
    }
    return max_err(got, ref);
  });
  report("norm_softmax", 1e-6, [&] {   // probabilities <= 1: an absolute error
    Buffer a = c.up(x.data(), n * 4);
    c.run([&](CommandList& cmd) { k.norm_softmax(cmd, {&a, 0, rows, cols}, 3.0f); });
    auto got = c.down<float>(a, n);
    std::vector<double> ref(n);
    for (uint32_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (uint32_t i = 0; i < cols; ++i) m = std::max(m, 3.0 * x[r * cols + i]);
      for (uint32_t i = 0; i < cols; ++i) s += std::exp(3.0 * x[r * cols + i] - m);
      for (uint32_t i = 0; i < cols; ++i) ref[r * cols + i] = std::exp(3.0 * x[r * cols + i] - m) / s;
    }
    return max_err(got, ref);
  });
  report("elementwise_silu_mul", 1e-5, [&] {
    Buffer a = c.up(x.data(), n * 4), b = c.up(y0.data(), n * 4), y = c.out(n * 4);
    c.run([&](CommandList& cmd) { k.elementwise_silu_mul(cmd, a.range(), b.range(), y.range(), n); });
    auto got = c.down<float>(y, n);
    std::vector<double> ref(n);
    for (uint32_t i = 0; i < n; ++i) ref[i] = double(x[i]) / (1.0 + std::exp(-double(x[i]))) * y0[i];
    return max_err(got, ref);
  });
  // embed: a [50, 64] table, ids including one out of range (-> zeros).  Exact.
  const uint32_t vocab = 50, dim = 64;
  const std::vector<int32_t> ids{0, 49, 7, 50, 7};
  const auto table = randoms(size_t(vocab) * dim, 4, -3, 3);
  auto embed_check = [&](WType type) {
    std::vector<uint16_t> bits(table.size());
    std::vector<double> rows_ref(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      if (type == WType::f16) bits[i] = f32_to_f16_bits(table[i]);
      if (type == WType::bf16) {
        uint32_t u;
        std::memcpy(&u, &table[i], 4);
        bits[i] = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      }
      rows_ref[i] = type == WType::f32 ? table[i] : type == WType::bf16 ? bf16_to_f32(bits[i]) : 0.0;
    }
    Buffer t = type == WType::f32 ? c.up(table.data(), table.size() * 4) : c.up(bits.data(), bits.size() * 2);
    Buffer bi = c.up(ids.data(), ids.size() * 4), y = c.out(ids.size() * dim * 4);
    const uint32_t nt = uint32_t(ids.size());
    c.run([&](CommandList& cmd) { k.embed(cmd, {&t, 0, type, vocab, dim}, bi.range(), nt, {&y, 0, nt, dim}); });
    auto got = c.down<float>(y, size_t(nt) * dim);
    if (type == WType::f16) {   // decode the f16 reference with the exact conversion the shader must match
      for (size_t i = 0; i < bits.size(); ++i) {
        const uint32_t e = (bits[i] >> 10) & 0x1f, m = bits[i] & 0x3ff;
        const double v = e ? std::ldexp(double(m | 0x400), int(e) - 25) : std::ldexp(double(m), -24);
        rows_ref[i] = (bits[i] & 0x8000) ? -v : v;
      }
    }
    std::vector<double> ref(size_t(nt) * dim, 0.0);
    for (uint32_t tkn = 0; tkn < nt; ++tkn)
      if (ids[tkn] >= 0 && uint32_t(ids[tkn]) < vocab)
        for (uint32_t i = 0; i < dim; ++i) ref[size_t(tkn) * dim + i] = rows_ref[size_t(ids[tkn]) * dim + i];
    return max_err(got, ref);
  };
  report("embed_f32", 0, [&] { return embed_check(WType::f32); });
  report("embed_f16", 0, [&] { return embed_check(WType::f16); });
  report("embed_bf16", 0, [&] { return embed_check(WType::bf16); });
  report("elementwise_bf16_to_f32", 0, [&] {   // every bf16 pattern except NaNs: exact
    std::vector<uint16_t> in;
    for (uint32_t b = 0; b < 65536; ++b)
      if (((b >> 7) & 0xff) != 0xff || !(b & 0x7f)) in.push_back(uint16_t(b));
    const uint32_t m = uint32_t(in.size());
    Buffer a = c.up(in.data(), m * 2), y = c.out(size_t(m) * 4);
    c.run([&](CommandList& cmd) { k.elementwise_bf16_to_f32(cmd, a.range(), y.range(), m); });
    auto got = c.down<float>(y, m);
    double bad = 0;
    for (uint32_t i = 0; i < m; ++i) {
      const float want = bf16_to_f32(in[i]);
      bad += std::memcmp(&got[i], &want, 4) != 0;
    }
    return bad;   // count of mismatching bit patterns
  });
  report("elementwise_f32_to_f16", 0, [&] {   // random values plus ties, subnormals and overflow: bit exact
    std::vector<float> in = randoms(4096, 5, -70000, 70000);
    const float extra[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-25f, 3 * 0x1p-25f, 0x1p-24f, 65504.0f, 65519.0f,
                           65520.0f, -65520.0f, 1e-9f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    in.insert(in.end(), std::begin(extra), std::end(extra));
    for (int i = 0; i < 512; ++i) in.push_back(in[i] * 0x1p-20f);   // f16 subnormal range
    const uint32_t m = uint32_t(in.size());
    Buffer a = c.up(in.data(), m * 4), y = c.out(size_t(m) * 2);
    c.run([&](CommandList& cmd) { k.elementwise_f32_to_f16(cmd, a.range(), y.range(), m); });
    auto got = c.down<uint16_t>(y, m);
    double bad = 0;
    for (uint32_t i = 0; i < m; ++i) bad += got[i] != f32_to_f16_bits(in[i]);
    return bad;   // count of mismatching bit patterns
  });

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("selftest: %d ok, %d failed", ok, failed);
  if (skipped) std::printf(", %d skipped (unsupported on this device)", skipped);
  std::printf(" (%.2f s)\n", secs);
  return failed ? 1 : 0;
}

}  // namespace reach::cli
