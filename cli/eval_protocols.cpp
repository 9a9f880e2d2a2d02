// Pure pieces of `reach eval`: windows, chunks, presets, passkey, scoring.
#include "cli/eval_protocols.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/error.hpp"
#include "runtime/config/flag_values.hpp"

namespace reach::eval {

namespace {

[[noreturn]] void bad(const std::string& msg) { throw Error(ErrorCode::invalid_argument, msg); }

std::string num(size_t v) { return std::to_string(v); }

// The rope types that have a preset of their name (runtime/rope_types); pi is linear too.
constexpr RopeType kPresetTypes[] = {RopeType::linear, RopeType::ntk,    RopeType::dynamic,      RopeType::yarn,
                                     RopeType::longrope, RopeType::rerope, RopeType::leaky_rerope, RopeType::self_extend};

}  // namespace

// ---------------------------------------------------------------------------

Window last_segment_window(size_t T, size_t L, size_t N) {
  if (L == 0) bad("context length 0: every --ctx value must be >= 1");
  if (N == 0) bad("--score-last 0: at least one prediction must be scored");
  if (N > L)
    bad("--score-last " + num(N) + " is larger than the context " + num(L) +
        ": the last-segment protocol scores the final N predictions of every context, so N must be <= the smallest "
        "--ctx");
  if (T < L + 1)
    bad("the sample has " + num(T) + " tokens, but context " + num(L) + " needs at least " + num(L + 1) +
        " (L tokens read + the final target): use a longer text, smaller --ctx values, or --repeat");
  Window w;
  w.input_begin = T - L - 1;
  w.length = L;
  w.n_scored = N;
  w.n_prefix = L - N;
  w.target_begin = T - N;
  return w;
}

std::vector<PplChunk> ppl_chunks(size_t T, size_t n_ctx, std::optional<size_t> max_chunks) {
  if (n_ctx < 2) bad("--mode ppl needs a context of at least 2 tokens, got " + num(n_ctx));
  if (max_chunks && *max_chunks == 0) bad("--chunks 0: give at least 1, or -1 for all chunks");
  if (T < 2 * n_ctx)
    bad("you need at least " + num(2 * n_ctx) + " tokens to evaluate perplexity with a context of " + num(n_ctx) +
        " (the sample has " + num(T) + ")");
  const size_t n = std::min(T / n_ctx, max_chunks.value_or(T / n_ctx));
  std::vector<PplChunk> out;
  for (size_t c = 0; c < n; ++c) {
    PplChunk k;
    k.begin = c * n_ctx;
    k.n_ctx = n_ctx;
    k.first = n_ctx / 2;
    k.n_scored = n_ctx - 1 - k.first;
    out.push_back(k);
  }
  return out;
}

PplBos ppl_bos(std::optional<bool> config_add_bos, std::optional<bool> tokenizer_adds,
               std::optional<int32_t> prefix_id, std::optional<int32_t> config_bos) {
  PplBos b;
  if (config_add_bos) {
    b.add = *config_add_bos;
    b.source = std::string("tokenizer_config.json add_bos_token ") + (b.add ? "true" : "false");
  } else if (tokenizer_adds) {
    b.add = *tokenizer_adds;
    b.source = b.add ? "the tokenizer.json post-processor adds it" : "the tokenizer.json post-processor adds none";
  } else {
    b.source = "no tokenizer.json or add_bos_token in tokenizer_config.json";
  }
  if (!b.add) return b;
  // What the tokenizer itself prepends, else config.json's id.
  const std::optional<int32_t> id = tokenizer_adds.value_or(false) && prefix_id ? prefix_id : config_bos;
  if (!id)
    bad("--mode ppl: " + b.source + " says to add a BOS token, but neither tokenizer.json's post-processor nor "
        "config.json (bos_token_id) names one");
  b.id = *id;
  return b;
}

std::vector<int32_t> repeat_tokens(const std::vector<int32_t>& tokens, size_t M, size_t total) {
  if (M == 0) bad("--repeat-len 0: the repeated unit needs at least one token");
  if (tokens.size() < M)
    bad("--repeat needs a sample of at least " + num(M) + " tokens (the repeated unit, --repeat-len), the sample has " +
        num(tokens.size()));
  std::vector<int32_t> out;
  out.reserve(total);
  while (out.size() < total) out.push_back(tokens[out.size() % M]);
  return out;
}

// ---------------------------------------------------------------------------

double Score::ppl() const { return std::exp(mean_nll()); }

void Score::add(const Score& o) {
  nll_sum += o.nll_sum;
  nll2_sum += o.nll2_sum;
  n += o.n;
  correct += o.correct;
}

double log_prob(const float* row, size_t vocab, int32_t target) {
  if (target < 0 || size_t(target) >= vocab)
    bad("target token " + std::to_string(target) + " is outside the vocabulary [0, " + num(vocab) + ")");
  double mx = -std::numeric_limits<double>::infinity();
  for (size_t v = 0; v < vocab; ++v) mx = std::max(mx, double(row[v]));
  double s = 0;
  for (size_t v = 0; v < vocab; ++v) s += std::exp(double(row[v]) - mx);
  return double(row[target]) - mx - std::log(s);
}

Score score_rows(const float* logits, size_t rows, size_t vocab, const int32_t* targets, std::vector<double>* logprobs) {
  Score sc;
  for (size_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    const double lp = log_prob(row, vocab, targets[r]);
    size_t best = 0;
    for (size_t v = 1; v < vocab; ++v)
      if (row[v] > row[best]) best = v;
    sc.nll_sum += -lp;
    sc.nll2_sum += lp * lp;
    sc.n += 1;
    sc.correct += best == size_t(targets[r]) ? 1 : 0;
    if (logprobs) logprobs->push_back(lp);
  }
  return sc;
}

// ---------------------------------------------------------------------------

int64_t training_length(const ModelConfig& cfg) {
  if (cfg.rope.original_max_position > 0) return cfg.rope.original_max_position;
  return cfg.max_position_embeddings;
}

std::string normalize_preset(const std::string& name) {
  std::string t;
  for (char c : name) t += c == '-' ? '_' : char(std::tolower(static_cast<unsigned char>(c)));
  if (t == "default" || t == "pi" || t == "logn") return t;
  const RopeTypeInfo* rt = rope_type_from_flag(t);
  if (rt && std::find(std::begin(kPresetTypes), std::end(kPresetTypes), rt->type) != std::end(kPresetTypes)) return t;
  std::string known = "default";
  for (RopeType p : kPresetTypes)
    known += std::string(", ") + rope_type_name(p) + (p == RopeType::linear ? ", pi" : "");
  bad("unknown scheme '" + name + "' in --schemes (known: " + known + ", logn)");
}

const char* preset_help() {
  return "schemes (--schemes, applied on top of config.json; L_train = rope original_max_position_embeddings,\n"
         "else max_position_embeddings; s = max(1, L / L_train) at context L):\n"
         "  default         config.json + the scheme flags given\n"
         "  linear, pi      --rope-scaling linear --rope-factor s\n"
         "  ntk             --rope-scaling ntk --rope-factor s\n"
         "  dynamic         --rope-scaling dynamic --rope-factor s --original-ctx L_train\n"
         "  yarn            --rope-scaling yarn --rope-factor s --original-ctx L_train\n"
         "  longrope        --rope-scaling longrope: the model's own short / long factors (Phi-3, Phi-4-mini;\n"
         "                  long beyond L_train); models without them are refused\n"
         "  rerope          window w = --rerope-window, default L_train/4\n"
         "  leaky_rerope    window w as rerope, k = --leaky-k, default max(2, ceil((L-w)/(L_train-w)))\n"
         "                  (the largest effective distance w + (L-w)/k stays within L_train)\n"
         "  self_extend     G = --self-extend-group, default the smallest G >= 2 with (L_train-W)G + W >= L;\n"
         "                  W = --self-extend-window, default L_train/4 rounded down to a multiple of G\n"
         "  logn            default + --logn L_train (or the --logn given)\n"
         "  The rope presets keep the non-rope flags (--logn, --qk-norm, --attn-window, ...).\n";
}

double preset_factor(int64_t L, int64_t L_train) {
  if (L_train <= 0) return 1.0;
  return std::max(1.0, double(L) / double(L_train));
}

int64_t preset_window(int64_t L_train) { return std::max<int64_t>(1, L_train / 4); }

double preset_leaky_k(int64_t L, int64_t L_train, int64_t w) {
  if (L_train <= w) return 2.0;
  const int64_t k = (std::max<int64_t>(L - w, 0) + (L_train - w) - 1) / (L_train - w);
  return double(std::max<int64_t>(2, k));
}

std::pair<int64_t, int64_t> preset_self_extend(int64_t L, int64_t L_train, std::optional<int64_t> group,
                                               std::optional<int64_t> window) {
  auto window_for = [&](int64_t G) -> int64_t {
    if (window) return *window;
    const int64_t base = preset_window(L_train);
    return std::max<int64_t>(G, base / G * G);
  };
  if (group) return {*group, window_for(*group)};
  int64_t G = 2;
  for (; G < (int64_t(1) << 20); ++G) {
    const int64_t W = window_for(G);
    if (W >= L_train || (L_train - W) * G + W >= L) break;
  }
  return {G, window_for(G)};
}

SchemeRun preset_overrides(const std::string& preset_in, int64_t L, int64_t L_train, const SchemeOverrides& user) {
  const std::string preset = normalize_preset(preset_in);
  SchemeRun run;
  run.name = preset_in;
  SchemeOverrides o;
  if (preset == "default" || preset == "logn") {
    o = user;
    if (preset == "logn" && !o.logn) o.logn = L_train;
  } else {
    // Non-rope flags carry over; the rope ones are this preset's parameters.
    o.logn = user.logn;
    o.qk_norm = user.qk_norm;
    o.cos_n = user.cos_n;
    o.attn_window = user.attn_window;
    o.attn_sinks = user.attn_sinks;
    const double s = preset_factor(L, L_train);
    o.rope_scaling = rope_type_name(preset == "pi" ? RopeType::linear : rope_type_from_flag(preset)->type);
    if (preset == "linear" || preset == "pi") {
      o.rope_factor = s;
    } else if (preset == "ntk") {
      o.rope_factor = s;
    } else if (preset == "dynamic" || preset == "yarn") {
      o.rope_factor = s;
      o.original_ctx = L_train;
    } else if (preset == "rerope") {
      o.rerope_window = user.rerope_window.value_or(preset_window(L_train));
    } else if (preset == "leaky_rerope") {
      const int64_t w = user.rerope_window.value_or(preset_window(L_train));
      o.rerope_window = w;
      o.leaky_k = user.leaky_k.value_or(preset_leaky_k(L, L_train, w));
    } else if (preset == "self_extend") {
      const auto [G, W] = preset_self_extend(L, L_train, user.se_group, user.se_window);
      o.se_group = G;
      o.se_window = W;
    }
  }
  run.overrides = o;
  run.params = o.empty() ? "config.json" : o.describe();
  return run;
}

// ---------------------------------------------------------------------------

const char* const kPasskeyIntro =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
    "about the important information there.";
const char* const kPasskeyFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
const char* const kPasskeyQuestion = "What is the pass key? The pass key is";

std::string passkey_sentence(int64_t key) {
  const std::string k = std::to_string(key);
  return "The pass key is " + k + ". Remember it. " + k + " is the pass key.";
}

namespace {
size_t insert_at(size_t n_filler, double depth) {
  const double d = std::clamp(depth, 0.0, 1.0);
  return std::min(n_filler, size_t(std::llround(d * double(n_filler))));
}
}  // namespace

std::string passkey_text(int64_t key, size_t n_filler, double depth) {
  const size_t at = insert_at(n_filler, depth);
  std::string t = kPasskeyIntro;
  for (size_t i = 0; i <= n_filler; ++i) {
    if (i == at) {
      t += ' ';
      t += passkey_sentence(key);
    }
    if (i < n_filler) {
      t += ' ';
      t += kPasskeyFiller;
    }
  }
  t += ' ';
  t += kPasskeyQuestion;
  return t;
}

PasskeyPrompt build_passkey_prompt(int64_t key, double depth, size_t max_tokens,
                                   const std::function<size_t(const std::string&)>& count_tokens) {
  auto make = [&](size_t n) {
    PasskeyPrompt p;
    p.text = passkey_text(key, n, depth);
    p.n_filler = n;
    p.key_offset = p.text.find(passkey_sentence(key));
    p.n_tokens = count_tokens(p.text);
    return p;
  };
  PasskeyPrompt lo = make(0);
  if (lo.n_tokens > max_tokens)
    bad("the passkey prompt without filler already has " + num(lo.n_tokens) + " tokens, more than the " +
        num(max_tokens) + " available at this context: use a larger --ctx");
  // Grow an upper bound, then bisect: the token count is monotone in the filler count.
  size_t hi = 1;
  while (true) {
    PasskeyPrompt p = make(hi);
    if (p.n_tokens > max_tokens) break;
    lo = std::move(p);
    if (hi > (size_t(1) << 40)) break;
    hi *= 2;
  }
  size_t a = lo.n_filler, b = hi;   // fits at a, not at b
  while (b - a > 1) {
    const size_t m = a + (b - a) / 2;
    PasskeyPrompt p = make(m);
    if (p.n_tokens <= max_tokens) {
      a = m;
      lo = std::move(p);
    } else {
      b = m;
    }
  }
  return lo;
}

std::optional<int64_t> first_integer(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && !std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == text.size()) return std::nullopt;
  int64_t v = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (v > (INT64_MAX - 9) / 10) return v;   // absurdly long: saturate (never equals a key)
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

int64_t passkey_key(uint64_t seed, size_t ctx_index, size_t depth_index, size_t trial) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(ctx_index) << 40) ^ (uint64_t(depth_index) << 20) ^ trial;
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return int64_t(1 + x % 50000);
}

