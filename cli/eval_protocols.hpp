#pragma once
// Pure pieces of `reach eval` (docs/EXTRAPOLATION.md §7): which tokens each
// protocol feeds and scores, the scheme presets per context length, passkey
// prompts and answers, and NLL / top-1 scoring of logits rows in double.
// No GPU here: tests/test_eval.cpp checks these directly.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/model_config.hpp"
#include "runtime/config/position_schemes.hpp"

namespace reach::eval {

// ---------------------------------------------------------------------------
// Last-segment protocol (§7.2)

// For a sample of T tokens and context L: the model reads
// tokens[input_begin, input_begin + L) = tokens[T−L−1 : T−1] and is scored on
// its last n_scored predictions, whose targets are tokens[T−N : T].
// Row i of the logits (0 <= i < L) predicts tokens[input_begin + i + 1].
struct Window {
  size_t input_begin = 0;   // T − L − 1
  size_t length = 0;        // L tokens read
  size_t n_prefix = 0;      // L − N rows read without logits
  size_t n_scored = 0;      // N
  size_t target_begin = 0;  // T − N: index of the first scored target
};
// Throws Error(invalid_argument) when T < L + 1, N > L or N == 0.
Window last_segment_window(size_t T, size_t L, size_t N);

// ---------------------------------------------------------------------------
// llama-perplexity's perplexity (`--mode ppl`, tools/perplexity/perplexity.cpp)

// Chunk c covers tokens[begin, begin + n_ctx) and is read alone from position
// 0; its first token is replaced by BOS only when the tokenizer adds a BOS
// (PplBos::add); rows first..n_ctx−2 are scored (first = n_ctx/2), i.e.
// targets tokens[begin + first + 1, begin + n_ctx).
struct PplChunk {
  size_t begin = 0;
  size_t n_ctx = 0;
  size_t first = 0;       // first scored row
  size_t n_scored = 0;    // n_ctx − 1 − first
};
// min(floor(T / n_ctx), max_chunks) chunks; throws Error(invalid_argument)
// when T < 2·n_ctx (llama-perplexity's requirement, whatever --chunks says),
// n_ctx < 2 or max_chunks == 0.
std::vector<PplChunk> ppl_chunks(size_t T, size_t n_ctx, std::optional<size_t> max_chunks = std::nullopt);

// The vocabulary's add-BOS setting as llama-perplexity sees it, i.e. as the
// GGUF converter writes tokenizer.ggml.add_bos_token: a boolean add_bos_token
// in tokenizer_config.json, else whether the tokenizer.json post-processor
// puts a token before the text (Tokenizer::adds_bos()).
struct PplBos {
  bool add = false;     // BOS starts a -f sample and replaces token 0 of every chunk
  int32_t id = -1;      // valid when add
  std::string source;   // where the setting came from, for the log
};
// config_add_bos: tokenizer_config.json's add_bos_token when it is a boolean;
// tokenizer_adds / prefix_id: Tokenizer::adds_bos() and the token it puts
// first (nullopt without a tokenizer.json); config_bos: config.json's
// bos_token_id (else a BOS the tokenizer names).  The BOS id is prefix_id
// when the post-processor adds it, else config_bos.  Throws
// Error(invalid_argument) when a BOS is to be added but no id is known.
PplBos ppl_bos(std::optional<bool> config_add_bos, std::optional<bool> tokenizer_adds,
               std::optional<int32_t> prefix_id, std::optional<int32_t> config_bos);

// ---------------------------------------------------------------------------
// Repeated text (§7.4)

// The first min(M, tokens.size()) tokens repeated (the last copy cut) to
// exactly `total` tokens.  Throws Error(invalid_argument) when tokens has
// fewer than M tokens or M == 0.
std::vector<int32_t> repeat_tokens(const std::vector<int32_t>& tokens, size_t M, size_t total);

// ---------------------------------------------------------------------------
// Scoring

struct Score {
  double nll_sum = 0;     // Σ −log p(target)
  size_t n = 0;           // predictions scored
  size_t correct = 0;     // argmax == target
  double nll2_sum = 0;    // Σ nll², for the ppl mode's error estimate
  double mean_nll() const { return n ? nll_sum / double(n) : 0.0; }
  double ppl() const;
  double accuracy() const { return n ? double(correct) / double(n) : 0.0; }
  void add(const Score& o);
};

// log softmax(row)[target] in double (max-subtracted log-sum-exp).
double log_prob(const float* row, size_t vocab, int32_t target);
// Scores `rows` consecutive logits rows ([rows, vocab], row-major) against
// targets[0..rows).  Appends each row's log-probability to *logprobs when
// given.  Accuracy counts argmax == target (first maximum on ties).
// Throws Error(invalid_argument) for a target outside [0, vocab).
Score score_rows(const float* logits, size_t rows, size_t vocab, const int32_t* targets,
                 std::vector<double>* logprobs = nullptr);

// ---------------------------------------------------------------------------
// Scheme presets (`--schemes`)

// The knobs of the presets; unset = the documented default for that L.
struct PresetKnobs {
  std::optional<int64_t> rerope_window;   // --rerope-window
  std::optional<double> leaky_k;          // --leaky-k
  std::optional<int64_t> se_group;        // --self-extend-group
  std::optional<int64_t> se_window;       // --self-extend-window
  std::optional<int64_t> logn;            // --logn
};

struct SchemeRun {
  std::string name;             // the preset as given ("pi" stays "pi")
  SchemeOverrides overrides;    // what the Session applies on top of config.json
  std::string params;           // overrides.describe(), "config.json" when empty
};

// L_train: rope_scaling original_max_position_embeddings if set, else
// max_position_embeddings.
int64_t training_length(const ModelConfig& cfg);
// Known names: default, linear, pi, ntk, dynamic, yarn, rerope, leaky_rerope,
// self_extend, logn ('-' may replace '_').  Throws Error(invalid_argument).
std::string normalize_preset(const std::string& name);
const char* preset_help();   // lines for --help
// Builds the overrides of one preset at context L.  `user` are the scheme
// flags of the command line: `default` and `logn` keep all of them; the rope
// presets keep only the non-rope ones (--logn, --qk-norm, --cos-n,
// --attn-window, --attn-sinks) and take --rerope-window, --leaky-k,
// --self-extend-group/-window as their parameters.
SchemeRun preset_overrides(const std::string& preset, int64_t L, int64_t L_train, const SchemeOverrides& user);

// The documented defaults, exposed for tests:
//   s = max(1, L / L_train)                      (linear, ntk, dynamic, yarn)
//   rerope / leaky window w = max(1, L_train / 4)
//   leaky k = max(2, ceil((L − w) / (L_train − w)))  (keeps w + (L−w)/k <= L_train)
//   self_extend: G = smallest integer >= 2 with (L_train − W)·G + W >= L,
//                W = L_train/4 rounded down to a multiple of G (at least G)
double preset_factor(int64_t L, int64_t L_train);
int64_t preset_window(int64_t L_train);
double preset_leaky_k(int64_t L, int64_t L_train, int64_t w);
std::pair<int64_t, int64_t> preset_self_extend(int64_t L, int64_t L_train, std::optional<int64_t> group,
                                               std::optional<int64_t> window);   // (G, W)

// ---------------------------------------------------------------------------
// Passkey retrieval (§7.3)

extern const char* const kPasskeyIntro;
extern const char* const kPasskeyFiller;
extern const char* const kPasskeyQuestion;
std::string passkey_sentence(int64_t key);   // "The pass key is K. Remember it. K is the pass key."

// intro + filler × n_filler with the key sentence after round(depth·n_filler)
// fillers + question.  Pieces are joined by single spaces.
std::string passkey_text(int64_t key, size_t n_filler, double depth);

struct PasskeyPrompt {
  std::string text;
  size_t n_filler = 0;
  size_t key_offset = 0;   // byte offset of the key sentence in text
  size_t n_tokens = 0;     // count_tokens(text)
};
// The largest filler count whose text has at most max_tokens tokens (by
// count_tokens); throws Error(invalid_argument) when even zero filler does
// not fit.
PasskeyPrompt build_passkey_prompt(int64_t key, double depth, size_t max_tokens,
                                   const std::function<size_t(const std::string&)>& count_tokens);
// The first run of ASCII digits in the text (leading '-' ignored), if any.
std::optional<int64_t> first_integer(const std::string& text);
// A key in [1, 50000] for (seed, ctx index, depth index, trial), portable
// (splitmix64, no <random> distribution).
int64_t passkey_key(uint64_t seed, size_t ctx_index, size_t depth_index, size_t trial);

// ---------------------------------------------------------------------------
// Small parsers for the command line

// "512,1024,2k" -> {512, 1024, 2048} (k = ×1024); throws naming `flag`.
std::vector<int64_t> parse_int_list(const std::string& s, const std::string& flag);
std::vector<double> parse_float_list(const std::string& s, const std::string& flag);
std::vector<std::string> split_list(const std::string& s);
// Whitespace-separated token ids; throws Error(format) naming the file on a bad id.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& origin);

}  // namespace reach::eval
