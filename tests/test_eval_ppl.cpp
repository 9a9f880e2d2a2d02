// `reach eval --mode ppl` against llama-perplexity's protocol (tools/perplexity/perplexity.cpp of
// llama.cpp), computed here independently: chunks cut from the sample, the float64 NumPy reference
// (tools/reference_forward.py) run on each, the scored half's NLL, the running [i] values, the final
// PPL and its ±.  Covers a tokenizer that adds a BOS, one that does not (token 0 kept), the
// tokenizer_config.json override, a model folder without tokenizer.json, and --chunks.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include "base/error.hpp"
#include "cli/eval_protocols.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/support/data.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* kTiny = "--dtype f32 --hidden 64 --intermediate 160 --layers 2 --heads 4 --kv-heads 2 --vocab 300 "
                    "--max-pos 32 --seed 5";
constexpr size_t kCtx = 16;

// Plain English the tiny BPE tokenizer (trained on similar text) cuts into ~1.5 characters per token.
const char* kText =
    "In the beginning the model read a long text, one chunk after another, and guessed every next token. "
    "Each chunk starts again from nothing; the first half is context, the second half is scored.";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read " << p);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  REQUIRE_MESSAGE(f.good(), "cannot write " << p);
}

// A copy of the tiny model whose tokenizer.json has `post_processor` (unchanged when absent), plus
// tokenizer_config.json when given; drop_tokenizer removes tokenizer.json.
fs::path variant(const fs::path& base, const std::string& name, const std::optional<json>& post_processor,
                 const std::optional<json>& tokenizer_config, bool drop_tokenizer = false) {
  const fs::path dir = temp_dir("ppl-" + name);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(base / f, dir / f, fs::copy_options::overwrite_existing);
  json tok = json::parse(slurp(base / "tokenizer.json"));
  if (post_processor) tok["post_processor"] = *post_processor;
  if (!drop_tokenizer) spit(dir / "tokenizer.json", tok.dump());
  if (tokenizer_config) spit(dir / "tokenizer_config.json", tokenizer_config->dump());
  return dir;
}

// What llama-perplexity computes, from the reference's logits (no reach code involved).
struct Expected {
  std::vector<double> running;   // exp(mean NLL) after each chunk
  double ppl = 0, pm = 0, nll = 0;
  size_t n = 0;
  std::vector<size_t> positions;   // index of each scored target in the sample
  std::vector<int32_t> targets;
  std::vector<double> logprobs;
  double scale = 0;                // largest |logit| in the scored rows
};

Expected expected_ppl(const fs::path& model, const std::vector<int32_t>& sample, size_t n_ctx, size_t max_chunks,
                      std::optional<int32_t> bos) {
  Expected e;
  const size_t n_chunks = std::min(sample.size() / n_ctx, max_chunks);
  const size_t first = n_ctx / 2;
  double sum = 0, sum2 = 0;
  for (size_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> ids(sample.begin() + ptrdiff_t(c * n_ctx), sample.begin() + ptrdiff_t((c + 1) * n_ctx));
    if (bos) ids[0] = *bos;
    const Reference ref = reference_forward(model, ids);
    REQUIRE(ref.rows == n_ctx);
    for (size_t r = first; r + 1 < n_ctx; ++r) {   // row r predicts token r + 1
      const float* row = ref.logits.data() + r * ref.vocab;
      double mx = -1e300;
      for (size_t v = 0; v < ref.vocab; ++v) {
        mx = std::max(mx, double(row[v]));
        e.scale = std::max(e.scale, std::fabs(double(row[v])));
      }
      double z = 0;
      for (size_t v = 0; v < ref.vocab; ++v) z += std::exp(double(row[v]) - mx);
      const int32_t t = sample[c * n_ctx + r + 1];   // the sample's token, never the BOS
      const double lp = double(row[t]) - mx - std::log(z);
      sum += -lp;
      sum2 += lp * lp;
      e.n += 1;
      e.positions.push_back(c * n_ctx + r + 1);
      e.targets.push_back(t);
      e.logprobs.push_back(lp);
    }
    e.running.push_back(std::exp(sum / double(e.n)));
  }
  e.nll = sum / double(e.n);
  e.ppl = std::exp(e.nll);
  e.pm = e.ppl * std::sqrt((sum2 / double(e.n) - e.nll * e.nll) / double(e.n - 1));
  return e;
}

struct Run {
  std::string err;
  json j;
  std::vector<double> running;   // the [i] values on stderr
  double final_ppl = 0, final_pm = 0;
  std::vector<size_t> positions;
  std::vector<int32_t> targets;
  std::vector<double> logprobs;
};

