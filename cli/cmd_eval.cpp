// `reach eval`: long-context evaluation (docs/EXTRAPOLATION.md §7) over a
// grid of position schemes × context lengths.  Modes:
//   last     (default) last-segment protocol §7.2: every context L scores the
//            same final N predictions of the sample
//   repeat   §7.4: the sample's first M tokens repeated, then `last`
//   ppl      llama-perplexity compatible chunked perplexity
//   passkey  §7.3 retrieval accuracy over lengths × insertion depths
// This file parses the options and plans the run (host only); the modes are in
// cli/eval_modes.cpp, the pure parts in cli/eval_protocols.* and cli/eval_report.*.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "cli/eval_modes.hpp"
#include "cli/eval_protocols.hpp"
#include "cli/options.hpp"
#include "cli/progress_bar.hpp"
#include "runtime/config/rope_types.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/formats/json_parse.hpp"
#include "runtime/model/model.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach::cli {

namespace {

using namespace reach::eval;
namespace fs = std::filesystem;

void eval_usage() {
  std::printf(
      "usage: reach eval -m DIR (-f TEXT_FILE | --tokens IDS_FILE) [options]\n"
      "       reach eval -m DIR --passkey [options]\n"
      "  -m, --model DIR       model folder (config.json, *.safetensors, tokenizer.json), a .gguf file, or a\n"
      "                        folder holding one .gguf\n"
      "  -f, --file FILE       the sample: a long text, tokenized with the model's tokenizer and the special\n"
      "                        tokens its post-processor adds (--mode ppl: BOS or nothing first, see below)\n"
      "  --tokens FILE         the sample as whitespace-separated token ids, used as given (no tokenizer needed)\n"
      "  --ctx L1,L2,...       context lengths (k = x1024; default L_train,2·L_train,4·L_train;\n"
      "                        --mode ppl: n_ctx = the first value, default 512)\n"
      "  --schemes S1,S2,...   position-scheme presets (default: default), see below\n"
      "  --score-last N        predictions scored at every L (default min(L_train, smallest L))\n"
      "  --mode MODE           last (default) | ppl | passkey | repeat\n"
      "  --repeat              = --mode repeat: the sample becomes its first M tokens repeated\n"
      "  --repeat-len M        the repeated unit (default L_train)\n"
      "  --passkey             = --mode passkey: retrieval accuracy over --ctx x --depths\n"
      "  --depths D1,D2,...    passkey insertion depths in [0, 1] (default 0,0.25,0.5,0.75,1)\n"
      "  --trials N            passkey trials per (ctx, depth) (default 5)\n"
      "  --seed S              passkey key seed (default 0); keys are uniform in [1, 50000]\n"
      "  -o md|json            output format on stdout (default md)\n"
      "  --plot OUT.svg        SVG of mean NLL (passkey: accuracy) vs context length, one line per scheme\n"
      "  --dump-logprobs FILE  per scored prediction: position<TAB>target_id<TAB>logprob (natural log;\n"
      "                        position = index of the target in the evaluated token sequence), with a\n"
      "                        '# scheme=S ctx=L' line before each (scheme, context) block\n"
      "  --chunks N            --mode ppl: evaluate at most the first N chunks (default -1 = all)\n"
      "  --chunk N             prefill chunk length (default %u)\n"
      "  -v, --verbose         the scheme parameters per (scheme, L) and the resolved schemes (stderr)\n"
      "  --device N|NAME       Vulkan device (see `reach info`)\n"
      "%s"
      "\n"
      "last-segment protocol: for every L the model reads tokens[T-L-1 : T-1] of the T-token sample and\n"
      "is scored on its last N predictions (targets tokens[T-N : T]): every L scores the same tokens.\n"
      "\n"
      "ppl (llama-perplexity's perplexity): the sample of T tokens (T >= 2*n_ctx) is cut into min(floor(T/n_ctx),\n"
      "--chunks) non-overlapping chunks of n_ctx tokens, each read alone from position 0.  Only when the tokenizer\n"
      "adds a BOS (tokenizer_config.json add_bos_token if a boolean, else the tokenizer.json post-processor) does\n"
      "BOS start a -f sample and replace token 0 of every chunk; otherwise token 0 is kept.  With first = n_ctx/2,\n"
      "the predictions of chunk tokens first+1 .. n_ctx-1 are scored (n_ctx-1-first per chunk, N in all):\n"
      "PPL = exp(mean NLL), printed as [i]PPL on stderr after chunk i, and\n"
      "PPL +/- PPL*sqrt((mean(NLL^2) - mean(NLL)^2) / (N-1))  (\"Final estimate\" line, the table's +/- column).\n"
      "\n%s\n"
      "Scheme flags given on the command line apply to every preset as described above; --original-ctx N\n"
      "also sets L_train of the presets (default: from config.json, as above):\n%s",
      kDefaultPrefillChunk, (quantize_flag_help(24) + full_kv_flag_help(24) + kv_cache_flag_help(24) + key_calib_flag_help(24, true) + activations_flag_help(24)).c_str(), preset_help(),
      scheme_flags_help().c_str());
}

// Empty when --help was printed.
std::optional<EvalOptions> parse_eval_options(const Args& args) {
  EvalOptions o;
  std::string passkey_flag;   // the first passkey-only flag given: other modes would ignore it
  auto set_mode = [&](const std::string& m) {
    if (m != "last" && m != "ppl" && m != "passkey" && m != "repeat")
      throw Error(ErrorCode::invalid_argument, "--mode expects last, ppl, passkey or repeat, got '" + m + "'");
    if (o.mode != "last" && o.mode != m)
      throw Error(ErrorCode::invalid_argument, "conflicting modes '" + o.mode + "' and '" + m + "': choose one");
    o.mode = m;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { eval_usage(); return std::nullopt; }
    else if (a == "-m" || a == "--model") o.model_dir = value_of(args, i);
    else if (a == "-f" || a == "--file") o.text_file = value_of(args, i);
    else if (a == "--tokens") o.tokens_file = value_of(args, i);
    else if (a == "--ctx") o.ctx_arg = value_of(args, i);
    else if (a == "--schemes") o.schemes_arg = value_of(args, i);
    else if (a == "--score-last") o.score_last = int_of(args, i, 1, 1 << 30);
    else if (a == "--mode") set_mode(value_of(args, i));
    else if (a == "--passkey") set_mode("passkey");
    else if (a == "--repeat") set_mode("repeat");
    else if (a == "--repeat-len") o.repeat_len = int_of(args, i, 1, 1 << 30);
    else if (a == "--depths") { o.depths_arg = value_of(args, i); passkey_flag = a; }
    else if (a == "--trials") { o.trials = int_of(args, i, 1, 100000); passkey_flag = a; }
    else if (a == "--seed") { o.seed = uint64_t(int_of(args, i, 0, INT64_MAX)); passkey_flag = a; }
    else if (a == "-o") {
      o.format = value_of(args, i);
      if (o.format != "md" && o.format != "json")
        throw Error(ErrorCode::invalid_argument, "-o expects md or json, got '" + o.format + "'");
    } else if (a == "--plot") o.plot_path = value_of(args, i);
    else if (a == "--dump-logprobs") o.dump_path = value_of(args, i);
    else if (a == "--chunk") o.chunk = int_of(args, i, 1, 1 << 16);
    else if (a == "--chunks") o.chunks = int_of(args, i, -1, 1 << 30);
    else if (a == "-v" || a == "--verbose") o.verbose = true;
    else if (a == "--device") o.device = value_of(args, i);
    else if (a == "--quantize") o.quantize = quantize_of(args, i);
    else if (a == "--full-kv") o.full_kv = true;
    else if (parse_key_calib_flag(args, i, o.calibrate_keys, o.key_calib_file, &o.key_calib_save)) continue;
    else if (parse_kv_cache_flag(args, i, o.cache_type_k, o.cache_type_v)) continue;
    else if (parse_activations_flag(args, i, o.activations)) continue;
    else if (parse_scheme_flag(args, i, o.user)) continue;
    else throw Error(ErrorCode::invalid_argument, "unknown option '" + a + "' (see reach eval --help)");
  }
  if (!passkey_flag.empty() && o.mode != "passkey")
    throw Error(ErrorCode::invalid_argument, passkey_flag + " applies to --passkey only (mode is " + o.mode + ")");
  return o;
}

// Option combinations, before any file is read.
void check_eval_options(const EvalOptions& o) {
  if (o.model_dir.empty())
    throw Error(ErrorCode::invalid_argument,
                "no model given: pass -m DIR (a folder with config.json and model.safetensors) or -m FILE.gguf");
  if (o.mode == "passkey") {
    if (!o.text_file.empty() || !o.tokens_file.empty())
      throw Error(ErrorCode::invalid_argument, "--passkey builds its own prompts: drop -f / --tokens");
    if (!o.dump_path.empty()) throw Error(ErrorCode::invalid_argument, "--dump-logprobs does not apply to --passkey");
  } else {
    if (o.text_file.empty() == o.tokens_file.empty())
      throw Error(ErrorCode::invalid_argument, "give the sample with exactly one of -f TEXT_FILE or --tokens IDS_FILE");
  }
  if (o.repeat_len && o.mode != "repeat") throw Error(ErrorCode::invalid_argument, "--repeat-len needs --repeat");
  if (o.score_last && (o.mode == "ppl" || o.mode == "passkey"))
    throw Error(ErrorCode::invalid_argument, "--score-last applies to the last-segment and repeat modes only");
  if (o.chunks && o.mode != "ppl") throw Error(ErrorCode::invalid_argument, "--chunks needs --mode ppl");
}

// Schemes, L_train and the context lengths; returns the model's config.json.
ModelConfig plan_grid(EvalPlan& p) {
  EvalOptions& o = p.opt;
  p.schemes = split_list(o.schemes_arg);
  if (p.schemes.empty()) throw Error(ErrorCode::invalid_argument, "--schemes is empty: give e.g. default,yarn");
  for (const auto& s : p.schemes) normalize_preset(s);   // throws on an unknown name

  ModelConfig cfg = load_model_config_at(resolve_model_path(platform::path_from_utf8(o.model_dir)));
  p.L_train = training_length(cfg);
  if (o.user.original_ctx) {
    // --original-ctx says what the trained context is: L_train of the presets.  It
    // stays a scheme flag of `default` / `logn` only where that scheme takes it.
    p.L_train = *o.user.original_ctx;
    const RopeTypeInfo* t =
        o.user.rope_scaling ? rope_type_from_flag(*o.user.rope_scaling) : &rope_type_info(cfg.rope.type);
    if (!t || !t->takes(RopeParam::original_ctx)) o.user.original_ctx.reset();
  }
  if (p.L_train <= 0) throw Error(ErrorCode::invalid_argument, "the model config has no max_position_embeddings");

  if (!o.ctx_arg.empty()) p.ctxs = parse_int_list(o.ctx_arg, "--ctx");
  else if (o.mode == "ppl") p.ctxs = {512};
  else p.ctxs = {p.L_train, 2 * p.L_train, 4 * p.L_train};
  // As `reach run --ctx`: the samples below are sized from the largest context.
  for (int64_t L : p.ctxs)
    if (L > (int64_t(1) << 24))
      throw Error(ErrorCode::invalid_argument,
                  "context " + std::to_string(L) +
                      (o.ctx_arg.empty() ? " (from L_train " + std::to_string(p.L_train) + ")" : "") +
                      " is more than reach eval handles (16777216): pass smaller --ctx values");
  if (o.mode == "ppl" && p.ctxs.size() > 1) {
    std::fprintf(stderr, "eval: --mode ppl uses n_ctx = %lld (the first --ctx value)\n", (long long)p.ctxs[0]);
    p.ctxs.erase(p.ctxs.begin() + 1, p.ctxs.end());
  }
  p.depths = parse_float_list(o.depths_arg, "--depths");
  return cfg;
}

// The sample (-f / --tokens, repeated for --repeat) and the windows or chunks read from it.
void plan_sample(EvalPlan& p, int64_t vocab_size) {
  const EvalOptions& o = p.opt;
  const int64_t L_max = *std::max_element(p.ctxs.begin(), p.ctxs.end());
  const int64_t L_min = *std::min_element(p.ctxs.begin(), p.ctxs.end());
  if (!o.text_file.empty()) {
    const std::string text = read_file(platform::path_from_utf8(o.text_file), file_kinds::eval_text);
    if (text.empty()) throw Error(ErrorCode::invalid_argument, "text file " + o.text_file + " is empty");
    if (o.mode == "ppl") {   // as llama-perplexity: BOS first only when the vocabulary adds one, never EOS
      if (p.bos.add) p.sample.push_back(p.bos.id);
      const std::vector<int32_t> ids = p.tokenizer->encode(text, false);
      p.sample.insert(p.sample.end(), ids.begin(), ids.end());
    } else {
      p.sample = p.tokenizer->encode(text, true);
    }
  } else {
    p.sample = parse_token_ids(read_file(platform::path_from_utf8(o.tokens_file), file_kinds::token_ids), o.tokens_file);
    if (p.sample.empty()) throw Error(ErrorCode::invalid_argument, "token file " + o.tokens_file + " holds no ids");
    for (size_t k = 0; k < p.sample.size(); ++k)
      if (p.sample[k] >= vocab_size)
        throw Error(ErrorCode::invalid_argument,
                    o.tokens_file + ": token id " + std::to_string(p.sample[k]) + " (item " + std::to_string(k + 1) +
                        ") is outside the vocabulary of " + std::to_string(vocab_size));
  }
  if (o.mode == "repeat") {
    const size_t M = size_t(o.repeat_len.value_or(p.L_train));
    p.sample = repeat_tokens(p.sample, M, size_t(L_max) + 1);
  }
  const size_t T = p.sample.size();
  p.N = size_t(o.score_last.value_or(std::min(p.L_train, L_min)));
  if (o.mode == "last" || o.mode == "repeat") {
    for (int64_t L : p.ctxs) p.windows.push_back(last_segment_window(T, size_t(L), p.N));   // throws on a short sample
  } else if (o.mode == "ppl") {
    std::optional<size_t> max_chunks;   // --chunks -1: all, as llama-perplexity
    if (o.chunks && *o.chunks >= 0) max_chunks = size_t(*o.chunks);
    p.chunks = ppl_chunks(T, size_t(p.ctxs[0]), max_chunks);
  }
}

// llama-perplexity's add-BOS setting (eval::ppl_bos): tokenizer_config.json, then tokenizer.json.
void plan_ppl_bos(EvalPlan& p, const ModelConfig& cfg) {
  const ModelPath model = resolve_model_path(platform::path_from_utf8(p.opt.model_dir));
  const fs::path dir = model.path;
  std::optional<bool> config_add_bos;
  const fs::path tc = dir / "tokenizer_config.json";
  if (model.gguf) {
    // The GGUF's tokenizer.ggml.add_bos_token is what llama-perplexity reads for it.
    const GgufFile f = GgufFile::open(dir);
    config_add_bos = f.opt_bool("tokenizer.ggml.add_bos_token");
    if (!p.tokenizer && f.has("tokenizer.ggml.model")) {
      try {
        p.tokenizer = Tokenizer::from_gguf(f);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::unsupported) throw;   // --tokens needs no tokenizer: BOS from the metadata
      }
    }
  } else if (fs::exists(tc)) {
    nlohmann::json j;
    try {
      j = parse_json_bounded(read_file(tc, file_kinds::tokenizer_config_json), 64);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::format, platform::path_to_utf8(tc) + ": malformed JSON (" + e.what() + ")");
    }
    // Only a boolean counts, as for the GGUF converter.
    if (j.is_object() && j.contains("add_bos_token") && j["add_bos_token"].is_boolean())
      config_add_bos = j["add_bos_token"].get<bool>();
  }
  if (!model.gguf && !p.tokenizer && fs::exists(dir / "tokenizer.json")) p.tokenizer = Tokenizer::load(dir);
  std::optional<bool> adds;
  std::optional<int32_t> prefix_id, named;
  if (p.tokenizer) {
    adds = p.tokenizer->adds_bos();
    if (*adds) prefix_id = p.tokenizer->special_prefix().front();
    named = p.tokenizer->bos_id();
  }
  p.bos = ppl_bos(config_add_bos, adds, prefix_id, !cfg.bos_ids.empty() ? std::optional(cfg.bos_ids.front()) : named);
}

