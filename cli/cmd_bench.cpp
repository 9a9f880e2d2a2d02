// `reach bench`: llama-bench-style prompt-processing (ppN) and generation
// (tgN) speed, mean ± stddev over repetitions after a warm-up.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <string>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "cli/bench_parallel.hpp"
#include "cli/options.hpp"
#include "runtime/config/flag_values.hpp"
#include "runtime/session/session.hpp"
#include "runtime/serve/slot_pool.hpp"

namespace reach::cli {

namespace {

struct BenchTest {
  std::string name;   // "pp512", "tg128", "tg128 @ d4096"
  uint32_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::vector<double> ns;   // per repetition
  std::map<std::string, double> profile_ns;
  Session::RecordCounts counts;   // per forward step (one decode token, or one prefill chunk)
  double avg_ns() const {
    double s = 0;
    for (double x : ns) s += x;
    return ns.empty() ? 0 : s / ns.size();
  }
  double stddev_ns() const {
    if (ns.size() < 2) return 0;
    const double m = avg_ns();
    double s = 0;
    for (double x : ns) s += (x - m) * (x - m);
    return std::sqrt(s / (ns.size() - 1));
  }
  uint32_t tokens() const { return n_prompt + n_gen; }
  std::vector<double> samples_ts() const {
    std::vector<double> t;
    for (double x : ns) t.push_back(tokens() * 1e9 / x);
    return t;
  }
  double avg_ts() const {
    auto t = samples_ts();
    double s = 0;
    for (double x : t) s += x;
    return t.empty() ? 0 : s / t.size();
  }
  double stddev_ts() const {
    auto t = samples_ts();
    if (t.size() < 2) return 0;
    const double m = avg_ts();
    double s = 0;
    for (double x : t) s += (x - m) * (x - m);
    return std::sqrt(s / (t.size() - 1));
  }
};

void bench_usage() {
  std::printf(
      "usage: reach bench -m DIR [options]\n"
      "  -m, --model DIR     model folder (config.json, *.safetensors; no tokenizer needed), a .gguf file, or\n"
      "                      a folder holding one .gguf\n"
      "  -p N                prompt tokens for the pp test (default 512; 0 = skip)\n"
      "  -n N                generated tokens for the tg test (default 128; 0 = skip)\n"
      "  -r N                repetitions (default 5)\n"
      "  -d N[,N...]         depth(s): tokens already in the cache before each test (default 0);\n"
      "                      a list gives one row per depth and test\n"
      "  --chunk N           prefill chunk length (default %u, as run, eval and serve; --chunk 512 reads\n"
      "                      pp512 in one chunk, as llama-bench's default micro-batch does)\n"
      "  -o md|json|csv      output format (default md)\n"
      "  --unfused           decode with one kernel per operation (the reference the fused decode layer is\n"
      "                      tested against), to compare the two in one sitting\n"
      "  --profile           GPU time per kernel (timestamp queries), largest share first, and the\n"
      "                      dispatches and barriers recorded per token (tg) or chunk (pp), and per layer\n"
      "  --parallel N[,N...] decode N sequences together (as reach serve --parallel does): aggregate\n"
      "                      and per-stream tokens/s, ms per token and one request's time for each N;\n"
      "                      each stream prefills -p tokens (default then 16), then generates -n\n"
      "  --kv-size N|SIZE    with --parallel: the streams share one paged KV pool of N tokens or SIZE\n"
      "                      bytes (512MiB, 2GiB), as reach serve --kv-size; without it, a pool of every\n"
      "                      stream's context, as reach serve's default (where the model allows one)\n"
      "  --no-kv-pool        with --parallel: a KV cache per stream instead of the shared pool\n"
      "  --device N|NAME     Vulkan device (see `reach info`)\n"
      "%s%s",
      kDefaultPrefillChunk, (quantize_flag_help(22) + full_kv_flag_help(22) + kv_cache_flag_help(22) + activations_flag_help(22)).c_str(), scheme_flags_help().c_str());
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string human_size(uint64_t bytes) {
  char b[32];
  if (bytes >= (1ull << 30)) std::snprintf(b, sizeof b, "%.2f GiB", bytes / double(1ull << 30));
  else std::snprintf(b, sizeof b, "%.2f MiB", bytes / double(1ull << 20));
  return b;
}

std::string human_params(uint64_t n) {
  char b[32];
  if (n >= 1000000000ull) std::snprintf(b, sizeof b, "%.2f B", n / 1e9);
  else std::snprintf(b, sizeof b, "%.2f M", n / 1e6);
  return b;
}

// "-d 0,2048,8192", "--parallel 1,2,4,8": comma-separated integers in [lo, hi]; repeats are kept once.
std::vector<uint32_t> list_of(const Args& args, size_t& i, int64_t lo, int64_t hi, const char* what) {
  const std::string flag = args[i];
  const std::string v = value_of(args, i);
  std::vector<uint32_t> out;
  size_t start = 0;
  while (true) {
    const size_t comma = v.find(',', start);
    const std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const uint32_t d = uint32_t(flag_integer(flag, item, lo, hi, what));
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

int cmd_bench(const Args& args) {
  std::string model_dir, device, format = "md";
  int64_t n_prompt = 512, n_gen = 128, reps = 5, chunk = kDefaultPrefillChunk;
  uint32_t kv_tokens = 0;   // --kv-size: the pool in tokens, or in bytes
  uint64_t kv_bytes = 0;
  std::vector<uint32_t> depths = {0}, parallel;
  bool profile = false, prompt_given = false, full_kv = false, unfused = false, no_pool = false;
  QuantActivations activations = QuantActivations::device;
  KvType cache_k = kFrontEndKvType, cache_v = kFrontEndKvType;
  std::optional<WType> quantize;
  SchemeOverrides ov;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { bench_usage(); return 0; }
    else if (a == "-m" || a == "--model") model_dir = value_of(args, i);
    else if (a == "-p") { n_prompt = int_of(args, i, 0, 1 << 20); prompt_given = true; }
    else if (a == "--parallel") parallel = list_of(args, i, 1, 64, "a stream count or a comma-separated list "
                                                                  "of stream counts in [1, 64], e.g. 1,2,4,8");
    else if (a == "-n") n_gen = int_of(args, i, 0, 1 << 20);
    else if (a == "-r") reps = int_of(args, i, 1, 1000);
    else if (a == "-d") depths = list_of(args, i, 0, 1 << 24, "a depth or a comma-separated list of depths "
                                                               "(integers in [0, 16777216]), e.g. 0,2048,8192");
    else if (a == "--chunk") chunk = int_of(args, i, 1, 1 << 16);
    else if (a == "-o") {
      format = value_of(args, i);
      if (format != "md" && format != "json" && format != "csv")
        throw Error(ErrorCode::invalid_argument, "-o expects md, json or csv, got '" + format + "'");
    } else if (a == "--profile") profile = true;
    else if (a == "--device") device = value_of(args, i);
    else if (a == "--quantize") quantize = quantize_of(args, i);
    else if (a == "--full-kv") full_kv = true;
    else if (a == "--kv-size") parse_kv_size(args, i, kv_tokens, kv_bytes);
    else if (a == "--no-kv-pool") no_pool = true;
    else if (parse_kv_cache_flag(args, i, cache_k, cache_v)) continue;
    else if (parse_activations_flag(args, i, activations)) continue;
    else if (a == "--unfused") unfused = true;
    else if (parse_scheme_flag(args, i, ov)) continue;
    else throw Error(ErrorCode::invalid_argument, "unknown option '" + a + "' (see reach bench --help)");
  }
  Engine e = open_engine(model_dir, device, false, quantize);
  Model& model = *e.model;
  const uint32_t V = uint32_t(model.config().vocab_size);
  if ((kv_tokens || kv_bytes) && parallel.empty())
    throw Error(ErrorCode::invalid_argument, "--kv-size sizes the KV pool the streams of --parallel share: give --parallel too");
  if (no_pool && parallel.empty())
    throw Error(ErrorCode::invalid_argument, "--no-kv-pool gives each stream of --parallel its own cache: give --parallel too");
  if (no_pool && (kv_tokens || kv_bytes))
    throw Error(ErrorCode::invalid_argument, "--no-kv-pool and --kv-size contradict each other: give one of them");
  if (!parallel.empty()) {
    if (format == "json") throw Error(ErrorCode::invalid_argument, "--parallel prints md or csv: use -o md or -o csv");
    ParallelBench pb{parallel, uint32_t(prompt_given ? n_prompt : 16), uint32_t(std::max<int64_t>(n_gen, 1)), reps,
                     format};
    SessionOptions so;
    so.context = pb.n_prompt + pb.n_gen + 1;
    so.chunk = uint32_t(chunk);
    so.overrides = ov;
    so.l_test = so.context;
    so.full_kv = full_kv;
    so.cache_type_k = cache_k;
    so.cache_type_v = cache_v;
    so.fused_decode = !unfused;
    so.activations = activations;
    so.profile = profile;
    if (kv_tokens || kv_bytes) {   // as reach serve --kv-size: one paged pool for every stream
      KvPoolOptions po = Session::pool_options(model, so);
      po.tokens = kv_tokens;
      po.bytes = kv_bytes;
      so.kv_pool = std::make_shared<KvPool>(model, po);
    } else if (!no_pool) {   // as reach serve's default: the streams' contexts, shared
      const uint32_t most = *std::max_element(parallel.begin(), parallel.end());
      std::string why;
      so.kv_pool = serve::make_slot_pool(model, so, most, why);
      if (!so.kv_pool) std::fprintf(stderr, "reach bench: a KV cache per stream: %s\n", why.c_str());
    }
    bench_parallel(model, so, pb, e.device->caps().device_name);
    return 0;
  }

  // One row per (depth, test), depths in the order given.
  std::vector<BenchTest> tests;
  for (uint32_t depth : depths) {
    auto label = [&](const std::string& base) { return depth ? base + " @ d" + std::to_string(depth) : base; };
    if (n_prompt) tests.push_back({label("pp" + std::to_string(n_prompt)), uint32_t(n_prompt), 0, depth});
    if (n_gen) tests.push_back({label("tg" + std::to_string(n_gen)), 0, uint32_t(n_gen), depth});
  }
  const uint32_t max_depth = *std::max_element(depths.begin(), depths.end());

  SessionOptions so;
  so.context = uint32_t(max_depth + std::max(n_prompt, n_gen) + 1);
  so.chunk = uint32_t(chunk);
  so.overrides = ov;
  so.profile = profile;
  so.l_test = so.context;
  so.full_kv = full_kv;
  so.cache_type_k = cache_k;
  so.cache_type_v = cache_v;
  so.fused_decode = !unfused;
  so.activations = activations;
  Session session(model, so);

  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> dist(0, int32_t(V) - 1);
  auto random_ids = [&](size_t n) {
    std::vector<int32_t> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
  };

  const std::time_t started = std::time(nullptr);
  // The depth tokens are prefilled once per depth (untimed); each repetition
  // rewinds to them, which leaves the cache as a fresh prefill would.
  uint32_t filled = 0;
  bool have_fill = false;
  for (auto& t : tests) {
    for (int64_t r = -1; r < reps; ++r) {   // r = -1: warm-up (records the programs)
      // A ring cache (sliding-window layers) cannot rewind past what it overwrote.
      if (!have_fill || filled != t.n_depth || (t.n_depth && t.n_depth < session.rewind_floor())) {
        session.reset();
        if (t.n_depth) session.prefill(random_ids(t.n_depth));
        filled = t.n_depth;
        have_fill = true;
      }
      session.rewind(t.n_depth);
      const auto prompt = random_ids(std::max<uint32_t>(t.n_prompt, 1));
      std::map<std::string, double> prof;
      auto add_profile = [&]() {
        if (!profile) return;
        for (const auto& k : session.last_timings()) prof[k.label] += k.ns;
        t.counts = session.last_counts();
      };
      auto t0 = std::chrono::steady_clock::now();
      if (t.n_prompt) {
        session.prefill(prompt);
        add_profile();
      } else {
        int32_t tok = prompt[0];
        for (uint32_t g = 0; g < t.n_gen; ++g) {
          session.decode(tok);
          add_profile();
          tok = dist(rng);
        }
      }
      const double ns = seconds_since(t0) * 1e9;
      if (r >= 0) {
        t.ns.push_back(ns);
        for (const auto& [k, v] : prof) t.profile_ns[k] += v;
      }
    }
  }

  const auto& caps = e.device->caps();
  const std::string model_name = platform::path_to_utf8(model.dir().filename());
  const std::string dtype = model.weight_types();   // "q4_1+q8_0": every matrix type, most bytes first
  const std::string scheme = session.schemes().describe().substr(0, session.schemes().describe().find('\n'));
  if (format == "md") {
    std::printf("| model | size | params | device | dtype | scheme | test | t/s |\n");
    std::printf("| --- | ---: | ---: | --- | --- | --- | ---: | ---: |\n");
    for (const auto& t : tests)
      std::printf("| %s | %s | %s | %s | %s | %s | %s | %.2f ± %.2f |\n", model_name.c_str(),
                  human_size(model.weight_bytes()).c_str(), human_params(model.n_params()).c_str(),
                  caps.device_name.c_str(), dtype.c_str(), scheme.c_str(), t.name.c_str(), t.avg_ts(), t.stddev_ts());
  } else if (format == "csv") {
    std::printf("model_filename,model_n_params,model_size,n_prompt,n_gen,n_depth,avg_ns,stddev_ns,avg_ts,stddev_ts,"
                "test_time,device,driver,dtype,scheme\n");
    for (const auto& t : tests)
      std::printf("%s,%llu,%llu,%u,%u,%u,%.0f,%.0f,%.4f,%.4f,%lld,\"%s\",\"%s\",%s,\"%s\"\n", platform::path_to_utf8(model.dir()).c_str(),
                  (unsigned long long)model.n_params(), (unsigned long long)model.weight_bytes(), t.n_prompt, t.n_gen,
                  t.n_depth, t.avg_ns(), t.stddev_ns(), t.avg_ts(), t.stddev_ts(), (long long)started,
                  caps.device_name.c_str(), caps.driver_info.c_str(), dtype.c_str(), scheme.c_str());
  } else {
    std::printf("[\n");
    for (size_t k = 0; k < tests.size(); ++k) {
      const auto& t = tests[k];
      std::string ns_list, ts_list;
      auto ts = t.samples_ts();
      for (size_t i = 0; i < t.ns.size(); ++i) {
        ns_list += (i ? ", " : "") + std::to_string(uint64_t(t.ns[i]));
        char b[32];
        std::snprintf(b, sizeof b, "%.4f", ts[i]);
        ts_list += (i ? ", " : "") + std::string(b);
      }
      std::printf("  {\"model_filename\": %s, \"model_n_params\": %llu, \"model_size\": %llu, \"n_prompt\": %u, "
                  "\"n_gen\": %u, \"n_depth\": %u, \"test\": %s, \"avg_ns\": %.0f, \"stddev_ns\": %.0f, "
                  "\"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"samples_ns\": [%s], \"samples_ts\": [%s], "
                  "\"test_time\": %lld, \"device\": %s, \"driver\": %s, \"dtype\": %s, \"scheme\": %s}%s\n",
                  json_str(platform::path_to_utf8(model.dir())).c_str(), (unsigned long long)model.n_params(),
                  (unsigned long long)model.weight_bytes(), t.n_prompt, t.n_gen, t.n_depth, json_str(t.name).c_str(),
                  t.avg_ns(), t.stddev_ns(), t.avg_ts(), t.stddev_ts(), ns_list.c_str(), ts_list.c_str(),
                  (long long)started, json_str(caps.device_name).c_str(), json_str(caps.driver_info).c_str(),
                  json_str(dtype).c_str(), json_str(scheme).c_str(), k + 1 < tests.size() ? "," : "");
    }
    std::printf("]\n");
  }
  if (profile) {
    for (const auto& t : tests) {
      double total = 0;
      for (const auto& [k, v] : t.profile_ns) total += v;
      std::vector<std::pair<std::string, double>> rows(t.profile_ns.begin(), t.profile_ns.end());
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
      std::fprintf(stderr, "\nGPU time per kernel, %s (%d repetitions):\n", t.name.c_str(), int(reps));
      // Per forward step: one token for tg, one chunk for pp.
      const int64_t L = model.config().n_layers;
      std::fprintf(stderr, "recorded per %s: %u dispatches, %u barriers; per layer %.1f dispatches, %.1f barriers\n",
                   t.n_prompt ? "prefill chunk" : "token", t.counts.dispatches, t.counts.barriers,
                   double(t.counts.layer_dispatches) / double(L), double(t.counts.layer_barriers) / double(L));
      std::fprintf(stderr, "| kernel | ms/rep | share |\n| --- | ---: | ---: |\n");
      for (const auto& [k, v] : rows)
        std::fprintf(stderr, "| %s | %.3f | %.1f%% |\n", k.c_str(), v / 1e6 / double(reps), 100.0 * v / std::max(total, 1.0));
    }
  }
  return 0;
}

}  // namespace reach::cli
