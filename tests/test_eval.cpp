// `reach eval`: the pure protocol functions (cli/eval_protocols.*,
// cli/eval_report.*), the CLI's progress line, and the real binary on a tiny model against the
// float64 NumPy reference (tools/reference_forward.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "cli/eval_protocols.hpp"
#include "cli/eval_report.hpp"
#include "cli/progress_bar.hpp"
#include "runtime/config/position_schemes.hpp"
#include "tests/support/data.hpp"
#include "tests/support/files.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::cli;
using namespace reach::eval;
using namespace reach::test;
namespace fs = std::filesystem;

namespace {

// L_train of the tiny model = max_position_embeddings = 32.
const char* kTiny = "--dtype f32 --hidden 64 --intermediate 160 --layers 2 --heads 4 --kv-heads 2 --vocab 300 "
                    "--max-pos 32 --seed 3";

void write_ids(const fs::path& p, const std::vector<int32_t>& ids) {
  std::ofstream f(p);
  for (size_t i = 0; i < ids.size(); ++i) f << ids[i] << ((i + 1) % 16 ? ' ' : '\n');
}

std::string reach_bin() { return (build_root() / "cli" / "reach").string(); }

// Runs `reach eval ARGS`, stdout to `out`; returns stderr (run_command fails the test on rc != 0).  With an
// f32 KV cache (the CLI's default is f16): these cases check the protocols against the float64 reference.
std::string run_eval(const std::string& args, const fs::path& out) {
  return run_command("(REACH_PROGRESS=0 " + reach_bin() + " eval -ctk f32 -ctv f32 " + args + " > " + out.string() +
                     ")");
}

// −log softmax(row)[t] computed independently (float64, no shared code).
double ref_nll(const float* row, size_t V, int32_t t) {
  double mx = row[0];
  for (size_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
  double s = 0;
  for (size_t v = 0; v < V; ++v) s += std::exp(double(row[v]) - mx);
  return -(double(row[t]) - mx - std::log(s));
}

struct DumpLine {
  size_t pos;
  int32_t target;
  double lp;
};
// "# scheme=S ctx=L" -> lines
std::map<std::string, std::vector<DumpLine>> parse_dump(const std::string& text) {
  std::map<std::string, std::vector<DumpLine>> out;
  std::istringstream in(text);
  std::string line, key;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) {
      key = line.substr(2);
      out[key];
      continue;
    }
    std::istringstream l(line);
    DumpLine d{};
    std::string a, b, c;
    REQUIRE(std::getline(l, a, '\t'));
    REQUIRE(std::getline(l, b, '\t'));
    REQUIRE(std::getline(l, c));
    d.pos = std::stoul(a);
    d.target = std::stoi(b);
    d.lp = std::stod(c);
    REQUIRE_MESSAGE(!key.empty(), "a dump line before any '# scheme=' header");
    out[key].push_back(d);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// (1) pure protocol functions

TEST_CASE("eval: last-segment windows score the same targets at every L; inputs end right before the last target") {
  const auto sample = random_ids(200, 1000, 7);
  const size_t T = sample.size(), N = 16;
  std::vector<int32_t> first_targets;
  for (size_t L : {16, 17, 64, 100, 199}) {
    const Window w = last_segment_window(T, L, N);
    CHECK(w.length == L);
    CHECK(w.input_begin + L == T - 1);              // inputs tokens[T−L−1 : T−1]
    CHECK(w.n_prefix + w.n_scored == L);
    CHECK(w.n_scored == N);
    CHECK(w.target_begin == T - N);
    // Row i predicts tokens[input_begin + i + 1]; the scored rows are the last N.
    std::vector<int32_t> targets;
    for (size_t r = w.n_prefix; r < L; ++r) targets.push_back(sample[w.input_begin + r + 1]);
    CHECK(targets.back() == sample[T - 1]);
    if (first_targets.empty()) first_targets = targets;
    CHECK(targets == first_targets);
  }
  CHECK_THROWS_AS(last_segment_window(T, 200, N), Error);   // needs L + 1 tokens
  CHECK_NOTHROW(last_segment_window(T, 199, N));
  CHECK_THROWS_AS(last_segment_window(T, 8, N), Error);     // N > L
  CHECK_THROWS_AS(last_segment_window(T, 8, 0), Error);
  try {
    last_segment_window(100, 128, 8);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("needs at least 129") != std::string::npos);
  }
}

TEST_CASE("eval: ppl chunks follow llama-perplexity; repeat construction") {
  const auto c = ppl_chunks(1000, 128);
  REQUIRE(c.size() == 7);
  CHECK(c[1].begin == 128);
  CHECK(c[0].first == 64);
  CHECK(c[0].n_scored == 63);   // rows 64..126 predict tokens 65..127
  CHECK_THROWS_AS(ppl_chunks(255, 128), Error);
  CHECK_NOTHROW(ppl_chunks(256, 128));

  const std::vector<int32_t> t = {5, 6, 7, 8, 9};
  CHECK(repeat_tokens(t, 3, 8) == std::vector<int32_t>{5, 6, 7, 5, 6, 7, 5, 6});
  CHECK_THROWS_AS(repeat_tokens(t, 6, 8), Error);
  CHECK_THROWS_AS(repeat_tokens(t, 0, 8), Error);
}

TEST_CASE("eval: score_rows is -log softmax in double, accuracy is argmax == target") {
  const size_t V = 50, R = 9;
  const auto logits = random_floats(V * R, 11, -8.0f, 8.0f);
  std::vector<int32_t> targets = random_ids(R, int32_t(V), 12);
  // Make row 0's target its argmax.
  targets[0] = int32_t(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
  std::vector<double> lps;
  const Score s = score_rows(logits.data(), R, V, targets.data(), &lps);
  REQUIRE(s.n == R);
  double want = 0;
  size_t correct = 0;
  for (size_t r = 0; r < R; ++r) {
    const double nll = ref_nll(logits.data() + r * V, V, targets[r]);
    CHECK(lps[r] == doctest::Approx(-nll).epsilon(1e-12));
    want += nll;
    const auto best = size_t(std::max_element(logits.begin() + r * V, logits.begin() + (r + 1) * V) - logits.begin()) - r * V;
    correct += best == size_t(targets[r]);
  }
  CHECK(s.mean_nll() == doctest::Approx(want / R).epsilon(1e-12));
  CHECK(s.ppl() == doctest::Approx(std::exp(want / R)).epsilon(1e-12));
  CHECK(s.correct == correct);
  CHECK(s.correct >= 1);
  // Large logits stay finite (log-sum-exp).
  std::vector<float> big(V, 1e4f);
  big[3] = 1e4f + 1;
  const int32_t t3 = 3;
  CHECK(std::isfinite(score_rows(big.data(), 1, V, &t3).nll_sum));
  const int32_t bad = int32_t(V);
  CHECK_THROWS_AS(score_rows(big.data(), 1, V, &bad), Error);
}

TEST_CASE("eval: scheme presets resolve at, below and far beyond L_train") {
  const nlohmann::json cj = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 64},
                             {"intermediate_size", 160}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                             {"num_key_value_heads", 2}, {"vocab_size", 300}, {"max_position_embeddings", 512},
                             {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}};
  const ModelConfig base = parse_model_config(cj, "test config.json");
  const int64_t Lt = training_length(base);
  REQUIRE(Lt == 512);
  SchemeOverrides user;
  for (const char* p : {"default", "linear", "pi", "ntk", "dynamic", "yarn", "rerope", "leaky_rerope", "self_extend",
                        "logn"}) {
    for (int64_t L : {256, 512, 1536, 8192}) {
      const SchemeRun run = preset_overrides(p, L, Lt, user);
      INFO(p << " at L " << L << ": " << run.params);
      ModelConfig cfg = base;
      REQUIRE_NOTHROW(apply_overrides(cfg, run.overrides));
      REQUIRE_NOTHROW(resolve_schemes(cfg, uint32_t(L), L));
      if (std::string(p) == "yarn") {
        CHECK(cfg.rope.type == RopeType::yarn);
        CHECK(cfg.rope.factor == doctest::Approx(std::max(1.0, double(L) / 512)));
        CHECK(cfg.rope.original_max_position == 512);
      }
      if (std::string(p) == "self_extend") {   // the grouped positions cover L
        CHECK(cfg.rope.window % cfg.rope.group == 0);
        CHECK((Lt - cfg.rope.window) * cfg.rope.group + cfg.rope.window >= L);
      }
      if (std::string(p) == "leaky_rerope") {   // the largest effective distance stays within L_train
        CHECK(double(cfg.rope.window) + double(L - cfg.rope.window) / cfg.rope.leaky_k <= double(Lt));
      }
      if (std::string(p) == "logn") CHECK(cfg.attn.logn_train_len == 512);
      if (std::string(p) == "default") CHECK(run.params == "config.json");
    }
  }
  // Knobs from the command line are the presets' parameters.
  user.rerope_window = 100;
  user.leaky_k = 4;
  user.logn = 300;
  const SchemeRun lr = preset_overrides("leaky-rerope", 2048, Lt, user);
  CHECK(lr.overrides.rerope_window == 100);
  CHECK(lr.overrides.leaky_k == 4.0);
  CHECK(lr.overrides.logn == 300);   // non-rope flags carry over
  CHECK(!preset_overrides("yarn", 2048, Lt, user).overrides.rerope_window);
  CHECK_THROWS_AS(normalize_preset("bogus"), Error);
}

