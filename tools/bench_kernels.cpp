// reach-bench-kernels: throughput of the linear kernels on one device.
//   GEMM   GFLOP/s = 2·M·N·K / time       (M = N = K = 512, 1024, 2048)
//   matvec GB/s    = weight bytes / time  (N x K = 2048², 4096²; M = 1)
//   quant  GB/s    = weight bytes / time of the matvec with f16 and quantized
//                    weights at SmolLM2-135M shapes (N x K = 576x1536, 1536x576,
//                    49152x576; M = 1), and GFLOP/s of the GEMM at M = 128 (prefill),
//                    --only quant (--only qgemm: the GEMM rows only)
//   batch  GB/s    = weight bytes / time of one matvec over M = 1, 2, 4, 8 X
//                    rows (batched decode) at SmolLM2-135M shapes, --only batch
//   fused  ms of one decode layer's projections at SmolLM2-135M shapes as the
//                    unfused chain (norm, mat-vecs, silu_mul, residual adds;
//                    barriers where the forward has them) and as
//                    linear_matvec_fused, --only fused
//   copy   GB/s    = (bytes read + bytes written) / time of one vkCmdCopyBuffer
//                    between two device-local buffers (256 MiB, or --size N MiB):
//                    the device's copy rate, against which decode reads weights,
//                    and the same bytes moved by a compute shader (copy_shader)
//                    (--only copy; not part of the default set)
// Each case is warmed up, then timed `--reps` times (wall clock around
// submit + wait of a command list recorded once); the median is reported as a
// markdown table.  Tunables can be overridden to compare kernel variants:
//   --gemm-wg N --gemm-tm N --gemm-tn N --gemm-shared 0|1 --gemm-tile N --gemm-bk N
//   --mv-wg N --mv-rows N --mv-mode 0|1|2 --mv-xrows N --mv-norm-subgroup 0|1 --qgemm-tm N --qgemm-tn N
//   --weights-texel 0|1 --x-texel 0|1
//   --reps N --only gemm|matvec|quant|qgemm|batch|fused|copy --quick --size N
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/command.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "engine/transfer.hpp"
#include "kernels/kernels.hpp"
#include "kernels/quant_layout.hpp"

using namespace reach;