// ---------------------------------------------------------------------------

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      size_t a = cur.find_first_not_of(" \t"), b = cur.find_last_not_of(" \t");
      if (a != std::string::npos) out.push_back(cur.substr(a, b - a + 1));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

std::vector<int64_t> parse_int_list(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  for (std::string item : split_list(s)) {
    int64_t mult = 1;
    if (!item.empty() && (item.back() == 'k' || item.back() == 'K')) {
      mult = 1024;
      item.pop_back();
    }
    const std::optional<int64_t> v = to_integer(item);
    if (!v || *v < 1 || *v > (int64_t(1) << 30) / mult)
      bad_flag_value(flag, s, "a comma list of positive integers (e.g. 512,1024,2k)");
    out.push_back(*v * mult);
  }
  if (out.empty()) bad_flag_value(flag, s, "a comma list of positive integers");
  return out;
}

std::vector<double> parse_float_list(const std::string& s, const std::string& flag) {
  std::vector<double> out;
  for (const std::string& item : split_list(s)) {
    const std::optional<double> v = to_number(item);
    if (!v || !std::isfinite(*v) || *v < 0 || *v > 1) bad_flag_value(flag, s, "a comma list of numbers in [0, 1]");
    out.push_back(*v);
  }
  if (out.empty()) bad_flag_value(flag, s, "a comma list of numbers in [0, 1]");
  return out;
}

std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& origin) {
  std::vector<int32_t> out;
  size_t i = 0, line = 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    const std::string tok = text.substr(i, j - i);
    const std::optional<int64_t> v = to_integer(tok);
    if (!v || *v < 0 || *v > INT32_MAX)
      throw Error(ErrorCode::format, origin + ":" + std::to_string(line) + ": '" + tok +
                                         "' is not a token id (expected whitespace-separated non-negative integers)");
    out.push_back(int32_t(*v));
    i = j;
  }
  return out;
}

}  // namespace reach::eval