// The passkey prompts, tokenized: trials per (context, depth).
void plan_passkey(EvalPlan& p) {
  const EvalOptions& o = p.opt;
  const Tokenizer& tk = *p.tokenizer;
  // Every prompt is kept (tokenized) until the sessions run: bound them first.
  uint64_t total = 0;
  for (int64_t L : p.ctxs)
    total = saturating_add(total, saturating_mul({uint64_t(L), p.depths.size(), uint64_t(o.trials)}));
  if (total > (uint64_t(1) << 28))
    throw Error(ErrorCode::invalid_argument, "--passkey would hold " + std::to_string(p.ctxs.size() * p.depths.size()) +
                                                 " x " + std::to_string(o.trials) + " prompts of up to " +
                                                 std::to_string(*std::max_element(p.ctxs.begin(), p.ctxs.end())) +
                                                 " tokens, more than 268435456 tokens in all: lower --trials, "
                                                 "--depths or --ctx");
  p.prompt_max.assign(p.ctxs.size() * p.depths.size(), 0);
  auto count = [&](const std::string& t) { return tk.encode(t, true).size(); };
  for (size_t ci = 0; ci < p.ctxs.size(); ++ci) {
    if (p.ctxs[ci] <= int64_t(kPasskeyGen))
      throw Error(ErrorCode::invalid_argument, "--passkey needs every --ctx above " + std::to_string(kPasskeyGen) +
                                                   " (the answer is decoded inside the context)");
    for (size_t di = 0; di < p.depths.size(); ++di)
      for (size_t t = 0; t < size_t(o.trials); ++t) {
        const int64_t key = passkey_key(o.seed, ci, di, t);
        PasskeyPrompt pp;
        try {
          pp = build_passkey_prompt(key, p.depths[di], size_t(p.ctxs[ci]) - kPasskeyGen, count);
        } catch (const Error& e) {
          throw Error(e.code(), "--passkey at ctx " + std::to_string(p.ctxs[ci]) + ": " + e.what());
        }
        size_t& longest = p.prompt_max[ci * p.depths.size() + di];
        longest = std::max(longest, pp.n_tokens);
        p.passkey_trials.push_back({ci, di, key, tk.encode(pp.text, true)});
      }
  }
}

