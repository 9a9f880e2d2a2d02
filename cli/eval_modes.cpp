// `reach eval` modes: last-segment (and repeat), ppl and passkey
// (docs/EXTRAPOLATION.md §7) over schemes × context lengths.
#include "cli/eval_modes.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "cli/eval_report.hpp"
#include "cli/options.hpp"
#include "runtime/session/sampler.hpp"
#include "runtime/session/session.hpp"

namespace reach::cli {

using namespace reach::eval;

namespace {

std::unique_ptr<Session> open_session(Model& model, const SchemeRun& run, int64_t L, const EvalOptions& o) {
  SessionOptions so;
  so.context = uint32_t(L);
  so.chunk = uint32_t(o.chunk);
  so.l_test = L;
  so.overrides = run.overrides;
  so.full_kv = o.full_kv;
  so.cache_type_k = o.cache_type_k;
  so.cache_type_v = o.cache_type_v;
  so.calibrate_keys = o.calibrate_keys;
  so.key_calib_file = o.key_calib_file;
  so.activations = o.activations;
  std::unique_ptr<Session> s;
  try {
    s = std::make_unique<Session>(model, so);
  } catch (const Error& e) {
    throw Error(e.code(),
                "scheme '" + run.name + "' at ctx " + std::to_string(L) + " (" + run.params + "): " + e.what());
  }
  if (o.verbose)
    std::fprintf(stderr, "scheme %s, ctx %lld: %s\n  %s\n  %s\n", run.name.c_str(), (long long)L, run.params.c_str(),
                 s->schemes().describe().c_str(), s->describe_kv_cache().c_str());
  return s;
}

// --kv-calib-save: the session's key calibration after its run (each session's in turn: the last stays).
void save_key_calibration(const Session& s, const EvalOptions& o) {
  if (!o.key_calib_save.empty()) s.save_key_calibration(o.key_calib_save);
}

// Feeds ids in pieces of at most `chunk` tokens (so the progress bar moves).
void prefill_plain(Session& s, const int32_t* ids, size_t n, size_t chunk, ProgressBar& bar) {
  for (size_t off = 0; off < n; off += chunk) {
    const size_t k = std::min(chunk, n - off);
    s.prefill({ids + off, k});
    bar.advance(k * kTokenUnit);
  }
}

// Feeds ids[0, n) with logits and scores row r against targets[r]; logits
// are held for one chunk at a time (chunk × vocab floats).
Score prefill_scored(Session& s, const int32_t* ids, size_t n, const int32_t* targets, size_t first_position,
                     size_t chunk, ProgressBar& bar, std::vector<size_t>* positions, std::vector<double>* logprobs) {
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

std::string model_name(const Model& model) { return platform::path_to_utf8(model.dir().filename()); }

// One (scheme, context) cell of the last-segment protocol.
LossRow last_segment_cell(Model& model, const EvalPlan& plan, const std::string& scheme, size_t ci, ProgressBar& bar,
                          std::string* dump) {
  const EvalOptions& o = plan.opt;
  const int64_t L = plan.ctxs[ci];
  const Window& w = plan.windows[ci];
  const SchemeRun run = preset_overrides(scheme, L, plan.L_train, o.user);
  auto t0 = std::chrono::steady_clock::now();
  auto session = open_session(model, run, L, o);
  const int32_t* in = plan.sample.data() + w.input_begin;
  prefill_plain(*session, in, w.n_prefix, size_t(o.chunk), bar);
  std::vector<size_t> positions;
  std::vector<double> lps;
  const bool want = !o.dump_path.empty();
  LossRow row;
  row.scheme = scheme;
  row.ctx = L;
  row.params = run.params;
  row.score = prefill_scored(*session, in + w.n_prefix, w.n_scored, in + w.n_prefix + 1, w.input_begin + w.n_prefix + 1,
                             size_t(o.chunk), bar, want ? &positions : nullptr, want ? &lps : nullptr);
  row.seconds = seconds_since(t0);
  save_key_calibration(*session, o);
  // Each cell as it completes: a long run's results so far survive an interruption.
  char line[256];
  std::snprintf(line, sizeof line, "%s @ %lld: mean NLL %.4f (ppl %.3f, top-1 %.1f%%) in %.1f s", scheme.c_str(),
                (long long)L, row.score.mean_nll(), row.score.ppl(), 100.0 * row.score.accuracy(), row.seconds);
  bar.println(line);
  if (want) *dump += logprob_block(scheme, L, positions, slice(plan.sample, w.target_begin, w.n_scored), lps);
  return row;
}

// Greedy answer to one passkey prompt: at most kPasskeyGen tokens, up to an end-of-sequence id.
std::string passkey_answer(Session& session, const Model& model, const PasskeyTrial& t, size_t chunk, ProgressBar& bar,
                           const Tokenizer& tok) {
  const auto& eos = model.eos_ids();
  session.reset();
  prefill_plain(session, t.ids.data(), t.ids.size(), chunk, bar);
  std::vector<int32_t> gen;
  int32_t next = argmax(session.logits());
  while (true) {
    gen.push_back(next);
    if (std::find(eos.begin(), eos.end(), next) != eos.end() || gen.size() >= kPasskeyGen) break;
    session.decode(next);
    bar.advance(kTokenUnit);
    next = argmax(session.logits());
  }
  bar.advance((kPasskeyGen - gen.size()) * kTokenUnit);
  return tok.decode(gen);
}

// One line, control characters escaped.
std::string printable(const std::string& answer) {
  std::string shown;
  for (unsigned char ch : answer) {
    if (ch == '\n') shown += "\\n";
    else if (ch < 0x20 || ch == 0x7f) shown += '?';
    else shown += char(ch);
  }
  return shown;
}

}  // namespace

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(platform::path_from_utf8(path), std::ios::binary);
  if (!f) throw Error(ErrorCode::io, std::string("cannot write ") + what + " '" + path + "'");
  f << text;
  if (!f) throw Error(ErrorCode::io, std::string("error writing ") + what + " '" + path + "'");
}

void eval_last_segment(Model& model, const EvalPlan& plan, ProgressBar& bar, std::string* dump) {
  const EvalOptions& o = plan.opt;
  const bool repeat = o.mode == "repeat";
  const std::string protocol = repeat ? "repeat" : "last-segment";
  const size_t T = plan.sample.size(), N = plan.N;
  const std::string repeated =
      repeat ? " (first " + std::to_string(o.repeat_len.value_or(plan.L_train)) + " tokens repeated)" : "";
  std::fprintf(stderr, "%s: sample of %zu tokens%s, scoring the last %zu predictions (targets %zu..%zu) at every L\n",
               protocol.c_str(), T, repeated.c_str(), N, T - N, T - 1);
  std::vector<LossRow> rows;
  for (const auto& scheme : plan.schemes)
    for (size_t ci = 0; ci < plan.ctxs.size(); ++ci)
      rows.push_back(last_segment_cell(model, plan, scheme, ci, bar, dump));
  bar.finish();
  std::fputs(o.format == "json" ? loss_json(rows, protocol).c_str() : loss_markdown(rows, protocol, o.verbose).c_str(),
             stdout);
  if (o.plot_path.empty()) return;
  std::vector<PlotSeries> series;
  for (const auto& scheme : plan.schemes) {
    PlotSeries s{scheme, {}};
    for (const auto& r : rows)
      if (r.scheme == scheme) s.points.emplace_back(double(r.ctx), r.score.mean_nll());
    series.push_back(s);
  }
  const std::string title = model_name(model) + ": " + protocol + " loss of the last " + std::to_string(N) + " tokens";
  write_file(o.plot_path, plot_svg(series, title, "mean NLL (nats)"), "plot");
}

void eval_ppl(Model& model, const EvalPlan& plan, ProgressBar& bar, std::string* dump) {
  const EvalOptions& o = plan.opt;
  const size_t n_ctx = size_t(plan.ctxs[0]);
  const PplBos& bos = plan.bos;
  const std::string bos_note = bos.add ? "BOS " + std::to_string(bos.id) + " replaces token 0 of each chunk"
                                       : "no BOS: token 0 of each chunk kept";
  std::fprintf(stderr,
               "perplexity: %zu tokens, %zu of %zu chunks of n_ctx %zu, scoring tokens %zu..%zu of each; %s (%s)\n",
               plan.sample.size(), plan.chunks.size(), plan.sample.size() / n_ctx, n_ctx, n_ctx / 2 + 1, n_ctx - 1,
               bos_note.c_str(), bos.source.c_str());
  std::vector<PplRow> rows;
  for (const auto& scheme : plan.schemes) {
    const SchemeRun run = preset_overrides(scheme, int64_t(n_ctx), plan.L_train, o.user);
    auto t0 = std::chrono::steady_clock::now();
    auto session = open_session(model, run, int64_t(n_ctx), o);
    PplRow row;
    row.scheme = scheme;
    row.ctx = int64_t(n_ctx);
    row.params = run.params;
    row.n_chunks = plan.chunks.size();
    std::vector<size_t> positions;
    std::vector<double> lps;
    std::vector<int32_t> targets_all;
    const bool want = !o.dump_path.empty();
    std::fprintf(stderr, "%s: ", scheme.c_str());
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const PplChunk& k = plan.chunks[c];
      std::vector<int32_t> ids = slice(plan.sample, k.begin, k.n_ctx);
      if (bos.add) ids[0] = bos.id;
      session->reset();
      prefill_plain(*session, ids.data(), k.first, size_t(o.chunk), bar);
      row.score.add(prefill_scored(*session, ids.data() + k.first, k.n_scored, ids.data() + k.first + 1,
                                   k.begin + k.first + 1, size_t(o.chunk), bar, want ? &positions : nullptr,
                                   want ? &lps : nullptr));
      if (want)
        for (size_t r = 0; r < k.n_scored; ++r) targets_all.push_back(ids[k.first + 1 + r]);
      std::fprintf(stderr, "[%zu]%.4f,", c + 1, row.score.ppl());
      std::fflush(stderr);
    }
    row.seconds = seconds_since(t0);
    save_key_calibration(*session, o);
    std::fprintf(stderr, "\nFinal estimate: PPL = %.4f +/- %.5f\n", row.score.ppl(), row.ppl_stderr());
    if (want) *dump += logprob_block(scheme, int64_t(n_ctx), positions, targets_all, lps);
    rows.push_back(row);
  }
  std::fputs(o.format == "json" ? ppl_json(rows).c_str() : ppl_markdown(rows, o.verbose).c_str(), stdout);
  if (o.plot_path.empty()) return;
  std::vector<PlotSeries> series;
  for (const auto& r : rows) series.push_back({r.scheme, {{double(r.ctx), r.score.mean_nll()}}});
  write_file(o.plot_path, plot_svg(series, model_name(model) + ": perplexity-mode loss", "mean NLL (nats)"), "plot");
}