Run run_ppl(const fs::path& model, const std::string& sample_args, const std::string& extra, const fs::path& dir) {
  const std::string bin = (build_root() / "cli" / "reach").string();
  Run r;
  // An f32 KV cache (the CLI's default is f16): the scores are checked against the float64 reference.
  r.err = run_command("(REACH_PROGRESS=0 " + bin + " eval -ctk f32 -ctv f32 -m " + model.string() + " " + sample_args +
                      " --mode ppl --ctx " + std::to_string(kCtx) + " -o json --dump-logprobs " +
                      (dir / "lp.tsv").string() + " " + extra + " > " + (dir / "out.json").string() + ")");
  r.j = json::parse(slurp(dir / "out.json"));
  REQUIRE(r.j.size() == 1);
  const std::regex run_re(R"(\[(\d+)\]([0-9.]+),)");
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), run_re); it != std::sregex_iterator(); ++it) {
    CHECK(std::stoul((*it)[1]) == r.running.size() + 1);
    r.running.push_back(std::stod((*it)[2]));
  }
  std::smatch m;
  const std::regex final_re(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))");
  REQUIRE_MESSAGE(std::regex_search(r.err, m, final_re), r.err);
  r.final_ppl = std::stod(m[1]);
  r.final_pm = std::stod(m[2]);
  std::istringstream in(slurp(dir / "lp.tsv"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) continue;
    std::istringstream l(line);
    size_t pos;
    int32_t t;
    double lp;
    const bool parsed = bool(l >> pos >> t >> lp);
    REQUIRE_MESSAGE(parsed, line);
    r.positions.push_back(pos);
    r.targets.push_back(t);
    r.logprobs.push_back(lp);
  }
  return r;
}

// Everything reach reports equals the independent computation: the same scored tokens, their
// log-probs, the running values, the final PPL and ±.
void check_against(const Run& r, const Expected& e) {
  // f32 on the device vs the float64 reference: measured 4e-6 per log-prob, 2e-7 relative on PPL and ±.
  const double tol = 1e-5 * std::max(1.0, e.scale);
  INFO("stderr:\n" << r.err);
  CHECK(r.j[0]["n_chunks"] == e.running.size());
  CHECK(r.j[0]["n_scored"] == e.n);
  REQUIRE(r.positions == e.positions);
  CHECK(r.targets == e.targets);
  for (size_t i = 0; i < e.n; ++i) CHECK(std::fabs(r.logprobs[i] - e.logprobs[i]) <= tol);
  CHECK(std::fabs(r.j[0]["nll"].get<double>() - e.nll) <= tol);
  CHECK(r.j[0]["ppl"].get<double>() == doctest::Approx(e.ppl).epsilon(tol));
  CHECK(r.j[0]["ppl_stderr"].get<double>() == doctest::Approx(e.pm).epsilon(tol));
  REQUIRE(r.running.size() == e.running.size());
  for (size_t i = 0; i < e.running.size(); ++i)
    CHECK(r.running[i] == doctest::Approx(e.running[i]).epsilon(tol).scale(1.0));
  // The printed values are the reported ones, rounded to %.4f / %.5f.
  CHECK(std::fabs(r.final_ppl - r.j[0]["ppl"].get<double>()) <= 0.5e-4 + 1e-9);
  CHECK(std::fabs(r.final_pm - r.j[0]["ppl_stderr"].get<double>()) <= 0.5e-5 + 1e-9);
  CHECK(std::fabs(r.running.back() - r.final_ppl) <= 1e-4 + 1e-9);
}

void write_ids(const fs::path& p, const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (int32_t id : ids) s << id << ' ';
  spit(p, s.str());
}

}  // namespace

TEST_CASE("ppl chunks: --chunks bounds the count, the 2*n_ctx requirement stays") {
  using eval::ppl_chunks;
  CHECK(ppl_chunks(100, 16).size() == 6);
  CHECK(ppl_chunks(100, 16, 2).size() == 2);
  CHECK(ppl_chunks(100, 16, 50).size() == 6);
  CHECK(ppl_chunks(100, 16, 1)[0].n_scored == 7);
  CHECK_THROWS_AS(ppl_chunks(31, 16, 1), Error);   // llama-perplexity checks T >= 2*n_ctx before --chunks
  CHECK_THROWS_AS(ppl_chunks(100, 16, 0), Error);
}

TEST_CASE("ppl BOS rule: tokenizer_config.json add_bos_token, else the post-processor") {
  using eval::ppl_bos;
  CHECK(!ppl_bos(std::nullopt, false, std::nullopt, 1).add);         // SmolLM2: ByteLevel post-processor
  const auto t = ppl_bos(std::nullopt, true, 128000, 7);
  CHECK(t.add);
  CHECK(t.id == 128000);                                               // what the tokenizer prepends
  CHECK(!ppl_bos(false, true, 128000, 7).add);                         // the config overrides
  const auto c = ppl_bos(true, false, std::nullopt, 7);
  CHECK(c.add);
  CHECK(c.id == 7);                                                    // config.json's bos_token_id
  CHECK(!ppl_bos(std::nullopt, std::nullopt, std::nullopt, 7).add);   // nothing says to add one
  CHECK_THROWS_AS(ppl_bos(true, false, std::nullopt, std::nullopt), Error);
}

