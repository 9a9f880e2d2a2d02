// Eleven model families (three of them mixtures of experts) end to end against transformers' own float64 forward: the tiny random checkpoints of
// tests/data/families (tools/family_fixtures.py; README.md there), each loaded from its HF folder, its GGUF and its
// HF folder with the transformers-4 config.json, run as one prefill of every token and as chunked prefill then
// token-by-token decode; per-token log-probs, whole log-prob rows and a greedy continuation compared with
// reference.json.  A family reach cannot load or does not match fails here: none is skipped.
//
// REACH_FAMILY_FIXTURES=DIR runs the families of another tools/family_fixtures.py --out DIR (other seeds, shapes).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/formats/json_parse.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/decode_batch.hpp"
#include "runtime/session/session.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/safetensors_writer.hpp"

using namespace reach;
using namespace reach::test;
namespace fs = std::filesystem;

namespace {

// |reach's log-prob - transformers' float64 log-prob|, any token, any position.  The weights are the same f16
// values on both sides, so what remains is reach's f32 arithmetic (matrix products, norms, softmax, the f32 rotary
// tables) through 4 layers of width 64: measured worst 8e-6 on lavapipe over the families reach runs (llama3,
// qwen2, mistral from hf/; mistral from its GGUF; see the MESSAGEs).  1e-3 leaves two orders of magnitude for
// other devices' summation orders and for families with more f32 steps, while the formula errors tried on these
// fixtures (llama3's original context, longrope's short factors or attention factor, SmolLM3's NoPE layer, the
// rope base) move log-probs by 1 or more, and even rounding Gemma's 1 + w norm weights to f16 moves them by 5e-3.
constexpr double kTol = 1e-3;

// reach's chunked prefill: a chunk length that divides neither the prefix nor the sliding windows.
constexpr uint32_t kChunk = 7;

struct Reference {
  std::string family, architecture;
  std::vector<int32_t> tokens;
  std::vector<double> logprobs_next;
  std::vector<size_t> full_positions;
  std::vector<std::vector<double>> full_logprobs;
  std::vector<int32_t> greedy;
  std::vector<double> greedy_margins;
  size_t vocab = 0;
  // "chat" (present when the fixture has a chat template): a conversation and transformers' prompt ids for it.
  std::vector<ChatMessage> chat_messages;
  std::vector<int32_t> chat_ids;
  std::string chat_date;   // set where the template writes today's date (the reference's fixed day)
  // Mixture of experts ("moe"): the experts transformers' router chose, [layer][token][top-k]; a dense
  // layer's list is empty.
  std::vector<std::vector<std::vector<int32_t>>> experts;
};

fs::path families_root() {
  const char* env = std::getenv("REACH_FAMILY_FIXTURES");
  return env && *env ? fs::path(env) : source_root() / "tests/data/families";
}

std::vector<fs::path> family_dirs() {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(families_root(), ec))
    if (e.is_directory() && fs::is_regular_file(e.path() / "reference.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

Reference load_reference(const fs::path& dir, const std::string& file) {
  const auto j = parse_json_bounded(read_text(dir / file), 16);
  Reference r;
  r.family = j.at("family").get<std::string>();
  r.architecture = j.at("architecture").get<std::string>();
  r.tokens = j.at("tokens").get<std::vector<int32_t>>();
  r.logprobs_next = j.at("logprobs_next").get<std::vector<double>>();
  r.full_positions = j.at("full_positions").get<std::vector<size_t>>();
  r.full_logprobs = j.at("full_logprobs").get<std::vector<std::vector<double>>>();
  r.greedy = j.at("greedy").get<std::vector<int32_t>>();
  r.greedy_margins = j.at("greedy_margins").get<std::vector<double>>();
  r.vocab = j.at("shapes").at("vocab").get<size_t>();
  if (j.contains("chat")) {
    for (const auto& m : j.at("chat").at("messages"))
      r.chat_messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    r.chat_ids = j.at("chat").at("ids").get<std::vector<int32_t>>();
    r.chat_date = j.at("chat").value("date", "");
  }
  if (j.contains("moe"))
    for (const auto& layer : j.at("moe").at("experts"))
      r.experts.push_back(layer.is_null() ? std::vector<std::vector<int32_t>>{}
                                          : layer.get<std::vector<std::vector<int32_t>>>());
  REQUIRE(r.logprobs_next.size() + 1 == r.tokens.size());
  REQUIRE(r.full_positions.size() == r.full_logprobs.size());
  REQUIRE(r.greedy.size() == r.greedy_margins.size());
  return r;
}

// log-softmax of a float row, in double.
std::vector<double> log_softmax(const float* row, size_t n) {
  double mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, double(row[i]));
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
  const double lse = mx + std::log(s);
  std::vector<double> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = double(row[i]) - lse;
  return r;
}

int32_t argmax(std::span<const float> row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// The three ways a family is loaded.
enum class Source { hf, gguf, hf_v4 };
const char* source_name(Source s) {
  return s == Source::hf ? "hf/" : s == Source::gguf ? "model.gguf" : "hf/ + v4 config";
}

// hf_v4: hf/ copied with hf_v4_config.json as its config.json.
fs::path source_path(const fs::path& dir, Source s, const TempDir& tmp) {
  if (s == Source::hf) return dir / "hf";
  if (s == Source::gguf) return dir / "model.gguf";
  const fs::path copy = tmp.path / dir.filename();
  fs::copy(dir / "hf", copy, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::copy_file(dir / "hf_v4_config.json", copy / "config.json", fs::copy_options::overwrite_existing);
  return copy;
}

// Failures inside a family are CHECKs or exceptions (caught and reported per family and mode), never a REQUIRE,
// so that one family's failure does not hide the next family's results.

// Every row's logits: one prefill of all tokens (chunked == false), or kChunk-token chunks over the first half
// and decode steps over the rest.  The session is left after the last token, for the greedy continuation.
std::vector<float> run_rows(Session& s, const std::vector<int32_t>& tokens, bool chunked, size_t vocab) {
  std::vector<float> rows;
  if (!chunked) {
    s.prefill(tokens, &rows);
    return rows;
  }
  const size_t half = tokens.size() / 2;
  s.prefill(std::span(tokens).first(half), &rows);
  for (size_t t = half; t < tokens.size(); ++t) {
    s.decode(tokens[t]);
    if (s.logits().size() != vocab)
      throw std::runtime_error("decode gives " + std::to_string(s.logits().size()) + " logits");
    rows.insert(rows.end(), s.logits().begin(), s.logits().end());
  }
  return rows;
}

struct Worst {
  double next = 0, full = 0;
  size_t next_at = 0, full_at = 0;
};

Worst compare_rows(const Reference& ref, const std::vector<float>& rows) {
  Worst w;
  const size_t V = ref.vocab;
  for (size_t t = 0; t + 1 < ref.tokens.size(); ++t) {
    const auto lp = log_softmax(&rows[t * V], V);
    const double d = std::fabs(lp[size_t(ref.tokens[t + 1])] - ref.logprobs_next[t]);
    if (!(d <= w.next)) w.next = d, w.next_at = t;   // NaN counts as worst
  }
  for (size_t i = 0; i < ref.full_positions.size(); ++i) {
    const size_t p = ref.full_positions[i];
    const auto lp = log_softmax(&rows[p * V], V);
    for (size_t k = 0; k < V; ++k) {
      const double d = std::fabs(lp[k] - ref.full_logprobs[i][k]);
      if (!(d <= w.full)) w.full = d, w.full_at = p;
    }
  }
  return w;
}

// Greedy continuation from the session's current logits, compared up to the first step whose reference margin is
// below 2 * kTol (a near-tie that reach may break the other way).
void check_greedy(Session& s, const Reference& ref, const std::string& what) {
  size_t compared = 0;
  std::vector<int32_t> got;
  for (size_t i = 0; i < ref.greedy.size(); ++i) {
    if (ref.greedy_margins[i] < 2 * kTol) {
      MESSAGE(what << ": greedy step " << i << " is a near-tie in the reference (margin " << ref.greedy_margins[i]
                   << " < 2 x tolerance): compared the " << compared << " steps before it");
      return;
    }
    const int32_t id = argmax(s.logits());
    got.push_back(id);
    if (id != ref.greedy[i]) {
      std::ostringstream g, r;
      for (size_t k = 0; k < got.size(); ++k) g << (k ? "," : "") << got[k];
      for (size_t k = 0; k < got.size(); ++k) r << (k ? "," : "") << ref.greedy[k];
      FAIL_CHECK(what << ": greedy step " << i << " differs: reach " << g.str() << ", transformers " << r.str()
                      << " (reference margin " << ref.greedy_margins[i] << ")");
      return;
    }
    ++compared;
    if (i + 1 < ref.greedy.size()) s.decode(id);
  }
  MESSAGE(what << ": greedy " << compared << " tokens identical");
}

// The model's chat template rendered and encoded for reference.json's conversation, compared with
// transformers' ids for it, then prefilled.
// The tokenizer is loaded on its own, so the prompt is checked also where the model does not load; the prefill
// runs where it does.
void check_chat(const fs::path& path, bool gguf, Model* model, const Reference& ref, const std::string& what) {
  const Tokenizer tokenizer = load_tokenizer_at(resolve_model_path(path));
  const Tokenizer* tk = &tokenizer;
  if (tk->chat_template().empty()) {
    MESSAGE(what << ": chat path not run: the file carries no chat template");
    return;
  }
  std::optional<ChatTemplate> tmpl;
  try {
    tmpl = ChatTemplate::for_tokenizer(*tk, what);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    MESSAGE(what << ": chat path not run: reach does not recognise the template (" << std::string(e.what()) << ")");
    return;
  }
  if (ref.chat_messages.empty()) {
    FAIL_CHECK(what << ": a chat template but no \"chat\" in reference.json");
    return;
  }
  const ChatPrompt p = encode_chat(*tk, *tmpl, ref.chat_messages);
  CHECK(!p.ids.empty());
  if (!gguf && ref.chat_date.empty()) {
    CHECK_MESSAGE(p.ids == ref.chat_ids,
                  what << ": the chat prompt's ids differ from transformers' apply_chat_template");
  } else {
    // llama.cpp's SentencePiece tokenizer puts a space before the text after every special token where
    // add_space_prefix is set (transformers' Metaspace "first" only at the start), so a GGUF's text pieces may
    // differ from transformers'; and a template that writes today's date renders another text than the
    // reference's fixed day.  The special tokens, in order, may not differ.
    if (!ref.chat_date.empty())
      MESSAGE(what << ": the template writes today's date (the reference's is " << ref.chat_date
                   << "): special tokens compared, not the text's");
    auto specials = [&](const std::vector<int32_t>& ids) {
      std::vector<int32_t> r;
      for (int32_t id : ids)
        if (tk->is_special(id)) r.push_back(id);
      return r;
    };
    CHECK_MESSAGE(specials(p.ids) == specials(ref.chat_ids),
                  what << ": the chat prompt's special tokens differ from transformers' apply_chat_template");
  }
  // The end-of-turn marker is one special token, and the prompt holds it (the closed assistant turn).
  const auto eot = tk->encode(tmpl->end_of_turn(), false);
  CHECK_MESSAGE(eot.size() == 1, what << ": " << tmpl->end_of_turn() << " is " << eot.size() << " tokens");
  if (eot.size() == 1) CHECK(std::find(p.ids.begin(), p.ids.end(), eot[0]) != p.ids.end());
  CHECK(!p.stop_ids.empty());
  if (model) {
    SessionOptions o;
    o.context = uint32_t(p.ids.size() + 8);
    Session s(*model, o);
    s.prefill(p.ids);
    CHECK(std::all_of(s.logits().begin(), s.logits().end(), [](float v) { return std::isfinite(v); }));
  }
  std::string text = tk->decode(p.ids, false);
  for (size_t i = 0; (i = text.find('\n', i)) != std::string::npos;) text.replace(i, 1, "\\n");
  MESSAGE(what << ": chat (" << std::string(tmpl->family_name()) << ") prompt of " << p.ids.size()
               << " tokens: " << text);
}

// Mixture of experts: the experts reach's router chose (read back from the device) are transformers' for every
// token of every sparse layer, in the same top-k order: once over one prefill of every token, once token by
// token in decode steps after a chunked prefill of the first half.
void check_routing(Model& model, const Reference& ref, const std::string& what) {
  const size_t L = ref.tokens.size(), k = ref.experts.empty() ? 0 : ref.experts[0].empty() ? 0 : ref.experts[0][0].size();
  size_t compared = 0, differ = 0;
  std::string first;
  auto compare = [&](const std::vector<int32_t>& got, size_t rows, size_t row, size_t token) {
    for (size_t l = 0; l < ref.experts.size(); ++l) {
      if (ref.experts[l].empty()) continue;
      const std::vector<int32_t>& want = ref.experts[l][token];
      const std::vector<int32_t> have(got.begin() + std::ptrdiff_t((l * rows + row) * want.size()),
                                      got.begin() + std::ptrdiff_t((l * rows + row + 1) * want.size()));
      ++compared;
      if (have != want && differ++ == 0)
        first = "layer " + std::to_string(l) + " token " + std::to_string(token) + ": reach " +
                std::to_string(have[0]) + ",... transformers " + std::to_string(want[0]) + ",...";
    }
  };
  SessionOptions o;
  o.context = uint32_t(L + 8);
  o.chunk = uint32_t(L);
  {
    Session s(model, o);
    s.prefill(ref.tokens);
    const auto got = s.last_expert_ids(uint32_t(L));
    REQUIRE(got.size() == ref.experts.size() * L * k);
    for (size_t t = 0; t < L; ++t) compare(got, L, t, t);
  }
  o.chunk = kChunk;
  Session s(model, o);
  s.prefill(std::span(ref.tokens).first(L / 2));
  for (size_t t = L / 2; t < L; ++t) {
    s.decode(ref.tokens[t]);
    compare(s.last_expert_ids(1), 1, 0, t);
  }
  MESSAGE(what << ": routing compared for " << compared << " (layer, token) pairs, " << differ << " differ");
  CHECK_MESSAGE(differ == 0, what << ": the router's choice differs from transformers' at " << first);
  CHECK(compared > 0);
}

void run_family(const fs::path& dir, Source source) {
  // A GGUF that the converter made lossy (mistral: no sliding window; gemma2: no query_pre_attn_scalar) has its
  // own reference: the model as llama.cpp reads the file.
  const bool own = source == Source::gguf && fs::is_regular_file(dir / "gguf_reference.json");
  const Reference ref = load_reference(dir, own ? "gguf_reference.json" : "reference.json");
  const std::string what = ref.family + " (" + ref.architecture + ") from " + source_name(source) +
                           (own ? " vs gguf_reference.json" : "");
  CAPTURE(what);
  TempDir tmp("families");
  const fs::path path = source_path(dir, source, tmp);
  std::unique_ptr<Model> model;
  try {
    Gpu& g = gpu();
    LoadOptions lo;
    lo.require_tokenizer = false;   // the chat check loads the tokenizer itself
    model = Model::load(*g.device, *g.allocator, path, lo);
  } catch (const std::exception& e) {
    FAIL_CHECK(what << ": does not load: " << std::string(e.what()));
  }
  if (source != Source::hf_v4) {   // the v4 copy has the same tokenizer files as hf/
    try {
      check_chat(path, source == Source::gguf, model.get(), ref, what);
    } catch (const std::exception& e) {
      FAIL_CHECK(what << ": chat path throws: " << std::string(e.what()));
    }
  }
  if (!model) return;
  if (model->config().vocab_size != int64_t(ref.vocab)) {
    FAIL_CHECK(what << ": vocab_size " << model->config().vocab_size << ", reference " << ref.vocab);
    return;
  }
  if (!ref.experts.empty()) {
    CHECK_MESSAGE(model->config().is_moe(), what << ": reference.json has routing, the model is not a MoE");
    try {
      check_routing(*model, ref, what);
    } catch (const std::exception& e) {
      FAIL_CHECK(what << ": routing check throws: " << std::string(e.what()));
    }
  }
  // Above phi3's original context (32): transformers takes longrope's long factors for the whole 80-token forward,
  // as llama.cpp does for a context above the original.
  const uint32_t context = uint32_t(ref.tokens.size() + ref.greedy.size() + 8);
  for (bool chunked : {false, true}) {
    const std::string mode = what + (chunked ? ", chunked prefill + decode" : ", one prefill");
    try {
      SessionOptions o;
      o.context = context;
      o.chunk = chunked ? kChunk : uint32_t(ref.tokens.size());
      Session s(*model, o);
      const auto rows = run_rows(s, ref.tokens, chunked, ref.vocab);
      if (rows.size() != ref.tokens.size() * ref.vocab) throw std::runtime_error("wrong number of logits");
      const Worst w = compare_rows(ref, rows);
      MESSAGE(mode << ": worst |d log-prob| " << w.next << " (next token, position " << w.next_at << "), "
                   << w.full << " (full rows, position " << w.full_at << ")");
      CHECK_MESSAGE(w.next <= kTol, mode);
      CHECK_MESSAGE(w.full <= kTol, mode);
      check_greedy(s, ref, mode);
    } catch (const std::exception& e) {
      FAIL_CHECK(mode << ": throws: " << std::string(e.what()));
    }
  }
}

void run_all(Source source) {
  const auto dirs = family_dirs();
  REQUIRE_MESSAGE(!dirs.empty(), "no family fixtures under " << families_root());
  for (const fs::path& dir : dirs) run_family(dir, source);
}

}  // namespace

TEST_CASE("families from hf/ (config.json as transformers 5 writes it) match transformers' float64 forward") {
  run_all(Source::hf);
}

TEST_CASE("families from model.gguf (llama.cpp's converter) match transformers' float64 forward; chat prompts") {
  run_all(Source::gguf);
}

TEST_CASE("families from hf/ with the transformers 4 config.json match transformers' float64 forward") {
  run_all(Source::hf_v4);
}

TEST_CASE("a Mistral GGUF has no sliding window; --attn-window W gives back transformers' windowed model") {
  const fs::path dir = families_root() / "mistral";
  if (!fs::is_directory(dir)) {
    MESSAGE("no mistral fixture under " << families_root());
    return;
  }
  const Reference ref = load_reference(dir, "reference.json");   // transformers with its sliding window
  const auto cfg = parse_json_bounded(read_text(dir / "hf/config.json"), 16);
  const int64_t window = cfg.at("sliding_window").get<int64_t>();
  REQUIRE(int64_t(ref.tokens.size()) > window);   // the window bites
  Gpu& g = gpu();
  LoadOptions lo;
  lo.require_tokenizer = false;
  auto model = Model::load(*g.device, *g.allocator, dir / "model.gguf", lo);
  CHECK(!model->config().sliding_window);
  CHECK(model->config().window_note.find("--attn-window") != std::string::npos);
  for (bool chunked : {false, true}) {
    SessionOptions o;
    o.context = uint32_t(ref.tokens.size() + ref.greedy.size() + 8);
    o.chunk = chunked ? kChunk : uint32_t(ref.tokens.size());
    o.overrides.attn_window = window;
    Session s(*model, o);
    const Worst w = compare_rows(ref, run_rows(s, ref.tokens, chunked, ref.vocab));
    const std::string mode = chunked ? ", chunked" : ", one prefill";
    MESSAGE("mistral GGUF + --attn-window " << window << mode
                                            << ": worst |d log-prob| " << w.next << " / " << w.full);
    CHECK(w.next <= kTol);
    CHECK(w.full <= kTol);
  }
}

TEST_CASE("MoE families: batched decode rows (each its own experts) equal each sequence decoded alone") {
  size_t ran = 0;
  for (const fs::path& dir : family_dirs()) {
    const Reference ref = load_reference(dir, "reference.json");
    if (ref.experts.empty()) continue;
    CAPTURE(ref.family);
    Gpu& g = gpu();
    LoadOptions lo;
    lo.require_tokenizer = false;
    auto model = Model::load(*g.device, *g.allocator, dir / "hf", lo);
    SessionOptions o;
    o.context = uint32_t(ref.tokens.size() + 8);
    o.chunk = kChunk;
    const std::vector<size_t> starts = {9, 20, 31};   // rows at different positions choose different experts
    std::vector<std::unique_ptr<Session>> batched, alone;
    for (size_t st : starts) {
      batched.push_back(std::make_unique<Session>(*model, o));
      alone.push_back(std::make_unique<Session>(*model, o));
      batched.back()->prefill(std::span(ref.tokens).first(st));
      alone.back()->prefill(std::span(ref.tokens).first(st));
    }
    DecodeBatch batch(*model, uint32_t(starts.size()));
    double worst = 0;
    for (size_t step = 0; step < 6; ++step) {
      std::vector<Session*> rows;
      std::vector<int32_t> ids;
      for (size_t i = 0; i < starts.size(); ++i) {
        rows.push_back(batched[i].get());
        ids.push_back(ref.tokens[starts[i] + step]);
        alone[i]->decode(ids.back());
      }
      batch.step(rows, ids);
      for (size_t i = 0; i < starts.size(); ++i)
        for (size_t v = 0; v < ref.vocab; ++v)
          worst = std::max(worst, double(std::fabs(batched[i]->logits()[v] - alone[i]->logits()[v])));
    }
    MESSAGE(ref.family << ": batched vs alone, worst |d logit| " << worst);
    CHECK(worst <= 1e-4);
    ++ran;
  }
  CHECK(ran >= 3);   // qwen3_moe, mixtral, olmoe
}

// transformers 5 may save a layer's experts as two 3-D tensors, experts.gate_up_proj [E, 2F, H] (each expert's
// gate rows, then its up rows) and experts.down_proj [E, H, F], where transformers 4 wrote a tensor per expert.
TEST_CASE("MoE: experts saved as transformers 5's fused 3-D tensors give the per-expert checkpoint's logits") {
  const fs::path dir = families_root() / "qwen3_moe";
  if (!fs::is_directory(dir)) {
    MESSAGE("no qwen3_moe fixture under " << families_root());
    return;
  }
  const Reference ref = load_reference(dir, "reference.json");
  const auto cfg = parse_json_bounded(read_text(dir / "hf/config.json"), 16);
  // transformers 5 saves num_experts as num_local_experts
  const int64_t E = cfg.contains("num_experts") ? cfg.at("num_experts").get<int64_t>()
                                                : cfg.at("num_local_experts").get<int64_t>();
  const int64_t L = cfg.at("num_hidden_layers").get<int64_t>();
  TempDir tmp("moe_fused");
  {
    const ModelWeights w = ModelWeights::open_dir(dir / "hf");
    std::vector<TensorToWrite> out;
    auto bytes = [](const TensorInfo& t) {
      return std::vector<std::byte>(t.data, t.data + t.nbytes);
    };
    for (const std::string& name : w.names())
      if (name.find(".experts.") == std::string::npos) {
        const TensorInfo& t = w.get(name);
        out.emplace_back(name, t.dtype, t.shape, bytes(t));
      }
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
      std::vector<std::byte> gu, down;
      std::vector<int64_t> gshape, dshape;
      for (int64_t e = 0; e < E; ++e) {
        const std::string q = p + std::to_string(e) + ".";
        const TensorInfo &g = w.get(q + "gate_proj.weight"), &u = w.get(q + "up_proj.weight"),
                         &d = w.get(q + "down_proj.weight");
        for (const TensorInfo* t : {&g, &u}) gu.insert(gu.end(), t->data, t->data + t->nbytes);
        down.insert(down.end(), d.data, d.data + d.nbytes);
        gshape = {E, 2 * g.shape[0], g.shape[1]};
        dshape = {E, d.shape[0], d.shape[1]};
      }
      out.emplace_back(p + "gate_up_proj", DType::F16, gshape, std::move(gu));
      out.emplace_back(p + "down_proj", DType::F16, dshape, std::move(down));
    }
    write_safetensors(tmp.path / "model.safetensors", out);
    fs::copy_file(dir / "hf/config.json", tmp.path / "config.json");
  }
  Gpu& g = gpu();
  LoadOptions lo;
  lo.require_tokenizer = false;
  auto per_expert = Model::load(*g.device, *g.allocator, dir / "hf", lo);
  auto fused = Model::load(*g.device, *g.allocator, tmp.path, lo);
  SessionOptions o;
  o.context = uint32_t(ref.tokens.size() + 8);
  o.chunk = kChunk;
  std::vector<float> a, b;
  Session sa(*per_expert, o), sb(*fused, o);
  sa.prefill(ref.tokens, &a);
  sb.prefill(ref.tokens, &b);
  REQUIRE(a.size() == b.size());
  CHECK(a == b);   // the same f16 weights in the same order: the same bits
  const Worst w = compare_rows(ref, b);
  CHECK(w.next <= kTol);
}
