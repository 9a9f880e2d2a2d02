#pragma once
// The modes of `reach eval`, one function each.  cmd_eval.cpp parses the
// options and builds an EvalPlan (sample, windows, prompts: host only), then
// opens the model and runs one of these.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/eval_protocols.hpp"
#include "cli/options.hpp"
#include "cli/progress_bar.hpp"
#include "runtime/config/position_schemes.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/session.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach::cli {

constexpr size_t kPasskeyGen = 10;   // greedy tokens decoded per passkey trial
// The progress bar formats byte counts in MiB: one token is counted as
// 1 MiB so the bar's numbers read as tokens and tokens/s.
constexpr uint64_t kTokenUnit = uint64_t(1) << 20;

// The command line of `reach eval`.
struct EvalOptions {
  std::string model_dir, text_file, tokens_file, device, format = "md", plot_path, dump_path, mode = "last";
  std::string ctx_arg, schemes_arg = "default", depths_arg = "0,0.25,0.5,0.75,1";
  std::optional<int64_t> score_last, repeat_len;
  std::optional<int64_t> chunks;   // --chunks (ppl): at most this many, -1 = all
  int64_t trials = 5, chunk = kDefaultPrefillChunk;
  uint64_t seed = 0;
  bool verbose = false;
  bool full_kv = false;   // --full-kv (SessionOptions::full_kv)
  KvType cache_type_k = kFrontEndKvType, cache_type_v = kFrontEndKvType;   // -ctk / -ctv
  bool calibrate_keys = true;                                                // --no-key-calib: false
  std::string key_calib_file, key_calib_save;                                // --kv-calib / --kv-calib-save
  QuantActivations activations = QuantActivations::device;   // --exact-activations / --int8-activations
  SchemeOverrides user;   // scheme flags given on the command line
  std::optional<WType> quantize;   // --quantize
};

// One passkey trial: the prompt for context ctxs[ci] and depth depths[di].
struct PasskeyTrial {
  size_t ci, di;
  int64_t key;
  std::vector<int32_t> ids;
};

// Everything decided before any GPU work.
struct EvalPlan {
  EvalOptions opt;                  // user.original_ctx dropped where it only set L_train
  int64_t L_train = 0;
  std::vector<std::string> schemes;
  std::vector<int64_t> ctxs;
  std::vector<double> depths;
  std::optional<Tokenizer> tokenizer;   // -f and --passkey
  std::vector<int32_t> sample;          // last / repeat / ppl
  size_t N = 0;                         // predictions scored at every L (last / repeat)
  std::vector<eval::Window> windows;    // per ctxs[i] (last / repeat)
  std::vector<eval::PplChunk> chunks;   // ppl
  eval::PplBos bos;                     // ppl
  std::vector<PasskeyTrial> passkey_trials;
  std::vector<size_t> prompt_max;       // passkey: longest prompt per (ci, di), ci * depths.size() + di
};

// Each mode prints its progress on stderr and its table on stdout, writes
// --plot, and appends its --dump-logprobs blocks to *dump.
void eval_last_segment(Model& model, const EvalPlan& plan, ProgressBar& bar, std::string* dump);   // last, repeat
void eval_ppl(Model& model, const EvalPlan& plan, ProgressBar& bar, std::string* dump);
void eval_passkey(Model& model, const EvalPlan& plan, ProgressBar& bar);

// Throws Error(io) naming `what` and the path.
void write_file(const std::string& path, const std::string& text, const char* what);

}  // namespace reach::cli