void eval_passkey(Model& model, const EvalPlan& plan, ProgressBar& bar) {
  const EvalOptions& o = plan.opt;
  std::vector<PasskeyCell> cells;
  std::fprintf(stderr, "passkey: %zu contexts x %zu depths x %lld trials, greedy %zu tokens\n", plan.ctxs.size(),
               plan.depths.size(), (long long)o.trials, kPasskeyGen);
  for (const auto& scheme : plan.schemes) {
    for (size_t ci = 0; ci < plan.ctxs.size(); ++ci) {
      const int64_t L = plan.ctxs[ci];
      const SchemeRun run = preset_overrides(scheme, L, plan.L_train, o.user);
      auto session = open_session(model, run, L, o);
      for (size_t di = 0; di < plan.depths.size(); ++di) {
        PasskeyCell cell;
        cell.scheme = scheme;
        cell.ctx = L;
        cell.depth = plan.depths[di];
        cell.params = run.params;
        cell.prompt_tokens = plan.prompt_max[ci * plan.depths.size() + di];
        for (const PasskeyTrial& t : plan.passkey_trials) {
          if (t.ci != ci || t.di != di) continue;
          const std::string answer = passkey_answer(*session, model, t, size_t(o.chunk), bar, *plan.tokenizer);
          const auto got = first_integer(answer);
          cell.trials += 1;
          cell.successes += got && *got == t.key ? 1 : 0;
          if (o.verbose)
            std::fprintf(stderr, "  ctx %lld depth %g key %lld: '%s' -> %s\n", (long long)L, plan.depths[di],
                         (long long)t.key, printable(answer).c_str(), got && *got == t.key ? "ok" : "miss");
        }
        cells.push_back(cell);
      }
    }
  }
  bar.finish();
  std::fputs(o.format == "json" ? passkey_json(cells).c_str() : passkey_markdown(cells, o.verbose).c_str(), stdout);
  if (o.plot_path.empty()) return;
  std::vector<PlotSeries> series;
  for (const auto& scheme : plan.schemes) {
    PlotSeries s{scheme, {}};
    for (int64_t L : plan.ctxs) {
      size_t n = 0, k = 0;
      for (const auto& c : cells)
        if (c.scheme == scheme && c.ctx == L) n += c.trials, k += c.successes;
      s.points.emplace_back(double(L), n ? double(k) / double(n) : 0.0);
    }
    series.push_back(s);
  }
  write_file(o.plot_path, plot_svg(series, model_name(model) + ": passkey retrieval", "accuracy (mean over depths)"),
             "plot");
}

}  // namespace reach::cli