// ---------------------------------------------------------------------------
// (5) passkey

TEST_CASE("eval: passkey answers parse the first integer") {
  CHECK(first_integer(" 12345. Remember") == 12345);
  CHECK(first_integer("The pass key is 42 and 7") == 42);
  CHECK(first_integer("\n\n007") == 7);
  CHECK(!first_integer("no digits here").has_value());
  CHECK(!first_integer("").has_value());
  for (size_t t = 0; t < 200; ++t) {
    const int64_t k = passkey_key(1, t % 3, t % 5, t);
    CHECK(k >= 1);
    CHECK(k <= 50000);
  }
  CHECK(passkey_key(0, 0, 0, 0) != passkey_key(0, 0, 0, 1));
}

TEST_CASE("eval: passkey prompt holds the key once at the requested depth and fits the budget") {
  auto count = [](const std::string& s) { return s.size() / 4; };   // a stand-in tokenizer
  const std::string filler = kPasskeyFiller;
  for (double depth : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const int64_t key = 31337;
    const PasskeyPrompt p = build_passkey_prompt(key, depth, 1000, count);
    INFO("depth " << depth << ", " << p.n_filler << " fillers");
    CHECK(p.n_tokens <= 1000);
    CHECK(count(passkey_text(key, p.n_filler + 1, depth)) > 1000);   // the largest that fits
    REQUIRE(p.n_filler > 10);
    const std::string sentence = passkey_sentence(key);
    const size_t at = p.text.find(sentence);
    REQUIRE(at != std::string::npos);
    CHECK(at == p.key_offset);
    CHECK(p.text.find(sentence, at + 1) == std::string::npos);                 // once
    CHECK(p.text.find("31337") == at + std::string("The pass key is ").size());  // key only in the sentence
    size_t before = 0;
    for (size_t q = p.text.find(filler); q != std::string::npos && q < at; q = p.text.find(filler, q + 1)) ++before;
    CHECK(before == size_t(std::llround(depth * double(p.n_filler))));
    CHECK(p.text.rfind(kPasskeyIntro, 0) == 0);
    CHECK(p.text.size() >= std::string(kPasskeyQuestion).size());
    CHECK(p.text.substr(p.text.size() - std::string(kPasskeyQuestion).size()) == kPasskeyQuestion);
  }
  CHECK_THROWS_AS(build_passkey_prompt(1, 0.5, 10, count), Error);
}

