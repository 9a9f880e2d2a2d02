// `reach eval`: long-context evaluation (docs/EXTRAPOLATION.md §7) over a
// grid of position schemes × context lengths.  Modes:
//   last     (default) last-segment protocol §7.2: every context L scores the
//            same final N predictions of the sample
//   repeat   §7.4: the sample's first M tokens repeated, then `last`
//   ppl      llama-perplexity compatible chunked perplexity
//   passkey  §7.3 retrieval accuracy over lengths × insertion depths
// The pure parts live in cli/eval_protocols.* and cli/eval_report.*.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "engine/error.hpp"
#include "runtime/progress.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"
#include "runtime/tokenizer.hpp"
#include "cli/options.hpp"
#include "cli/eval_protocols.hpp"
#include "cli/eval_report.hpp"

namespace reach::cli {

namespace {

using namespace reach::eval;

constexpr size_t kPasskeyGen = 10;   // greedy tokens decoded per passkey trial
// runtime/progress.hpp formats byte counts in MiB: one token is counted as
// 1 MiB so the bar's numbers read as tokens and tokens/s.
constexpr uint64_t kTokenUnit = uint64_t(1) << 20;

void eval_usage() {
  std::printf(
      "usage: reach eval -m DIR (-f TEXT_FILE | --tokens IDS_FILE) [options]\n"
      "       reach eval -m DIR --passkey [options]\n"
      "  -m, --model DIR       model folder (config.json, *.safetensors, tokenizer.json)\n"
      "  -f, --file FILE       the sample: a long text, tokenized with the model's tokenizer (BOS at its start)\n"
      "  --tokens FILE         the sample as whitespace-separated token ids (no tokenizer needed)\n"
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
      "  --chunk N             prefill chunk length (default 256)\n"
      "  --original-ctx N      L_train of the presets (default: config.json, see below)\n"
      "  -v, --verbose         the scheme parameters per (scheme, L) and the resolved schemes (stderr)\n"
      "  --device N|NAME       Vulkan device (see `reach info`)\n"
      "\n"
      "last-segment protocol: for every L the model reads tokens[T-L-1 : T-1] of the T-token sample and\n"
      "is scored on its last N predictions (targets tokens[T-N : T]): every L scores the same tokens.\n"
      "ppl: non-overlapping chunks of n_ctx, BOS replaces each chunk's first token, the second half of\n"
      "each chunk is scored (as llama-perplexity; running values [i]ppl on stderr).\n"
      "\n%s\n"
      "Scheme flags given on the command line apply to every preset as described above:\n%s",
      preset_help(), scheme_flags_help().c_str());
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::io, std::string("cannot open ") + what + " '" + path + "'");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::io, std::string("cannot write ") + what + " '" + path + "'");
  f << text;
  if (!f) throw Error(ErrorCode::io, std::string("error writing ") + what + " '" + path + "'");
}

std::unique_ptr<Session> open_session(Model& model, const SchemeRun& run, int64_t L, uint32_t chunk, bool verbose) {
  SessionOptions so;
  so.context = uint32_t(L);
  so.chunk = chunk;
  so.l_test = L;
  so.overrides = run.overrides;
  std::unique_ptr<Session> s;
  try {
    s = std::make_unique<Session>(model, so);
  } catch (const Error& e) {
    throw Error(e.code(), "scheme '" + run.name + "' at ctx " + std::to_string(L) + " (" + run.params + "): " + e.what());
  }
  if (verbose)
    std::fprintf(stderr, "scheme %s, ctx %lld: %s\n  %s\n", run.name.c_str(), (long long)L, run.params.c_str(),
                 s->schemes().describe().c_str());
  return s;
}

// Feeds ids in pieces of at most `chunk` tokens (so the progress bar moves).
void prefill_plain(Session& s, const int32_t* ids, size_t n, size_t chunk, Progress& bar) {
  for (size_t off = 0; off < n; off += chunk) {
    const size_t k = std::min(chunk, n - off);
    s.prefill({ids + off, k});
    bar.advance(k * kTokenUnit);
  }
}

