// `reach tune -m MODEL`: measures prefill and decode with exact and with int8 activations on this device and
// keeps the faster of each phase in the tuning file (runtime/session/activation_tuning.hpp), which every later
// session of this model on this device then follows.  The measurement is a short `reach bench` of each choice,
// alternated so that a drift of the machine's speed falls on both.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "runtime/session/activation_tuning.hpp"
#include "runtime/session/session.hpp"

namespace reach::cli {

namespace {

void tune_usage() {
  std::printf(
      "usage: reach tune -m MODEL [-p N] [-n N] [-r N] [--quantize T] [--device D] [--dry-run]\n"
      "Measures prefill (pp N) and decode (tg N) with exact f32 activations and with int8 activations\n"
      "(integer dot products) against the model's quantized weights, and records the faster of each phase\n"
      "for this device and model in the tuning file; sessions that do not ask for --exact-activations or\n"
      "--int8-activations then follow it (reach run -v says which ran).\n"
      "  -m MODEL    the model (HF folder or GGUF) to measure\n"
      "  -p N        prompt tokens per prefill measurement (default 256)\n"
      "  -n N        tokens per decode measurement (default 32)\n"
      "  -r N        measurements of each choice, alternated; the median counts (default 3)\n"
      "  --quantize T  quantize the float weights at load (q8_0, q4_0, q4_k), as run / bench do;\n"
      "              the choice is recorded for the quantized model's weight types\n"
      "  --device D  the Vulkan device (index or name), as REACH_DEVICE\n"
      "  --dry-run   measure and print, but do not write the tuning file\n"
      "The file: $REACH_TUNING_FILE, else $XDG_CACHE_HOME/reach/tuning.json, else ~/.cache/reach/tuning.json.\n"
      "Run it on a quiet machine: the choice is only as good as the measurement.\n");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// tokens/s of one prefill of n_prompt tokens and of n_gen decode steps, with one session per choice (each
// records its programs in the warm-up).
struct Runner {
  Model& model;
  SessionOptions so;
  std::mt19937 rng{7};
  std::unique_ptr<Session> session;

  Runner(Model& m, QuantActivations a, uint32_t context) : model(m) {
    so.context = context;
    so.activations = a;
    so.cache_type_k = so.cache_type_v = kFrontEndKvType;   // the cache `reach run` makes by default
    session = std::make_unique<Session>(model, so);
  }
  std::vector<int32_t> ids(size_t n) {
    std::uniform_int_distribution<int32_t> d(0, int32_t(model.config().vocab_size) - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  }
  double prefill(uint32_t n) {
    session->reset();
    const auto p = ids(n);
    const auto t0 = std::chrono::steady_clock::now();
    session->prefill(p);
    return n / seconds_since(t0);
  }
  double decode(uint32_t n) {
    session->reset();
    session->prefill(ids(1));
    const auto t = ids(n);
    const auto t0 = std::chrono::steady_clock::now();
    for (int32_t id : t) session->decode(id);
    return n / seconds_since(t0);
  }
};

}  // namespace

int cmd_tune(const Args& args) {
  std::string model_dir, device;
  int64_t n_prompt = 256, n_gen = 32, reps = 3;
  bool dry = false;
  std::optional<WType> quantize;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { tune_usage(); return 0; }
    else if (a == "-m" || a == "--model") model_dir = value_of(args, i);
    else if (a == "-p") n_prompt = int_of(args, i, 2, 1 << 16);
    else if (a == "-n") n_gen = int_of(args, i, 1, 1 << 16);
    else if (a == "-r") reps = int_of(args, i, 1, 100);
    else if (a == "--device") device = value_of(args, i);
    else if (a == "--dry-run") dry = true;
    else if (a == "--quantize") quantize = quantize_of(args, i);
    else throw Error(ErrorCode::invalid_argument, "unknown option '" + a + "' (see reach tune --help)");
  }
  if (model_dir.empty()) throw Error(ErrorCode::invalid_argument, "reach tune needs -m MODEL (see reach tune --help)");
  Engine e = open_engine(model_dir, device, false, quantize);
  Model& model = *e.model;
  const std::string key = tuning_key(model);
  const auto& caps = e.device->caps();
  if (!caps.integer_dot) {
    std::printf("%s has no integer dot product (shaderIntegerDotProduct): every phase runs exact; nothing to "
                "tune\n", caps.device_name.c_str());
    return 0;
  }
  if (model.weight_types().find('q') == std::string::npos) {
    std::printf("%s has no quantized weights (%s): int8 activations do not apply; nothing to tune\n",
                platform::path_to_utf8(model.dir().filename()).c_str(), model.weight_types().c_str());
    return 0;
  }
  const uint32_t context = uint32_t(std::max(n_prompt, n_gen) + 2);
  Runner exact(model, QuantActivations::exact, context), int8(model, QuantActivations::int8, context);
  exact.prefill(uint32_t(n_prompt)), int8.prefill(uint32_t(n_prompt));   // warm-up: records the programs
  exact.decode(2), int8.decode(2);
  std::vector<double> pe, pi, de, di;
  for (int64_t r = 0; r < reps; ++r) {
    pe.push_back(exact.prefill(uint32_t(n_prompt)));
    pi.push_back(int8.prefill(uint32_t(n_prompt)));
    de.push_back(exact.decode(uint32_t(n_gen)));
    di.push_back(int8.decode(uint32_t(n_gen)));
  }
  TunedEntry t;
  t.prefill = {median(pe), median(pi)};
  t.decode = {median(de), median(di)};
  t.choice.prefill = t.prefill.int8 > t.prefill.exact ? QuantActivations::int8 : QuantActivations::exact;
  t.choice.decode = t.decode.int8 > t.decode.exact ? QuantActivations::int8 : QuantActivations::exact;
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d", std::gmtime(&now));
  t.when = when;

  std::printf("| phase | exact t/s | int8 t/s | int8 / exact | chosen |\n|---|---:|---:|---:|---|\n");
  auto row = [](const char* phase, const PhaseSpeeds& s, QuantActivations c) {
    std::printf("| %s | %.2f | %.2f | %.2fx | %s |\n", phase, s.exact, s.int8, s.int8 / s.exact,
                activations_name(c));
  };
  row(("pp" + std::to_string(n_prompt)).c_str(), t.prefill, t.choice.prefill);
  row(("tg" + std::to_string(n_gen)).c_str(), t.decode, t.choice.decode);
  std::printf("key: %s\n", key.c_str());
  const std::string& file = cli_settings().tuning_file;
  if (dry) {
    std::printf("--dry-run: the tuning file (%s) is unchanged\n", file.c_str());
    return 0;
  }
  save_tuning(file, key, t);
  std::printf("written to %s\n", file.c_str());
  return 0;
}

}  // namespace reach::cli