// ---------------------------------------------------------------------------
// (3) JSON, (4) SVG as pure output

TEST_CASE("eval: report builders: json fields, logprob block, SVG") {
  LossRow r;
  r.scheme = "yarn";
  r.ctx = 1024;
  r.params = "--rope-scaling yarn --rope-factor 2 --original-ctx 512";
  r.score.nll_sum = 3.0;
  r.score.n = 2;
  r.score.correct = 1;
  const auto j = nlohmann::json::parse(loss_json({r}, "last-segment"));
  REQUIRE(j.size() == 1);
  CHECK(j[0]["scheme"] == "yarn");
  CHECK(j[0]["ctx"] == 1024);
  CHECK(j[0]["nll"].get<double>() == doctest::Approx(1.5));
  CHECK(j[0]["ppl"].get<double>() == doctest::Approx(std::exp(1.5)));
  CHECK(j[0]["accuracy"].get<double>() == doctest::Approx(0.5));
  CHECK(j[0]["n_scored"] == 2);
  CHECK(loss_markdown({r}, "last-segment", false).find("| yarn | 1024 | 2 | 1.5000 |") != std::string::npos);

  CHECK(logprob_block("default", 64, {10, 11}, {5, 6}, {-1.5, -0.25}) == "# scheme=default ctx=64\n10\t5\t-1.5\n11\t6\t-0.25\n");

  const std::string svg = plot_svg({{"a<b", {{512, 2.0}, {1024, 1.8}}}, {"c", {{512, 2.5}, {1024, NAN}}}}, "t & u", "NLL");
  CHECK(svg.find("data-scheme=\"a&lt;b\"") != std::string::npos);
  CHECK(svg.find("t &amp; u") != std::string::npos);
  // Every point lies inside the plot area (the y ticks cover the data), here with
  // a maximum just above a round tick.
  const std::string s2 = plot_svg({{"a", {{64, 9.9149}, {128, 10.2147}, {256, 10.0}}}}, "t", "NLL");
  const size_t p0 = s2.find("points=\"") + 8;
  std::istringstream pts(s2.substr(p0, s2.find('"', p0) - p0));
  std::string xy;
  size_t n = 0;
  while (pts >> xy) {
    const double y = std::stod(xy.substr(xy.find(',') + 1));
    CHECK(y >= 48.0 - 1e-6);    // plot top
    CHECK(y <= 400.0 + 1e-6);   // plot bottom (460 - 60)
    ++n;
  }
  CHECK(n == 3);
}

