#include "cli/bench_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <map>
#include <random>
#include <string>

#include "cli/options.hpp"
#include "runtime/session/decode_batch.hpp"

namespace reach::cli {

namespace {

struct Row {
  uint32_t streams = 0;
  std::vector<double> step_s, request_s;   // per repetition: seconds per batched step, one request's seconds
  std::map<std::string, double> profile_ns;   // --profile: GPU ns per kernel over the timed steps
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

// Per stream count, the GPU time of one step per kernel, largest first (stderr, as the single-stream
// bench's --profile).
void print_profiles(const std::vector<Row>& rows, const ParallelBench& b) {
  for (const Row& r : rows) {
    const double steps = double(std::max<int64_t>(b.reps, 1)) * std::max<uint32_t>(b.n_gen, 1);
    double total = 0;
    for (const auto& [k, v] : r.profile_ns) total += v;
    std::vector<std::pair<std::string, double>> ks(r.profile_ns.begin(), r.profile_ns.end());
    std::sort(ks.begin(), ks.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    std::fprintf(stderr, "\nGPU time per kernel, %u stream%s (one step; wall %.2f ms):\n", r.streams,
                 r.streams == 1 ? "" : "s", mean(r.step_s) * 1e3);
    std::fprintf(stderr, "| kernel | ms/step | share |\n| --- | ---: | ---: |\n");
    for (const auto& [k, v] : ks)
      std::fprintf(stderr, "| %s | %.3f | %.1f%% |\n", k.c_str(), v / 1e6 / steps, 100.0 * v / std::max(total, 1.0));
  }
}

}  // namespace

void bench_parallel(Model& model, const SessionOptions& options, const ParallelBench& b,
                    const std::string& device_name) {
  const uint32_t most = *std::max_element(b.streams.begin(), b.streams.end());
  const int32_t V = int32_t(model.config().vocab_size);
  std::vector<std::unique_ptr<Session>> sessions;
  for (uint32_t i = 0; i < most; ++i) sessions.push_back(std::make_unique<Session>(model, options));
  DecodeBatch batch(model, most);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> dist(0, V - 1);

  std::vector<Row> rows;
  for (uint32_t p : b.streams) {
    Row row{p, {}, {}};
    std::vector<Session*> active;
    for (uint32_t i = 0; i < p; ++i) active.push_back(sessions[i].get());
    for (int64_t r = -1; r < b.reps; ++r) {   // r = -1: warm-up (records the programs)
      const auto t0 = std::chrono::steady_clock::now();
      for (Session* s : active) {
        std::vector<int32_t> prompt(std::max<uint32_t>(b.n_prompt, 1));
        for (auto& x : prompt) x = dist(rng);
        s->reset();
        s->prefill(prompt);
      }
      const auto t1 = std::chrono::steady_clock::now();
      std::vector<int32_t> ids(p);
      for (uint32_t g = 0; g < b.n_gen; ++g) {
        for (auto& x : ids) x = dist(rng);
        if (p == 1) active[0]->decode(ids[0]);   // the single-sequence program, as serve with one request
        else batch.step(active, ids);
        if (options.profile && r >= 0)
          for (const auto& k : p == 1 ? active[0]->last_timings() : batch.last_timings()) row.profile_ns[k.label] += k.ns;
      }
      const double decode_s = seconds_since(t1);
      if (r >= 0) {
        row.step_s.push_back(decode_s / std::max<uint32_t>(b.n_gen, 1));
        row.request_s.push_back(seconds_since(t0));
      }
    }
    rows.push_back(row);
  }

  // What the streams' KV caches took: one pool, or a cache per session.
  const std::string kv = options.kv_pool ? options.kv_pool->describe()
                                         : "KV caches " + std::to_string(most) + " x " +
                                               std::to_string(sessions[0]->kv_cache_bytes() >> 10) + " KiB";
  const double base_ts = 1.0 / mean(rows[0].step_s) * rows[0].streams;
  if (b.format == "csv") {
    std::printf("streams,n_prompt,n_gen,aggregate_ts,per_stream_ts,ms_per_token,stddev_ms_per_token,request_s,device\n");
    for (const auto& r : rows)
      std::printf("%u,%u,%u,%.3f,%.3f,%.3f,%.3f,%.3f,\"%s\"\n", r.streams, b.n_prompt, b.n_gen,
                  r.streams / mean(r.step_s), 1 / mean(r.step_s), mean(r.step_s) * 1e3, stddev(r.step_s) * 1e3,
                  mean(r.request_s), device_name.c_str());
    return;
  }
  std::printf("| model | device | streams | tg t/s (all streams) | vs 1 stream | t/s per stream | ms/token | "
              "request s (pp%u + tg%u) |\n", b.n_prompt, b.n_gen);
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& r : rows) {
    const double ts = r.streams / mean(r.step_s);
    std::printf("| %s | %s | %u | %.2f | %.2fx | %.2f | %.2f ± %.2f | %.2f |\n", model.dir().filename().c_str(),
                device_name.c_str(), r.streams, ts, ts / base_ts, 1 / mean(r.step_s), mean(r.step_s) * 1e3,
                stddev(r.step_s) * 1e3, mean(r.request_s));
  }
  std::printf("\n%s\n", kv.c_str());
  if (options.profile) print_profiles(rows, b);
}

}  // namespace reach::cli