namespace {

// Random blocks in the device layout, every 16-bit meta unit 0.5 (finite scales).
std::vector<uint8_t> random_quant(WType t, uint32_t rows, uint32_t cols, uint32_t seed) {
  std::vector<uint8_t> out(quant_device_bytes(t, rows, cols));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& b : out) b = uint8_t((s = s * 1664525u + 1013904223u) >> 24);
  const uint64_t quant = uint64_t(rows) * (wtype_row_bytes(t, cols) / wtype_block_bytes(t)) * quant_planes(t).quant_bytes;
  for (uint64_t i = quant; i + 1 < out.size(); i += 2) {
    out[i] = 0x00;
    out[i + 1] = 0x38;
  }
  return out;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed, WType t) {
  // Values in [-1, 1) encoded as the weight type (patterns only matter for NaN/Inf avoidance).
  std::vector<uint8_t> out(n * (t == WType::f32 ? 4 : 2));
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = float(int32_t(s >> 8) - (1 << 23)) / float(1 << 23);
    if (t == WType::f32) {
      std::memcpy(&out[i * 4], &v, 4);
    } else {
      uint32_t b;
      std::memcpy(&b, &v, 4);
      // bf16: truncate; f16: a small normal half (sign + exponent 14 + mantissa bits).
      const uint16_t h = t == WType::bf16 ? uint16_t(b >> 16) : uint16_t((b >> 16 & 0x8000u) | 0x3800u | (s >> 22));
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Row {
  std::string op, type, shape, metric;
  double ms, value, cpu_ms, cpu_value;
};

// CPU time of the whole process (every driver thread): on a CPU device this
// is the work the kernel costs, independent of other load on the machine.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Timing {
  double wall, cpu;   // medians, seconds per run
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::string only;
  bool quick = false;
  uint32_t size = 0;   // --size N: only this size (GEMM N³, matvec N²)
  std::vector<std::pair<std::string, long>> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--size" && i + 1 < argc) size = static_cast<uint32_t>(std::atol(argv[++i]));
    else if (a.rfind("--", 0) == 0 && i + 1 < argc) overrides.push_back({a.substr(2), std::atol(argv[++i])});
    else if (a == "-h" || a == "--help") {
      std::puts("usage: reach-bench-kernels [--reps N] [--only gemm|matvec|quant|qgemm|batch|fused|copy] [--quick] [--size N]\n"
                "  [--gemm-wg N --gemm-tm N --gemm-tn N --gemm-shared 0|1 --gemm-tile N --gemm-bk N]\n"
                "  [--mv-wg N --mv-rows N --mv-mode 0|1|2 --mv-xrows N --mv-max-acc N] [--qgemm-tm N --qgemm-tn N]\n"
                "  [--weights-texel 0|1 --x-texel 0|1]  (W / X read through texel buffers or storage buffers)\n"
                "  --only batch: matvec over M = 1, 2, 4, 8 X rows (batched decode) at SmolLM2-135M shapes;\n"
                "  --mv-xrows 1 reads W once per X row (the unbatched baseline)\n"
                "  --only copy: the device's copy rate, (read + written bytes) / time of a buffer copy of\n"
                "  256 MiB (--size N: N MiB)");
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  try {
    // A tool, like the CLI: the REACH_* variables (REACH_DEVICE, kernel shapes) apply.
    DeviceOptions opt;
    opt.settings = settings_from(std::getenv);
    auto device = Device::create(opt);
    Allocator alloc(*device);
    Transfer transfer(alloc);
    KernelConfig cfg = KernelConfig::from(device->caps(), device->settings().kernels);
    for (auto& [k, v] : overrides) {
      const uint32_t u = static_cast<uint32_t>(v);
      if (k == "gemm-wg") cfg.gemm_wg = u;
      else if (k == "gemm-tm") cfg.gemm_tm = u;
      else if (k == "gemm-tn") cfg.gemm_tn = u;
      else if (k == "gemm-shared") cfg.gemm_shared = u != 0;
      else if (k == "gemm-tile") cfg.gemm_tile_m = cfg.gemm_tile_n = u;
      else if (k == "gemm-bk") cfg.gemm_bk = u;
      else if (k == "gemm-bcast") cfg.gemm_bcast = u != 0;
      else if (k == "qgemm-tm") cfg.qgemm_tm = u;
      else if (k == "qgemm-tn") cfg.qgemm_tn = u;
      else if (k == "mv-wg") cfg.matvec_wg = u;
      else if (k == "mv-rows") cfg.matvec_rows = u;
      else if (k == "mv-mode") cfg.matvec_mode = u;
      else if (k == "mv-xrows") cfg.matvec_xrows = u;
      else if (k == "mv-max-acc") cfg.matvec_max_acc = u;
      else if (k == "mv-norm-subgroup") cfg.matvec_norm_subgroup = u != 0;
      else if (k == "weights-texel") cfg.weights_texel = u != 0;
      else if (k == "x-texel") cfg.activations_texel = u != 0;
      else {
        std::fprintf(stderr, "unknown option --%s\n", k.c_str());
        return 2;
      }
    }
    Kernels kernels(*device, cfg);
    std::printf("device: %s\n", device->caps().summary().c_str());
    std::printf("gemm: %s wg=%u tm=%u tn=%u tile=%ux%u bk=%u | matvec: mode=%u wg=%u rows=%u | reps=%d (median)\n\n",
                cfg.gemm_shared ? "shared" : "registers", cfg.gemm_wg, cfg.gemm_tm, cfg.gemm_tn, cfg.gemm_tile_m,
                cfg.gemm_tile_n, cfg.gemm_bk, cfg.matvec_mode, cfg.matvec_wg, cfg.matvec_rows, reps);

    // Median wall and CPU seconds of `reps` runs of a recorded list, after two warm-up runs (pipeline
    // creation, first touch).
    auto time_runs = [&](CommandList& cmd) -> Timing {
      cmd.run();
      cmd.run();
      std::vector<double> times, cpu;
      for (int r = 0; r < reps; ++r) {
        const double c0 = process_cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        cmd.run();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        cpu.push_back(process_cpu_seconds() - c0);
      }
      return Timing{median(times), median(cpu)};
    };

    auto time_op = [&](uint32_t M, uint32_t N, uint32_t K, WType t, bool gemm) -> Timing {
      Buffer bx = alloc.allocate(Arena::scratch, uint64_t(M) * K * 4, "x");
      Buffer bw = alloc.allocate(Arena::weights, Mat{nullptr, 0, t, N, K}.bytes(), "w");
      Buffer by = alloc.allocate(Arena::scratch, uint64_t(M) * N * 4, "y");
      auto xs = random_bytes(size_t(M) * K, 1, WType::f32);
      auto ws = wtype_is_quant(t) ? random_quant(t, N, K, 2) : random_bytes(size_t(N) * K, 2, t);
      transfer.upload(bx, 0, xs.data(), xs.size());
      transfer.upload(bw, 0, ws.data(), ws.size());
      CommandList cmd(*device);
      cmd.begin();
      const Act x{&bx, 0, M, K}, y{&by, 0, M, N};
      const Mat w{&bw, 0, t, N, K};
      if (gemm) kernels.linear_gemm(cmd, x, w, y);
      else kernels.linear_matvec(cmd, x, w, y);
      cmd.end();
      return time_runs(cmd);
    };

    std::vector<Row> rows;
    if (only.empty() || only == "gemm") {
      std::vector<uint32_t> sizes = {512, 1024, 2048};
      if (quick) sizes = {1024};
      if (size) sizes = {size};
      for (uint32_t s : sizes)
        for (WType t : {WType::f32, WType::f16}) {
          const Timing tm = time_op(s, s, s, t, true);
          const double flop = 2.0 * s * s * double(s);
          rows.push_back({"linear_gemm", wtype_name(t), std::to_string(s) + "³", "GFLOP/s", tm.wall * 1e3,
                          flop / tm.wall * 1e-9, tm.cpu * 1e3, flop / tm.cpu * 1e-9});
          std::fprintf(stderr, "gemm %s %u: %.2f ms (cpu %.2f ms)\n", wtype_name(t), s, tm.wall * 1e3, tm.cpu * 1e3);
        }
    }
    if (only.empty() || only == "matvec") {
      std::vector<uint32_t> sizes = {2048, 4096};
      if (quick) sizes = {4096};
      if (size) sizes = {size};
      for (uint32_t s : sizes)
        for (WType t : {WType::f32, WType::f16, WType::bf16}) {
          const Timing tm = time_op(1, s, s, t, false);
          const double bytes = double(s) * s * wtype_size(t);
          rows.push_back({"linear_matvec", wtype_name(t), "1x" + std::to_string(s) + "x" + std::to_string(s), "GB/s",
                          tm.wall * 1e3, bytes / tm.wall * 1e-9, tm.cpu * 1e3, bytes / tm.cpu * 1e-9});
          std::fprintf(stderr, "matvec %s %u: %.3f ms (cpu %.3f ms)\n", wtype_name(t), s, tm.wall * 1e3, tm.cpu * 1e3);
        }
    }
    if (only == "quant") {
      const uint32_t shapes[][2] = {{576, 1536}, {1536, 576}, {49152, 576}};   // N x K
      for (const auto& nk : shapes)
        for (WType t : {WType::f16, WType::q8_0, WType::q4_0, WType::q4_1, WType::q4_k}) {
          if (nk[1] % wtype_block_elems(t)) continue;   // q4_k needs K % 256 == 0
          const Timing tm = time_op(1, nk[0], nk[1], t, false);
          const double bytes = double(Mat{nullptr, 0, t, nk[0], nk[1]}.bytes());
          rows.push_back({"linear_matvec", wtype_name(t), "1x" + std::to_string(nk[0]) + "x" + std::to_string(nk[1]), "GB/s",
                          tm.wall * 1e3, bytes / tm.wall * 1e-9, tm.cpu * 1e3, bytes / tm.cpu * 1e-9});
          std::fprintf(stderr, "matvec %s %ux%u: %.3f ms (cpu %.3f ms)\n", wtype_name(t), nk[0], nk[1], tm.wall * 1e3,
                       tm.cpu * 1e3);
        }
    }
    if (only == "copy") {
      // The rate decode's weight reads are measured against: a plain buffer-to-buffer copy counts
      // each byte twice (read and written), as memory bandwidth does.
      const uint64_t bytes = uint64_t(size ? size : 256) << 20;
      Buffer src = alloc.allocate(Arena::weights, bytes, "copy source");
      Buffer dst = alloc.allocate(Arena::scratch, bytes, "copy destination");
      CommandList cmd(*device);
      cmd.begin();
      cmd.fill(src.range(), 0x3c003c00u);
      cmd.end();
      cmd.run();
      cmd.begin();
      cmd.copy(src.range(), dst.range());
      cmd.end();
      const double moved = 2.0 * double(bytes);
      auto add_row = [&](const char* op, const char* type, const Timing& tm) {
        rows.push_back({op, type, std::to_string(bytes >> 20) + " MiB", "GB/s", tm.wall * 1e3, moved / tm.wall * 1e-9,
                        tm.cpu * 1e3, moved / tm.cpu * 1e-9});
        std::fprintf(stderr, "%s %llu MiB: %.3f ms (%.1f GB/s read + written)\n", op,
                     (unsigned long long)(bytes >> 20), tm.wall * 1e3, moved / tm.wall * 1e-9);
      };
      add_row("copy", "bytes", time_runs(cmd));
      // The same bytes moved by a compute shader (y = 1 * x): a GPU's copy command may run on a copy
      // engine slower than its shaders' path to memory (an H200 copied at 740 GB/s while decode read
      // 2 TB/s), so the larger of the two is the rate decode is held against.
      if (bytes <= device->caps().max_storage_buffer_range) {
        CommandList sc(*device);
        sc.begin();
        kernels.elementwise_scale(sc, src.range(), dst.range(), static_cast<uint32_t>(bytes / 4), 1.0f);
        sc.end();
        add_row("copy_shader", "f32", time_runs(sc));
      }
    }
    if (only == "batch") {
      // Batched decode: one matvec over M rows of X; "x M=1" is the time
      // relative to one single-row matvec (M would be M x without batching).
      const uint32_t shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};   // N x K
      for (const auto& nk : shapes)
        for (WType t : {WType::f16, WType::q8_0, WType::q4_1}) {
          if (size && nk[0] != size) continue;   // --size N: only the shapes with N rows
          double t1 = 0;
          for (uint32_t M : {1u, 2u, 4u, 8u}) {
            const Timing tm = time_op(M, nk[0], nk[1], t, false);
            if (M == 1) t1 = tm.wall;
            const double bytes = double(Mat{nullptr, 0, t, nk[0], nk[1]}.bytes());
            rows.push_back({"linear_matvec", wtype_name(t), std::to_string(M) + "x" + std::to_string(nk[0]) + "x" +
                            std::to_string(nk[1]), "GB/s", tm.wall * 1e3, bytes / tm.wall * 1e-9, tm.cpu * 1e3,
                            bytes / tm.cpu * 1e-9});
            std::fprintf(stderr, "matvec %s M=%u %ux%u: %.3f ms (%.2fx M=1; cpu %.3f ms)\n", wtype_name(t), M, nk[0],
                         nk[1], tm.wall * 1e3, tm.wall / t1, tm.cpu * 1e3);
          }
        }
    }
    if (only == "fused") {
      // One decode layer of SmolLM2-135M (hidden 576, 3 KV heads of 64, MLP
      // 1536): attention input (norm, q, k, v), o + residual, MLP input
      // (norm, gate, up), down (silu_mul, down, residual).
      const uint32_t H = 576, KV = 192, F = 1536;
      for (WType t : {WType::f16, WType::q8_0, WType::q4_0}) {
        auto weight = [&](uint32_t n, uint32_t k, uint32_t seed) {
          Buffer b = alloc.allocate(Arena::weights, Mat{nullptr, 0, t, n, k}.bytes(), "w");
          auto ws = wtype_is_quant(t) ? random_quant(t, n, k, seed) : random_bytes(size_t(n) * k, seed, t);
          transfer.upload(b, 0, ws.data(), ws.size());
          return b;
        };
        auto act = [&](uint32_t n, uint32_t seed) {
          Buffer b = alloc.allocate(Arena::scratch, uint64_t(n) * 4, "a");
          auto v = random_bytes(n, seed, WType::f32);
          transfer.upload(b, 0, v.data(), v.size());
          return b;
        };
        Buffer wq = weight(H, H, 1), wk = weight(KV, H, 2), wv = weight(KV, H, 3), wo = weight(H, H, 4);
        Buffer wg = weight(F, H, 5), wu = weight(F, H, 6), wd = weight(H, F, 7);
        Buffer x = act(H, 8), xn = act(H, 9), nw = act(H, 10), q = act(H, 11), k = act(KV, 12), v = act(KV, 13);
        Buffer attn = act(H, 14), tmp = act(H, 15), gu = act(2 * F, 16), h = act(F, 17);
        const Mat mq{&wq, 0, t, H, H}, mk{&wk, 0, t, KV, H}, mv{&wv, 0, t, KV, H}, mo{&wo, 0, t, H, H};
        const Mat mg{&wg, 0, t, F, H}, mu{&wu, 0, t, F, H}, md{&wd, 0, t, H, F};
        const Act ax{&x, 0, 1, H}, axn{&xn, 0, 1, H}, aq{&q, 0, 1, H}, ak{&k, 0, 1, KV}, av{&v, 0, 1, KV};
        const Act aattn{&attn, 0, 1, H}, atmp{&tmp, 0, 1, H}, ag{&gu, 0, 1, F}, au{&gu, uint64_t(F) * 4, 1, F};
        const Act agu{&gu, 0, 1, 2 * F}, ah{&h, 0, 1, F};
        auto time_rec = [&](const std::function<void(CommandList&)>& rec) {
          CommandList cmd(*device);
          cmd.begin();
          for (int i = 0; i < 10; ++i) rec(cmd);   // 10 layers' worth per submission
          cmd.end();
          const Timing t = time_runs(cmd);
          return Timing{t.wall / 10, t.cpu / 10};
        };
        const float eps = 1e-5f;
        const BufferRange norm = nw.range(0, uint64_t(H) * 4);
        struct Part {
          const char* name;
          std::function<void(CommandList&)> unfused, fused;
        };
        const Part parts[] = {
            {"norm+q,k,v",
             [&](CommandList& c) {
               kernels.norm_rms(c, ax, norm, axn, eps);
               c.barrier();
               kernels.linear_matvec(c, axn, mq, aq);
               kernels.linear_matvec(c, axn, mk, ak);
               kernels.linear_matvec(c, axn, mv, av);
               c.barrier();
             },
             [&](CommandList& c) {
               const MatvecOutput o[] = {{mq, aq}, {mk, ak}, {mv, av}};
               kernels.linear_matvec_fused(c, ax, MatvecInput{norm, eps, GateActivation::none, true}, o);
               c.barrier();
             }},
            {"o+residual",
             [&](CommandList& c) {
               kernels.linear_matvec(c, aattn, mo, atmp);
               c.barrier();
               kernels.elementwise_add(c, x.range(0, uint64_t(H) * 4), tmp.range(0, uint64_t(H) * 4),
                                       x.range(0, uint64_t(H) * 4), H, H);
               c.barrier();
             },
             [&](CommandList& c) {
               const MatvecOutput o[] = {{mo, ax, {}, true}};
               kernels.linear_matvec_fused(c, aattn, MatvecInput{}, o);
               c.barrier();
             }},
            {"norm+gate,up",
             [&](CommandList& c) {
               kernels.norm_rms(c, ax, norm, axn, eps);
               c.barrier();
               kernels.linear_matvec(c, axn, mg, ag);
               kernels.linear_matvec(c, axn, mu, au);
               c.barrier();
             },
             [&](CommandList& c) {
               const MatvecOutput o[] = {{mg, ag}, {mu, au}};
               kernels.linear_matvec_fused(c, ax, MatvecInput{norm, eps, GateActivation::none, true}, o);
               c.barrier();
             }},
            {"silu_mul+down+residual",
             [&](CommandList& c) {
               kernels.elementwise_silu_mul(c, gu.range(0, uint64_t(F) * 4), gu.range(uint64_t(F) * 4, uint64_t(F) * 4),
                                            h.range(0, uint64_t(F) * 4), F);
               c.barrier();
               kernels.linear_matvec(c, ah, md, atmp);
               c.barrier();
               kernels.elementwise_add(c, x.range(0, uint64_t(H) * 4), tmp.range(0, uint64_t(H) * 4),
                                       x.range(0, uint64_t(H) * 4), H, H);
               c.barrier();
             },
             [&](CommandList& c) {
               const MatvecOutput o[] = {{md, ax, {}, true}};
               kernels.linear_matvec_fused(c, agu, MatvecInput{std::nullopt, 0, GateActivation::silu}, o);
               c.barrier();
             }},
        };
        double sum_u = 0, sum_f = 0, cpu_u = 0, cpu_f = 0;
        for (const Part& part : parts) {
          const Timing tu = time_rec(part.unfused), tf = time_rec(part.fused);
          sum_u += tu.wall;
          sum_f += tf.wall;
          cpu_u += tu.cpu;
          cpu_f += tf.cpu;
          rows.push_back({std::string("unfused ") + part.name, wtype_name(t), "1", "x", tu.wall * 1e3, 1.0,
                          tu.cpu * 1e3, 1.0});
          rows.push_back({std::string("fused ") + part.name, wtype_name(t), "1", "x", tf.wall * 1e3, tu.wall / tf.wall,
                          tf.cpu * 1e3, tu.cpu / tf.cpu});
          std::fprintf(stderr, "%s %s: unfused %.3f ms (cpu %.3f), fused %.3f ms (cpu %.3f)\n", wtype_name(t), part.name,
                       tu.wall * 1e3, tu.cpu * 1e3, tf.wall * 1e3, tf.cpu * 1e3);
        }
        rows.push_back({"layer total, fused", wtype_name(t), "1", "x", sum_f * 1e3, sum_u / sum_f, cpu_f * 1e3,
                        cpu_u / cpu_f});
      }
    }
    if (only == "quant" || only == "qgemm") {
      // Prefill: M = 128 rows of X at the SmolLM2-135M MLP shapes.
      const uint32_t M = 128, shapes[][2] = {{1536, 576}, {576, 1536}};   // N x K
      for (const auto& nk : shapes)
        for (WType t : {WType::f16, WType::q8_0, WType::q4_0, WType::q4_1, WType::q4_k}) {
          if (nk[1] % wtype_block_elems(t)) continue;
          const Timing tm = time_op(M, nk[0], nk[1], t, true);
          const double flop = 2.0 * M * nk[0] * double(nk[1]);
          rows.push_back({"linear_gemm", wtype_name(t), std::to_string(M) + "x" + std::to_string(nk[0]) + "x" +
                          std::to_string(nk[1]), "GFLOP/s", tm.wall * 1e3, flop / tm.wall * 1e-9, tm.cpu * 1e3,
                          flop / tm.cpu * 1e-9});
          std::fprintf(stderr, "gemm %s %ux%ux%u: %.3f ms (cpu %.3f ms)\n", wtype_name(t), M, nk[0], nk[1],
                       tm.wall * 1e3, tm.cpu * 1e3);
        }
    }
    // Wall clock is what a user sees; "per CPU-second" divides the work by the
    // process CPU time (all driver threads), which does not depend on other
    // load on a shared machine (on a CPU device, wall ≈ CPU time / cores used).
    std::printf("| op | weights | M·N·K | wall (ms) | throughput (wall) | CPU time (ms) | per CPU-second |\n"
                "|---|---|---|---:|---:|---:|---:|\n");
    for (const Row& r : rows)
      std::printf("| %s | %s | %s | %.3f | %.2f %s | %.3f | %.2f %s |\n", r.op.c_str(), r.type.c_str(),
                  r.shape.c_str(), r.ms, r.value, r.metric.c_str(), r.cpu_ms, r.cpu_value, r.metric.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reach-bench-kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