// ---------------------------------------------------------------------------
// (2)-(4) the real binary against the reference

TEST_CASE("eval binary: last-segment NLL, dump and json equal the reference's log-softmax") {
  const fs::path model = tiny_model(kTiny);
  const fs::path dir = temp_dir("eval-last");
  const auto sample = random_ids(80, 300, 21);
  const size_t T = sample.size(), N = 8;
  write_ids(dir / "ids.txt", sample);
  const std::string err =
      run_eval("-m " + model.string() + " --tokens " + (dir / "ids.txt").string() +
                   " --ctx 16,32,64 --score-last 8 --schemes default,yarn,dynamic,rerope,leaky_rerope,self_extend,logn "
                   "-o json --dump-logprobs " +
                   (dir / "lp.tsv").string() + " --chunk 5",
               dir / "out.json");
  const auto j = nlohmann::json::parse(read_text(dir / "out.json"));
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 7 * 3);
  const auto dump = parse_dump(read_text(dir / "lp.tsv"));
  CHECK(dump.size() == 7 * 3);
  for (const auto& row : j) {
    for (const char* k : {"scheme", "ctx", "nll", "ppl", "accuracy", "n_scored"}) REQUIRE_MESSAGE(row.contains(k), k);
    const std::string scheme = row["scheme"];
    const size_t L = row["ctx"];
    const std::string params = row["params"];
    INFO("scheme " << scheme << " ctx " << L << " (" << params << ")");
    CHECK(row["n_scored"] == N);
    // The window the protocol reads, through the reference with the same scheme flags.
    const std::vector<int32_t> window(sample.end() - ptrdiff_t(L) - 1, sample.end() - 1);
    const Reference ref = reference_forward(model, window, 0, params == "config.json" ? "" : params);
    REQUIRE(ref.rows == L);
    double nll = 0, scale = 0;
    size_t correct = 0;
    std::vector<double> lps;
    for (size_t r = L - N; r < L; ++r) {
      const float* lrow = ref.logits.data() + r * ref.vocab;
      const int32_t t = sample[T - L + r];
      const double x = ref_nll(lrow, ref.vocab, t);
      nll += x;
      lps.push_back(-x);
      for (size_t v = 0; v < ref.vocab; ++v) scale = std::max(scale, double(std::fabs(lrow[v])));
      correct += size_t(std::max_element(lrow, lrow + ref.vocab) - lrow) == size_t(t);
    }
    nll /= double(N);
    const double tol = 1e-3 * scale;
    CHECK(std::fabs(row["nll"].get<double>() - nll) <= tol);
    CHECK(row["ppl"].get<double>() == doctest::Approx(std::exp(row["nll"].get<double>())));
    CHECK(std::fabs(row["accuracy"].get<double>() - double(correct) / N) <= 1.0 / N + 1e-9);   // argmax ties may flip
    const auto it = dump.find("scheme=" + scheme + " ctx=" + std::to_string(L));
    REQUIRE(it != dump.end());
    REQUIRE(it->second.size() == N);
    for (size_t i = 0; i < N; ++i) {
      CHECK(it->second[i].pos == T - N + i);
      CHECK(it->second[i].target == sample[T - N + i]);
      CHECK(std::fabs(it->second[i].lp - lps[i]) <= tol);
    }
  }
  // The same targets at every L: the dump blocks list the same (position, target) pairs.
  const auto& a = dump.begin()->second;
  for (const auto& [k, v] : dump)
    for (size_t i = 0; i < N; ++i) CHECK(v[i].pos == a[i].pos);

  // A sample that is too short is a clear error, before any GPU work.
  const std::string cmd = "(REACH_PROGRESS=0 " + reach_bin() + " eval -m " + model.string() + " --tokens " +
                          (dir / "ids.txt").string() + " --ctx 80 --score-last 8 > /dev/null) 2>&1; echo rc=$?";
  const std::string out = run_command(cmd);
  CHECK(out.find("needs at least 81") != std::string::npos);
  CHECK(out.find("rc=1") != std::string::npos);
}