TEST_CASE("eval --mode ppl equals llama-perplexity's protocol computed independently") {
  const fs::path base = tiny_model(kTiny);
  const int32_t bos_id = json::parse(slurp(base / "config.json"))["bos_token_id"].get<int32_t>();
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", true}};
  const fs::path with_bos = variant(base, "bos", std::nullopt, std::nullopt);
  const fs::path no_bos = variant(base, "nobos", byte_level, std::nullopt);
  const fs::path config_off = variant(base, "config-off", std::nullopt, json{{"add_bos_token", false}});
  const fs::path no_tokenizer = variant(base, "no-tokenizer", std::nullopt, std::nullopt, true);
  const fs::path dir = temp_dir("ppl-runs");
  spit(dir / "text.txt", kText);

  // The text's tokens without special tokens (the tokenizer itself is checked by the tokenizer suite).
  const Tokenizer tok = Tokenizer::load(base);
  REQUIRE(tok.adds_bos());
  const std::vector<int32_t> plain = tok.encode(kText, false);
  REQUIRE(plain.size() >= 3 * kCtx);
  std::vector<int32_t> bos_first = {bos_id};
  bos_first.insert(bos_first.end(), plain.begin(), plain.end());

  SUBCASE("a tokenizer that adds BOS: BOS starts the sample and replaces token 0 of every chunk") {
    const Expected e_bos = expected_ppl(with_bos, bos_first, kCtx, 1000, bos_id);
    const Run r = run_ppl(with_bos, "-f " + (dir / "text.txt").string(), "", dir);
    CHECK(r.err.find("BOS " + std::to_string(bos_id) + " replaces token 0") != std::string::npos);
    check_against(r, e_bos);
    // The rule matters on this model: keeping token 0 of chunk 2 gives another result.
    const Expected kept = expected_ppl(with_bos, bos_first, kCtx, 2, std::nullopt);
    CHECK(std::fabs(std::log(kept.running[1] / e_bos.running[1])) > 0.01);
  }
  SUBCASE("a tokenizer without BOS: no BOS first, token 0 of each chunk kept") {
    const Expected e_plain = expected_ppl(no_bos, plain, kCtx, 1000, std::nullopt);
    const Run r = run_ppl(no_bos, "-f " + (dir / "text.txt").string(), "", dir);
    CHECK(r.err.find("token 0 of each chunk kept") != std::string::npos);
    check_against(r, e_plain);
    // tokenizer_config.json's add_bos_token false wins over a post-processor that adds BOS.
    const Run c = run_ppl(config_off, "-f " + (dir / "text.txt").string(), "", dir);
    CHECK(c.err.find("tokenizer_config.json add_bos_token false") != std::string::npos);
    check_against(c, e_plain);
  }
  SUBCASE("--tokens and --chunks") {
    const auto ids = random_ids(75, 300, 31);   // 4 chunks of 16
    write_ids(dir / "ids.txt", ids);
    const std::string tokens = "--tokens " + (dir / "ids.txt").string();
    const Run two = run_ppl(with_bos, tokens, "--chunks 2", dir);
    CHECK(two.err.find("2 of 4 chunks") != std::string::npos);
    check_against(two, expected_ppl(with_bos, ids, kCtx, 2, bos_id));
    // More chunks than there are, or -1: all 4.
    CHECK(run_ppl(with_bos, tokens, "--chunks 9", dir).j[0]["n_chunks"] == 4);
    CHECK(run_ppl(with_bos, tokens, "--chunks -1", dir).j[0]["n_chunks"] == 4);
    // No tokenizer.json (nor tokenizer_config.json): nothing says to add a BOS, so token 0 is kept.
    const Run one = run_ppl(no_tokenizer, tokens, "--chunks 1", dir);
    check_against(one, expected_ppl(no_tokenizer, ids, kCtx, 1, std::nullopt));

    const std::string bin = (build_root() / "cli" / "reach").string();
    auto fails = [&](const std::string& args, const std::string& needle) {
      const std::string out = run_command("(REACH_PROGRESS=0 " + bin + " eval -m " + with_bos.string() + " " +
                                          tokens + " " + args + " > /dev/null) 2>&1; echo rc=$?");
      CHECK_MESSAGE(out.find(needle) != std::string::npos, out);
      CHECK_MESSAGE(out.find("rc=1") != std::string::npos, out);
    };
    fails("--mode ppl --chunks 0", "--chunks 0");
    fails("--mode ppl --ctx 40 --chunks 1", "you need at least 80 tokens");
    fails("--ctx 16 --chunks 2", "--chunks needs --mode ppl");
  }
}