// Tokens the bar counts: every token fed or decoded, over all schemes.
uint64_t total_tokens(const EvalPlan& p) {
  uint64_t total = 0;
  if (p.opt.mode == "last" || p.opt.mode == "repeat") {
    for (int64_t L : p.ctxs) total += uint64_t(L);
  } else if (p.opt.mode == "ppl") {
    for (const auto& c : p.chunks) total += c.n_ctx - 1;
  } else {
    for (const auto& t : p.passkey_trials) total += t.ids.size() + kPasskeyGen - 1;
  }
  return total * p.schemes.size();
}

}  // namespace

int cmd_eval(const Args& args) {
  std::optional<EvalOptions> parsed = parse_eval_options(args);
  if (!parsed) return 0;
  check_eval_options(*parsed);
  EvalPlan plan;
  plan.opt = std::move(*parsed);
  const EvalOptions& o = plan.opt;
  const bool passkey = o.mode == "passkey";
  const ModelConfig cfg = plan_grid(plan);
  if (passkey || !o.text_file.empty()) plan.tokenizer = load_tokenizer_at(resolve_model_path(platform::path_from_utf8(o.model_dir)));
  if (o.mode == "ppl") plan_ppl_bos(plan, cfg);
  if (passkey) plan_passkey(plan);
  else plan_sample(plan, cfg.vocab_size);

  Engine e = open_engine(o.model_dir, o.device, !o.tokens_file.empty() ? false : true, o.quantize);
  Model& model = *e.model;
  std::fprintf(stderr, "model: %s, L_train %lld, %s\n", platform::path_to_utf8(model.dir()).c_str(), (long long)plan.L_train,
               model.weight_types().c_str());
  if (o.verbose)
    std::fprintf(stderr, "device: %s\n%s\n", e.device->caps().summary().c_str(), model.config().describe().c_str());

  ProgressBar bar("eval [tokens]", total_tokens(plan) * kTokenUnit, !o.verbose && o.mode != "ppl");
  std::string dump;
  if (o.mode == "last" || o.mode == "repeat") eval_last_segment(model, plan, bar, &dump);
  else if (o.mode == "ppl") eval_ppl(model, plan, bar, &dump);
  else eval_passkey(model, plan, bar);
  if (!o.dump_path.empty()) write_file(o.dump_path, dump, "log-prob dump");
  return 0;
}

}  // namespace reach::cli