TEST_CASE("eval binary: --mode ppl replaces the first token by BOS and scores the second half") {
  const fs::path model = tiny_model(kTiny);
  const fs::path dir = temp_dir("eval-ppl");
  const auto sample = random_ids(70, 300, 22);
  write_ids(dir / "ids.txt", sample);
  const std::string err = run_eval("-m " + model.string() + " --tokens " + (dir / "ids.txt").string() +
                                       " --mode ppl --ctx 16 -o json --dump-logprobs " + (dir / "lp.tsv").string(),
                                   dir / "out.json");
  CHECK(err.find("[4]") != std::string::npos);
  CHECK(err.find("Final estimate: PPL = ") != std::string::npos);
  const auto j = nlohmann::json::parse(read_text(dir / "out.json"));
  REQUIRE(j.size() == 1);
  CHECK(j[0]["n_chunks"] == 4);
  CHECK(j[0]["n_scored"] == 4 * 7);
  const auto dump = parse_dump(read_text(dir / "lp.tsv"));
  REQUIRE(dump.count("scheme=default ctx=16"));
  const auto& lines = dump.at("scheme=default ctx=16");
  REQUIRE(lines.size() == 28);
  double sum = 0;
  for (const auto& l : lines) sum -= l.lp;
  CHECK(j[0]["nll"].get<double>() == doctest::Approx(sum / 28).epsilon(1e-6));
  // Chunk 1 (tokens 16..31) through the reference, with BOS first when the model has one.
  const auto cfg = nlohmann::json::parse(read_text(model / "config.json"));
  std::vector<int32_t> chunk(sample.begin() + 16, sample.begin() + 32);
  if (cfg.contains("bos_token_id") && cfg["bos_token_id"].is_number()) chunk[0] = cfg["bos_token_id"].get<int32_t>();
  const Reference ref = reference_forward(model, chunk);
  for (size_t r = 8; r < 15; ++r) {
    const DumpLine& d = lines[7 + (r - 8)];
    CHECK(d.pos == 16 + r + 1);
    CHECK(d.target == sample[16 + r + 1]);
    const float* row = ref.logits.data() + r * ref.vocab;
    float scale = 0;
    for (size_t v = 0; v < ref.vocab; ++v) scale = std::max(scale, std::fabs(row[v]));
    CHECK(std::fabs(d.lp + ref_nll(row, ref.vocab, d.target)) <= 1e-3 * scale);
  }
}