// Feeds ids[0, n) with logits and scores row r against targets[r]; logits
// are held for one chunk at a time (chunk × vocab floats).
Score prefill_scored(Session& s, const int32_t* ids, size_t n, const int32_t* targets, size_t first_position,
                     size_t chunk, Progress& bar, std::vector<size_t>* positions, std::vector<double>* logprobs) {
  Score sc;
  std::vector<float> logits;
  for (size_t off = 0; off < n; off += chunk) {
    const size_t k = std::min(chunk, n - off);
    logits.clear();
    s.prefill({ids + off, k}, &logits);
    if (logits.size() % k)
      throw Error(ErrorCode::internal, "eval: the session returned " + std::to_string(logits.size()) +
                                           " logits for " + std::to_string(k) + " rows");
    const size_t V = logits.size() / k;
    sc.add(score_rows(logits.data(), k, V, targets + off, logprobs));
    if (positions)
      for (size_t r = 0; r < k; ++r) positions->push_back(first_position + off + r);
    bar.advance(k * kTokenUnit);
  }
  return sc;
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t begin, size_t n) {
  return std::vector<int32_t>(v.begin() + ptrdiff_t(begin), v.begin() + ptrdiff_t(begin + n));
}

}  // namespace

int cmd_eval(const Args& args) {
  std::string model_dir, text_file, tokens_file, device, format = "md", plot_path, dump_path, mode = "last";
  std::string ctx_arg, schemes_arg = "default", depths_arg = "0,0.25,0.5,0.75,1";
  std::optional<int64_t> score_last, repeat_len;
  int64_t trials = 5, chunk = 256;
  uint64_t seed = 0;
  bool verbose = false;
  SchemeOverrides user;
  auto set_mode = [&](const std::string& m) {
    if (m != "last" && m != "ppl" && m != "passkey" && m != "repeat")
      throw Error(ErrorCode::invalid_argument, "--mode expects last, ppl, passkey or repeat, got '" + m + "'");
    if (mode != "last" && mode != m)
      throw Error(ErrorCode::invalid_argument, "conflicting modes '" + mode + "' and '" + m + "': choose one");
    mode = m;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { eval_usage(); return 0; }
    else if (a == "-m" || a == "--model") model_dir = value_of(args, i);
    else if (a == "-f" || a == "--file") text_file = value_of(args, i);
    else if (a == "--tokens") tokens_file = value_of(args, i);
    else if (a == "--ctx") ctx_arg = value_of(args, i);
    else if (a == "--schemes") schemes_arg = value_of(args, i);
    else if (a == "--score-last") score_last = int_of(args, i, 1, 1 << 30);
    else if (a == "--mode") set_mode(value_of(args, i));
    else if (a == "--passkey") set_mode("passkey");
    else if (a == "--repeat") set_mode("repeat");
    else if (a == "--repeat-len") repeat_len = int_of(args, i, 1, 1 << 30);
    else if (a == "--depths") depths_arg = value_of(args, i);
    else if (a == "--trials") trials = int_of(args, i, 1, 100000);
    else if (a == "--seed") seed = uint64_t(int_of(args, i, 0, INT64_MAX));
    else if (a == "-o") {
      format = value_of(args, i);
      if (format != "md" && format != "json")
        throw Error(ErrorCode::invalid_argument, "-o expects md or json, got '" + format + "'");
    } else if (a == "--plot") plot_path = value_of(args, i);
    else if (a == "--dump-logprobs") dump_path = value_of(args, i);
    else if (a == "--chunk") chunk = int_of(args, i, 1, 1 << 16);
    else if (a == "-v" || a == "--verbose") verbose = true;
    else if (a == "--device") device = value_of(args, i);
    else if (parse_scheme_flag(args, i, user)) continue;
    else throw Error(ErrorCode::invalid_argument, "reach eval: unknown option '" + a + "' (see reach eval --help)");
  }

  // ---- validate the options (before any GPU work) ----
  if (model_dir.empty())
    throw Error(ErrorCode::invalid_argument, "no model given: pass -m DIR (a folder with config.json and model.safetensors)");
  const bool passkey = mode == "passkey";
  if (passkey) {
    if (!text_file.empty() || !tokens_file.empty())
      throw Error(ErrorCode::invalid_argument, "--passkey builds its own prompts: drop -f / --tokens");
    if (!dump_path.empty()) throw Error(ErrorCode::invalid_argument, "--dump-logprobs does not apply to --passkey");
  } else {
    if (text_file.empty() == tokens_file.empty())
      throw Error(ErrorCode::invalid_argument, "give the sample with exactly one of -f TEXT_FILE or --tokens IDS_FILE");
  }
  if (repeat_len && mode != "repeat") throw Error(ErrorCode::invalid_argument, "--repeat-len needs --repeat");
  if (score_last && (mode == "ppl" || passkey))
    throw Error(ErrorCode::invalid_argument, "--score-last applies to the last-segment and repeat modes only");

  std::vector<std::string> schemes = split_list(schemes_arg);
  if (schemes.empty()) throw Error(ErrorCode::invalid_argument, "--schemes is empty: give e.g. default,yarn");
  for (const auto& s : schemes) normalize_preset(s);   // throws on an unknown name

  ModelConfig cfg = load_model_config(model_dir);
  int64_t L_train = training_length(cfg);
  if (user.original_ctx) {
    // --original-ctx says what the trained context is: L_train of the presets.  It
    // stays a scheme flag of `default` / `logn` only where that scheme takes it.
    L_train = *user.original_ctx;
    std::string t = user.rope_scaling ? *user.rope_scaling : rope_type_name(cfg.rope.type);
    std::replace(t.begin(), t.end(), '-', '_');
    if (t != "dynamic" && t != "yarn" && t != "llama3") user.original_ctx.reset();
  }
  if (L_train <= 0) throw Error(ErrorCode::invalid_argument, "the model config has no max_position_embeddings");

  std::vector<int64_t> ctxs;
  if (!ctx_arg.empty()) ctxs = parse_int_list(ctx_arg, "--ctx");
  else if (mode == "ppl") ctxs = {512};
  else ctxs = {L_train, 2 * L_train, 4 * L_train};
  if (mode == "ppl" && ctxs.size() > 1) {
    std::fprintf(stderr, "eval: --mode ppl uses n_ctx = %lld (the first --ctx value)\n", (long long)ctxs[0]);
    ctxs.erase(ctxs.begin() + 1, ctxs.end());
  }
  const int64_t L_max = *std::max_element(ctxs.begin(), ctxs.end());
  const int64_t L_min = *std::min_element(ctxs.begin(), ctxs.end());
  const std::vector<double> depths = parse_float_list(depths_arg, "--depths");

  // ---- the sample / the prompts (host only) ----
  std::optional<Tokenizer> tk;
  if (passkey || !text_file.empty()) tk = Tokenizer::load(model_dir);
  std::vector<int32_t> sample;
  if (!passkey) {
    if (!text_file.empty()) {
      const std::string text = read_file(text_file, "text file");
      sample = tk->encode(text, true);
    } else {
      sample = parse_token_ids(read_file(tokens_file, "token file"), tokens_file);
      for (size_t k = 0; k < sample.size(); ++k)
        if (sample[k] >= cfg.vocab_size)
          throw Error(ErrorCode::invalid_argument, tokens_file + ": token id " + std::to_string(sample[k]) +
                                                       " (item " + std::to_string(k + 1) + ") is outside the vocabulary of " +
                                                       std::to_string(cfg.vocab_size));
    }
    if (mode == "repeat") {
      const size_t M = size_t(repeat_len.value_or(L_train));
      sample = repeat_tokens(sample, M, size_t(L_max) + 1);
    }
  }
  const size_t T = sample.size();
  const size_t N = size_t(score_last.value_or(std::min(L_train, L_min)));
  std::vector<Window> windows;
  std::vector<PplChunk> chunks;
  if (mode == "last" || mode == "repeat") {
    for (int64_t L : ctxs) windows.push_back(last_segment_window(T, size_t(L), N));   // throws on a short sample
  } else if (mode == "ppl") {
    chunks = ppl_chunks(T, size_t(ctxs[0]));
  }

  struct Trial {
    size_t ci, di;
    int64_t key;
    std::vector<int32_t> ids;
  };
  std::vector<Trial> trials_list;
  std::vector<size_t> prompt_max(ctxs.size() * depths.size(), 0);
  if (passkey) {
    auto count = [&](const std::string& t) { return tk->encode(t, true).size(); };
    for (size_t ci = 0; ci < ctxs.size(); ++ci) {
      if (ctxs[ci] <= int64_t(kPasskeyGen))
        throw Error(ErrorCode::invalid_argument, "--passkey needs every --ctx above " + std::to_string(kPasskeyGen) +
                                                     " (the answer is decoded inside the context)");
      for (size_t di = 0; di < depths.size(); ++di)
        for (size_t t = 0; t < size_t(trials); ++t) {
          const int64_t key = passkey_key(seed, ci, di, t);
          PasskeyPrompt p;
          try {
            p = build_passkey_prompt(key, depths[di], size_t(ctxs[ci]) - kPasskeyGen, count);
          } catch (const Error& e) {
            throw Error(e.code(), "--passkey at ctx " + std::to_string(ctxs[ci]) + ": " + e.what());
          }
          prompt_max[ci * depths.size() + di] = std::max(prompt_max[ci * depths.size() + di], p.n_tokens);
          trials_list.push_back({ci, di, key, tk->encode(p.text, true)});
        }
    }
  }

  // ---- the model ----
  Engine e = open_engine(model_dir, device, !tokens_file.empty() ? false : true);
  Model& model = *e.model;
  const uint32_t chunk_u = uint32_t(chunk);
  std::string dump;

  std::fprintf(stderr, "model: %s, L_train %lld, %s\n", model.dir().string().c_str(), (long long)L_train,
               wtype_name(model.weight_type()));
  if (verbose) std::fprintf(stderr, "device: %s\n%s\n", e.device->caps().summary().c_str(), model.config().describe().c_str());

  const bool bar_on = !verbose && mode != "ppl";
  uint64_t total = 0;
  if (mode == "last" || mode == "repeat") {
    for (int64_t L : ctxs) total += uint64_t(L);
  } else if (mode == "ppl") {
    for (const auto& c : chunks) total += c.n_ctx - 1;
  } else {
    for (const auto& t : trials_list) total += t.ids.size() + kPasskeyGen - 1;
  }
  total *= schemes.size();
  Progress bar("eval [tokens]", total * kTokenUnit, bar_on);
  const std::string model_name = model.dir().filename().string();

  if (mode == "last" || mode == "repeat") {
    const std::string protocol = mode == "last" ? "last-segment" : "repeat";
    std::fprintf(stderr, "%s: sample of %zu tokens%s, scoring the last %zu predictions (targets %zu..%zu) at every L\n",
                 protocol.c_str(), T,
                 mode == "repeat" ? (" (first " + std::to_string(repeat_len.value_or(L_train)) + " tokens repeated)").c_str() : "",
                 N, T - N, T - 1);
    std::vector<LossRow> rows;
    for (const auto& scheme : schemes) {
      for (size_t ci = 0; ci < ctxs.size(); ++ci) {
        const int64_t L = ctxs[ci];
        const Window& w = windows[ci];
        const SchemeRun run = preset_overrides(scheme, L, L_train, user);
        auto t0 = std::chrono::steady_clock::now();
        auto session = open_session(model, run, L, chunk_u, verbose);
        const int32_t* in = sample.data() + w.input_begin;
        prefill_plain(*session, in, w.n_prefix, size_t(chunk), bar);
        std::vector<size_t> positions;
        std::vector<double> lps;
        const bool want = !dump_path.empty();
        LossRow row;
        row.scheme = scheme;
        row.ctx = L;
        row.params = run.params;
        row.score = prefill_scored(*session, in + w.n_prefix, w.n_scored, in + w.n_prefix + 1,
                                   w.input_begin + w.n_prefix + 1, size_t(chunk), bar, want ? &positions : nullptr,
                                   want ? &lps : nullptr);
        row.seconds = seconds_since(t0);
        // Each cell as it completes: a long run's results so far survive an interruption.
        char line[256];
        std::snprintf(line, sizeof line, "%s @ %lld: mean NLL %.4f (ppl %.3f, top-1 %.1f%%) in %.1f s", scheme.c_str(),
                      (long long)L, row.score.mean_nll(), row.score.ppl(), 100.0 * row.score.accuracy(), row.seconds);
        bar.println(line);
        if (want) dump += logprob_block(scheme, L, positions, slice(sample, w.target_begin, w.n_scored), lps);
        rows.push_back(row);
      }
    }
    bar.finish();
    std::fputs(format == "json" ? loss_json(rows, protocol).c_str() : loss_markdown(rows, protocol, verbose).c_str(), stdout);
    if (!plot_path.empty()) {
      std::vector<PlotSeries> series;
      for (const auto& scheme : schemes) {
        PlotSeries s{scheme, {}};
        for (const auto& r : rows)
          if (r.scheme == scheme) s.points.emplace_back(double(r.ctx), r.score.mean_nll());
        series.push_back(s);
      }
      write_file(plot_path,
                 plot_svg(series, model_name + ": " + protocol + " loss of the last " + std::to_string(N) + " tokens",
                          "mean NLL (nats)"),
                 "plot");
    }
  } else if (mode == "ppl") {
    const size_t n_ctx = size_t(ctxs[0]);
    const std::optional<int32_t> bos = model.bos_id();
    std::fprintf(stderr, "perplexity: %zu tokens, %zu chunks of n_ctx %zu%s, scoring the second half of each\n", T,
                 chunks.size(), n_ctx, bos ? (", BOS " + std::to_string(*bos) + " first").c_str() : "");
    std::vector<PplRow> rows;
    for (const auto& scheme : schemes) {
      const SchemeRun run = preset_overrides(scheme, int64_t(n_ctx), L_train, user);
      auto t0 = std::chrono::steady_clock::now();
      auto session = open_session(model, run, int64_t(n_ctx), chunk_u, verbose);
      PplRow row;
      row.scheme = scheme;
      row.ctx = int64_t(n_ctx);
      row.params = run.params;
      row.n_chunks = chunks.size();
      std::vector<size_t> positions;
      std::vector<double> lps;
      std::vector<int32_t> targets_all;
      const bool want = !dump_path.empty();
      std::fprintf(stderr, "%s: ", scheme.c_str());
      for (size_t c = 0; c < chunks.size(); ++c) {
        const PplChunk& k = chunks[c];
        std::vector<int32_t> ids = slice(sample, k.begin, k.n_ctx);
        if (bos) ids[0] = *bos;
        session->reset();
        prefill_plain(*session, ids.data(), k.first, size_t(chunk), bar);
        row.score.add(prefill_scored(*session, ids.data() + k.first, k.n_scored, ids.data() + k.first + 1,
                                     k.begin + k.first + 1, size_t(chunk), bar, want ? &positions : nullptr,
                                     want ? &lps : nullptr));
        if (want)
          for (size_t r = 0; r < k.n_scored; ++r) targets_all.push_back(ids[k.first + 1 + r]);
        std::fprintf(stderr, "[%zu]%.4f,", c + 1, row.score.ppl());
        std::fflush(stderr);
      }
      row.seconds = seconds_since(t0);
      std::fprintf(stderr, "\nFinal estimate: PPL = %.4f +/- %.5f\n", row.score.ppl(), row.ppl_stderr());
      if (want) dump += logprob_block(scheme, int64_t(n_ctx), positions, targets_all, lps);
      rows.push_back(row);
    }
    std::fputs(format == "json" ? ppl_json(rows).c_str() : ppl_markdown(rows, verbose).c_str(), stdout);
    if (!plot_path.empty()) {
      std::vector<PlotSeries> series;
      for (const auto& r : rows) series.push_back({r.scheme, {{double(r.ctx), r.score.mean_nll()}}});
      write_file(plot_path, plot_svg(series, model_name + ": perplexity-mode loss", "mean NLL (nats)"), "plot");
    }
  } else {   // passkey
    const Tokenizer& tok = *tk;
    const auto& eos = model.eos_ids();
    std::vector<PasskeyCell> cells;
    std::fprintf(stderr, "passkey: %zu contexts x %zu depths x %lld trials, greedy %zu tokens\n", ctxs.size(),
                 depths.size(), (long long)trials, kPasskeyGen);
    for (const auto& scheme : schemes) {
      for (size_t ci = 0; ci < ctxs.size(); ++ci) {
        const int64_t L = ctxs[ci];
        const SchemeRun run = preset_overrides(scheme, L, L_train, user);
        auto session = open_session(model, run, L, chunk_u, verbose);
        for (size_t di = 0; di < depths.size(); ++di) {
          PasskeyCell cell;
          cell.scheme = scheme;
          cell.ctx = L;
          cell.depth = depths[di];
          cell.params = run.params;
          cell.prompt_tokens = prompt_max[ci * depths.size() + di];
          for (const Trial& t : trials_list) {
            if (t.ci != ci || t.di != di) continue;
            session->reset();
            prefill_plain(*session, t.ids.data(), t.ids.size(), size_t(chunk), bar);
            std::vector<int32_t> gen;
            int32_t next = argmax(session->logits());
            while (true) {
              gen.push_back(next);
              if (std::find(eos.begin(), eos.end(), next) != eos.end() || gen.size() >= kPasskeyGen) break;
              session->decode(next);
              bar.advance(kTokenUnit);
              next = argmax(session->logits());
            }
            bar.advance((kPasskeyGen - gen.size()) * kTokenUnit);
            const std::string answer = tok.decode(gen);
            const auto got = first_integer(answer);
            cell.trials += 1;
            cell.successes += got && *got == t.key ? 1 : 0;
            if (verbose) {
              std::string shown;   // one line, control characters escaped
              for (unsigned char ch : answer) {
                if (ch == '\n') shown += "\\n";
                else if (ch < 0x20 || ch == 0x7f) shown += '?';
                else shown += char(ch);
              }
              std::fprintf(stderr, "  ctx %lld depth %g key %lld: '%s' -> %s\n", (long long)L, depths[di],
                           (long long)t.key, shown.c_str(), got && *got == t.key ? "ok" : "miss");
            }
          }
          cells.push_back(cell);
        }
      }
    }
    bar.finish();
    std::fputs(format == "json" ? passkey_json(cells).c_str() : passkey_markdown(cells, verbose).c_str(), stdout);
    if (!plot_path.empty()) {
      std::vector<PlotSeries> series;
      for (const auto& scheme : schemes) {
        PlotSeries s{scheme, {}};
        for (int64_t L : ctxs) {
          size_t n = 0, k = 0;
          for (const auto& c : cells)
            if (c.scheme == scheme && c.ctx == L) n += c.trials, k += c.successes;
          s.points.emplace_back(double(L), n ? double(k) / double(n) : 0.0);
        }
        series.push_back(s);
      }
      write_file(plot_path, plot_svg(series, model_name + ": passkey retrieval", "accuracy (mean over depths)"), "plot");
    }
  }
  if (!dump_path.empty()) write_file(dump_path, dump, "log-prob dump");
  return 0;
}

}  // namespace reach::cli
