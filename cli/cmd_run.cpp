// `reach run`: stream a completion of a prompt.
#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <string>

#include "engine/error.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"
#include "cli/options.hpp"

namespace reach::cli {

namespace {

void run_usage() {
  std::printf(
      "usage: reach run -m DIR -p TEXT [options]\n"
      "  -m, --model DIR     model folder (config.json, *.safetensors, tokenizer.json)\n"
      "  -p, --prompt TEXT   prompt text\n"
      "  -n N                tokens to generate (default 64)\n"
      "  --temp T            temperature, 0 = greedy (default 0.8)\n"
      "  --top-k K           0 = no cut (default 40)   --top-p P in (0, 1] (default 0.95)   --seed S (default 0)\n"
      "  --ctx N             context (KV cache) length (default prompt + n)\n"
      "  --chunk N           prefill chunk length (default %u)\n"
      "  --ids               print the prompt's and the generated token ids to stderr\n"
      "  -v                  print the model and the position scheme in effect\n"
      "  --device N|NAME     Vulkan device (see `reach info`)\n"
      "%s%s",
      kDefaultPrefillChunk, kQuantizeFlagHelp, scheme_flags_help().c_str());
}

std::string ids_line(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace

int cmd_run(const Args& args) {
  std::string model_dir, prompt, device;
  bool have_prompt = false, print_ids = false, verbose = false;
  int64_t n_predict = 64, ctx = 0, chunk = kDefaultPrefillChunk;
  SamplerParams sp;
  SessionOptions so;
  std::optional<WType> quantize;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { run_usage(); return 0; }
    else if (a == "-m" || a == "--model") model_dir = value_of(args, i);
    else if (a == "-p" || a == "--prompt") { prompt = value_of(args, i); have_prompt = true; }
    else if (a == "-n") n_predict = int_of(args, i, 0, 1 << 24);
    // Bounds that keep the float finite and in the sampler's ranges (validate_sampler_params).
    else if (a == "--temp") sp.temperature = float(float_of(args, i, 0, FLT_MAX, "a finite number >= 0 (0 = greedy)"));
    else if (a == "--top-k") sp.top_k = int32_t(int_of(args, i, 0, 1 << 30));
    else if (a == "--top-p") sp.top_p = float(float_of(args, i, FLT_MIN, 1, "a number in (0, 1] (1 = no nucleus cut)"));
    else if (a == "--seed") sp.seed = uint64_t(int_of(args, i, 0, INT64_MAX));
    else if (a == "--ctx") ctx = int_of(args, i, 1, 1 << 24);
    else if (a == "--chunk") chunk = int_of(args, i, 1, 1 << 16);
    else if (a == "--ids") print_ids = true;
    else if (a == "-v" || a == "--verbose") verbose = true;
    else if (a == "--device") device = value_of(args, i);
    else if (a == "--quantize") quantize = quantize_of(args, i);
    else if (parse_scheme_flag(args, i, so.overrides)) continue;
    else throw Error(ErrorCode::invalid_argument, "reach run: unknown option '" + a + "' (see reach run --help)");
  }
  if (!have_prompt) throw Error(ErrorCode::invalid_argument, "no prompt: pass -p TEXT");
  if (prompt.empty()) throw Error(ErrorCode::invalid_argument, "the prompt is empty: pass a non-empty -p TEXT");

  Engine e = open_engine(model_dir, device, true, quantize);
  Model& model = *e.model;
  const Tokenizer& tk = *model.tokenizer();
  std::vector<int32_t> ids = tk.encode(prompt, true);
  if (ids.empty()) throw Error(ErrorCode::invalid_argument, "the prompt encodes to no tokens");

  const int64_t needed = int64_t(ids.size()) + n_predict;
  if (ctx == 0) ctx = needed;
  if (needed > ctx)   // an option error, named in flags: no hint is added
    throw Error(ErrorCode::invalid_argument, "prompt of " + std::to_string(ids.size()) + " tokens + " +
                                                 std::to_string(n_predict) + " new tokens needs a context of " +
                                                 std::to_string(needed) + ", more than --ctx " + std::to_string(ctx) +
                                                 ": raise --ctx or lower -n");
  so.context = uint32_t(ctx);
  so.chunk = uint32_t(chunk);
  so.l_test = needed;   // dynamic scaling's "local static" length
  Session session(model, so);
  if (verbose) {
    std::fprintf(stderr, "device: %s\n", e.device->caps().summary().c_str());
    std::fprintf(stderr, "model: %s (%llu params, %s weights)\n%s\n", model.dir().string().c_str(),
                 (unsigned long long)model.n_params(), model.weight_types().c_str(),
                 session.config().describe().c_str());
    std::fprintf(stderr, "scheme: %s\n", session.schemes().describe().c_str());
  }
  std::fprintf(stderr, "load: %.2f s\n", e.load_seconds);

  auto t0 = std::chrono::steady_clock::now();
  session.prefill(ids);
  const double t_prefill = seconds_since(t0);

  Sampler sampler(sp);
  Tokenizer::StreamDecoder out(tk);
  std::vector<int32_t> generated;
  const auto& eos = model.eos_ids();
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n_predict; ++i) {
    const int32_t next = sampler.sample(session.logits());
    generated.push_back(next);
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    const std::string piece = out.push(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (i + 1 < n_predict) session.decode(next);
  }
  const double t_decode = seconds_since(t0);
  const std::string rest = out.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);

  const size_t n_dec = generated.size() > 1 ? generated.size() - 1 : 0;
  std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tok/s)\n", ids.size(), t_prefill,
               ids.size() / std::max(t_prefill, 1e-9));
  std::fprintf(stderr, "decode: %zu tokens in %.3f s (%.1f tok/s)\n", n_dec, t_decode,
               n_dec ? n_dec / std::max(t_decode, 1e-9) : 0.0);
  if (print_ids) {
    std::fprintf(stderr, "prompt ids: %s\n", ids_line(ids).c_str());
    std::fprintf(stderr, "generated ids: %s\n", ids_line(generated).c_str());
  }
  return 0;
}

}  // namespace reach::cli