TEST_CASE("eval binary: markdown table, repeat mode and an SVG with one series per scheme") {
  const fs::path model = tiny_model(kTiny);
  const fs::path dir = temp_dir("eval-svg");
  write_ids(dir / "ids.txt", random_ids(40, 300, 23));
  const std::vector<std::string> schemes = {"default", "pi", "ntk", "yarn", "rerope", "leaky_rerope", "self_extend", "logn"};
  std::string list;
  for (const auto& s : schemes) list += (list.empty() ? "" : ",") + s;
  run_eval("-m " + model.string() + " --tokens " + (dir / "ids.txt").string() + " --repeat --repeat-len 24 --ctx 16,32,64 " +
               "--score-last 16 --schemes " + list + " --plot " + (dir / "plot.svg").string(),
           dir / "out.md");
  const std::string md = read_text(dir / "out.md");
  CHECK(md.find("| scheme | ctx | scored | NLL | PPL | top-1 acc |") != std::string::npos);
  for (const auto& s : schemes) CHECK(md.find("| " + s + " | 64 | 16 |") != std::string::npos);
  const std::string py =
      "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
      "s = [e for e in r.iter() if e.tag.endswith('polyline') and e.get('class') == 'series']; "
      "print('series', len(s), ','.join(e.get('data-scheme') for e in s)); "
      "print('points', ' '.join(str(len(e.get('points').split())) for e in s)); "
      "print('title', sum(1 for e in r.iter() if e.get('class') == 'title'))";
  const std::string out = run_command(reach::test::python() + " -c \"" + py + "\" " + (dir / "plot.svg").string());
  CHECK(out.find("series " + std::to_string(schemes.size()) + " " + list) != std::string::npos);
  CHECK(out.find("points 3 3 3 3 3 3 3 3") != std::string::npos);
  CHECK(out.find("title 1") != std::string::npos);
}

TEST_CASE("progress bar: line format and quiet when disabled") {
  auto has = [](const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; };
  const std::string line = ProgressBar::format_line("upload", 512ull << 20, 1024ull << 20, 2.0);
  CHECK_MESSAGE(has(line, "upload"), line);
  CHECK_MESSAGE(has(line, " 50%"), line);
  CHECK_MESSAGE(has(line, "512.0/1024.0 MiB"), line);
  CHECK_MESSAGE(has(line, "256.0 MiB/s"), line);
  CHECK_MESSAGE(has(line, "ETA 2s"), line);
  const std::string done = ProgressBar::format_line("upload", 10, 10, 1.0);
  CHECK_MESSAGE(has(done, "100%"), done);
  CHECK(!has(done, "ETA"));
  CHECK(has(ProgressBar::format_line("x", 0, 0, 0.0), "100%"));   // empty total: no division by zero

  ProgressBar off("quiet", 100, false);
  CHECK_FALSE(off.active());
  off.advance(60);
  off.advance(40);
  CHECK(off.done() == 100);
  // Driven by a library ProgressFn: absolute positions, never cancels.
  ProgressFn fn = off.callback();
  CHECK(fn(150, 300));
  CHECK(off.done() == 150);
  off.finish();
  off.finish();   // idempotent
}
