// reach-bench-attention: prefill attention time of one layer at several
// context lengths for plain RoPE (default), ReRoPE, Leaky ReRoPE and YaRN
// (a rotated cache with another table: the default kernel), with the counts of
// pure / mixed tiles and the ratio of each scheme to default.  A benchmark, not
// a test: nothing is asserted.
//
//   reach-bench-attention [--ctx 4096,8192,16384] [--heads 8] [--kv-heads 2]
//                         [--dim 64] [--window 512] [--leaky-k 16] [--reps 1] [--texel 1|2] [--no-rotated-keys]
//                         [--schemes default,rerope,leaky_rerope,yarn]
//                         [--decode] [--decode-only] [--variant 1|2] [--lane-keys N] [--split-min N] [--fused]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/command.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "engine/transfer.hpp"
#include "kernels/attention.hpp"

using namespace reach;

namespace {

std::vector<uint32_t> parse_list(const std::string& s) {
  std::vector<uint32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(uint32_t(std::stoul(item)));
  return out;
}
std::vector<std::string> parse_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

std::vector<float> table(uint32_t positions, uint32_t pairs, uint32_t rot, double base, double div, double af) {
  std::vector<float> t(size_t(positions) * pairs * 2);
  for (uint32_t p = 0; p < positions; ++p)
    for (uint32_t j = 0; j < pairs; ++j) {
      const double a = p * std::pow(base, -2.0 * j / rot) / div;
      t[(size_t(p) * pairs + j) * 2] = float(std::cos(a) * af);
      t[(size_t(p) * pairs + j) * 2 + 1] = float(std::sin(a) * af);
    }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> ctxs = {4096, 8192, 16384};
  uint32_t H = 8, Hkv = 2, D = 64, W = 512, leaky_k = 16, reps = 1;
  std::vector<std::string> schemes = {"default", "rerope", "leaky_rerope", "yarn"};
  AttentionTuning tune{};
  bool decode = false, decode_only = false, rotated_keys = true, fused = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ctx") ctxs = parse_list(next());
    else if (a == "--heads") H = uint32_t(std::stoul(next()));
    else if (a == "--kv-heads") Hkv = uint32_t(std::stoul(next()));
    else if (a == "--dim") D = uint32_t(std::stoul(next()));
    else if (a == "--window") W = uint32_t(std::stoul(next()));
    else if (a == "--leaky-k") leaky_k = uint32_t(std::stoul(next()));
    else if (a == "--reps") reps = uint32_t(std::stoul(next()));
    else if (a == "--schemes") schemes = parse_names(next());
    else if (a == "--decode") decode = true;
    else if (a == "--decode-only") decode = decode_only = true;
    else if (a == "--fused") fused = true;
    else if (a == "--variant") tune.decode_variant = uint32_t(std::stoul(next()));
    else if (a == "--lane-keys") tune.decode_lane_keys = uint32_t(std::stoul(next()));
    else if (a == "--split-min") tune.split_min = uint32_t(std::stoul(next()));
    else if (a == "--texel") tune.texel = uint32_t(std::stoul(next()));
    else if (a == "--no-rotated-keys") rotated_keys = false;
    else {
      std::fprintf(stderr,
                   "usage: reach-bench-attention [--ctx 4096,8192,16384] [--heads 8] [--kv-heads 2] [--dim 64]\n"
                   "  [--window 512] [--leaky-k 16] [--reps 1] [--schemes default,rerope,leaky_rerope,yarn]\n"
                   "  [--decode] [--texel 1|2]  (K/V reads: 1 storage buffers, 2 texel buffers; default: by device)\n"
                   "  [--decode-only]  (time decode alone: a step at position ctx-1)\n"
                   "  [--variant 1|2]  (decode kernel: 1 shared-memory workgroups, 2 lanes; default: by device)\n"
                   "  [--lane-keys N] [--split-min N]  (decode tunings)\n"
                   "  [--fused]  (decode: the one-dispatch step that also stores the new row and merges)\n"
                   "  [--no-rotated-keys]  (dual-branch schemes rotate raw keys on every read)\n");
      return 2;
    }
  }
  try {
    DeviceOptions opt;   // a tool, like the CLI: the REACH_* variables apply
    opt.settings = settings_from(std::getenv);
    auto dev = Device::create(opt);
    Allocator alloc(*dev);
    Transfer xfer(alloc);
    Attention att(*dev, tune);
    std::printf("device: %s\n", dev->caps().summary().c_str());
    std::printf("prefill attention, one layer, H=%u Hkv=%u d=%u, window %u, leaky k %u, best of %u\n\n", H, Hkv, D, W,
                leaky_k, reps);
    // CPU ms: process CPU time (all driver threads) of the dispatch, which a busy
    // machine disturbs far less than wall time; ratios use it.
    std::printf("| ctx | scheme | Br x Bc | wall ms | CPU ms | tiles window / outside / mixed | ratio vs default (CPU) |%s\n",
                decode ? " decode wall ms (median) |" : "");
    std::printf("|---|---|---|---|---|---|---|%s\n", decode ? "---|" : "");
    for (uint32_t n : ctxs) {
      const uint32_t qd = H * D, kvd = Hkv * D;
      std::mt19937 rng(n);
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      std::vector<float> host(size_t(n) * qd);
      for (auto& x : host) x = u(rng);
      Buffer q = alloc.allocate(Arena::scratch, host.size() * 4, "q");
      xfer.upload(q, 0, host.data(), host.size() * 4);
      host.resize(size_t(n) * kvd);
      for (auto& x : host) x = u(rng);
      Buffer k = alloc.allocate(Arena::scratch, host.size() * 4, "k");
      xfer.upload(k, 0, host.data(), host.size() * 4);
      for (auto& x : host) x = u(rng);
      Buffer v = alloc.allocate(Arena::scratch, host.size() * 4, "v");
      xfer.upload(v, 0, host.data(), host.size() * 4);
      Buffer out = alloc.allocate(Arena::scratch, size_t(n) * qd * 4, "out");
      Buffer kc = alloc.allocate(Arena::cache, size_t(n) * kvd * 4, "k cache");
      Buffer vc = alloc.allocate(Arena::cache, size_t(n) * kvd * 4, "v cache");
      const uint32_t positions = n + W * (leaky_k - 1) + 1;
      std::vector<float> t = table(positions, D / 2, D, 10000, 1, 1);
      Buffer t1 = alloc.allocate(Arena::weights, t.size() * 4, "table1");
      xfer.upload(t1, 0, t.data(), t.size() * 4);
      t = table(positions, D / 2, D, 10000, leaky_k, 1);
      Buffer t2 = alloc.allocate(Arena::weights, t.size() * 4, "table2");
      xfer.upload(t2, 0, t.data(), t.size() * 4);
      t = table(positions, D / 2, D, 10000, 4, 1.1386);   // a YaRN-like table (other frequencies, af)
      Buffer ty = alloc.allocate(Arena::weights, t.size() * 4, "yarn table");
      xfer.upload(ty, 0, t.data(), t.size() * 4);
      t.clear();
      Buffer step = alloc.allocate(Arena::scratch, 16, "step");
      uint32_t st[4] = {0, n, 0, 0};
      xfer.upload(step, 0, st, 16);
      // The dual-branch schemes also get pre-rotated keys, as sessions give them
      // (--no-rotated-keys: raw keys rotated on every read).
      Buffer krc = rotated_keys ? alloc.allocate(Arena::cache, size_t(n) * kvd * 4, "rotated k cache") : Buffer{};
      double default_ms = 0;
      for (const std::string& name : schemes) {
        AttentionSpec s = AttentionSpec::plain(H, Hkv, D);
        RopeTable r1{&t1, positions, D / 2}, r2{&t2, positions, D / 2};
        if (name == "rerope") {
          s = s.with_rerope(W).with_logn(4096);
        } else if (name == "leaky_rerope") {
          s = s.with_leaky_rerope(W, int32_t(W * (leaky_k - 1))).with_logn(4096);
        } else if (name == "yarn") {
          r1 = RopeTable{&ty, positions, D / 2};
        } else if (name != "default") {
          std::fprintf(stderr, "unknown scheme %s\n", name.c_str());
          return 2;
        }
        LayerCache cache{&kc, &vc, n, wants_rotated_keys(s) && krc ? &krc : nullptr};
        // Fill the cache and create the pipelines (not timed), then time the prefill dispatch alone.
        {
          CommandList c(*dev);
          c.begin();
          att.kv_store(c, s, r1, step.range(0, 16), Act{&k, 0, n, kvd}, Act{&v, 0, n, kvd}, cache);
          c.end();
          const std::clock_t c0 = std::clock();
          c.run();
          CommandList w(*dev);   // pipeline creation, timed apart (llvmpipe compiles at creation)
          w.begin();
          att.prefill(w, s, r1, r2, step.range(0, 16), Act{&q, 0, 1, qd}, cache, Act{&out, 0, 1, qd}, 1);
          w.end();
          w.run();   // llvmpipe compiles a pipeline at its first dispatch
          std::fprintf(stderr, "[%s: kv_store + pipeline creation %.0f CPU ms]\n", name.c_str(),
                       1000.0 * double(std::clock() - c0) / CLOCKS_PER_SEC);
        }
        CommandList c(*dev);
        c.begin();
        att.prefill(c, s, r1, r2, step.range(0, 16), Act{&q, 0, n, qd}, cache, Act{&out, 0, n, qd}, n);
        c.end();
        double best = decode_only ? 0 : 1e300, best_cpu = decode_only ? 0 : 1e300;
        for (uint32_t r = 0; r < (decode_only ? 0 : reps); ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          const std::clock_t c0 = std::clock();
          c.run();
          best_cpu = std::min(best_cpu, 1000.0 * double(std::clock() - c0) / CLOCKS_PER_SEC);
          best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        if (name == "default") default_ms = best_cpu;
        uint32_t br = 0, bc = 0;
        att.prefill_tile_sizes(s, br, bc);
        const TileCounts tc = att.prefill_tiles(s, 0, n);
        char ratio[32] = "-";
        if (default_ms > 0) std::snprintf(ratio, sizeof ratio, "%.3f", best_cpu / default_ms);
        std::string dec;
        if (decode) {
          const uint64_t sbytes = att.decode_scratch_bytes(s, n);
          Buffer scratch = alloc.allocate(Arena::scratch, sbytes, "scratch");
          const std::vector<uint8_t> zeros(size_t(sbytes), 0);   // the fused step's counters start at 0
          xfer.upload(scratch, 0, zeros.data(), zeros.size());
          uint32_t sd[4] = {n - 1, 1, 0, 0};
          xfer.upload(step, 0, sd, 16);
          CommandList cd(*dev);
          cd.begin();
          if (fused)
            att.decode_fused(cd, s, r1, r2, step.range(0, 16), Act{&q, 0, 1, qd},
                             Act{&k, uint64_t(n - 1) * kvd * 4, 1, kvd}, Act{&v, uint64_t(n - 1) * kvd * 4, 1, kvd},
                             cache, Act{&out, 0, 1, qd}, scratch.range());
          else
            att.decode(cd, s, r1, r2, step.range(0, 16), Act{&q, 0, 1, qd}, cache, Act{&out, 0, 1, qd}, scratch.range());
          cd.end();
          cd.run();
          // Median of the repetitions: the machine is shared, and one slow run says little.
          std::vector<double> ts;
          for (uint32_t r = 0; r < std::max<uint32_t>(reps, 5); ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            cd.run();
            ts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
          }
          std::sort(ts.begin(), ts.end());
          const double bd = ts[ts.size() / 2];
          xfer.upload(step, 0, st, 16);
          char b[32];
          std::snprintf(b, sizeof b, " %.2f |", bd);
          dec = b;
        }
        std::printf("| %u | %s | %u x %u | %.1f | %.1f | %llu / %llu / %llu | %s |%s\n", n, name.c_str(), br, bc, best, best_cpu,
                    (unsigned long long)tc.window, (unsigned long long)tc.outside, (unsigned long long)tc.mixed, ratio,
                    dec.c_str());
        std::fflush(stdout);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "reach-bench-attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
