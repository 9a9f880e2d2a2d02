// CLI scheme flags, their application to a ModelConfig, and the per-layer
// AttentionSpecs (docs EXTRAPOLATION.md §1.2, §1.3, §3, §4, §5.6).
#include "runtime/schemes.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.hpp"
#include "runtime/flag_values.hpp"

namespace reach {

using nlohmann::json;

namespace {

constexpr const char* kRopeTypes = "default, none, linear, dynamic, yarn, llama3, ntk, rerope, leaky_rerope, self_extend";

std::string fmt(double v) {
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}

// "leaky-rerope" / "self-extend" spellings are accepted as well.
std::string normalize_type(std::string t) {
  for (char& c : t)
    if (c == '-') c = '_';
  return t;
}

bool known_type(const std::string& t) {
  for (const char* k : {"default", "none", "linear", "dynamic", "yarn", "llama3", "ntk", "rerope", "leaky_rerope",
                        "self_extend"})
    if (t == k) return true;
  return false;
}

json rope_to_json(const RopeScaling& r) {
  json j = {{"rope_type", rope_type_name(r.type)}};
  const bool hf = r.type == RopeType::default_ || r.type == RopeType::linear || r.type == RopeType::dynamic ||
                  r.type == RopeType::yarn || r.type == RopeType::llama3;
  if (hf && r.original_max_position > 0) j["original_max_position_embeddings"] = r.original_max_position;
  switch (r.type) {
    case RopeType::linear: case RopeType::dynamic: case RopeType::ntk: j["factor"] = r.factor; break;
    case RopeType::yarn:
      j["factor"] = r.factor;
      j["beta_fast"] = r.beta_fast;
      j["beta_slow"] = r.beta_slow;
      if (r.attention_factor) j["attention_factor"] = *r.attention_factor;
      if (r.mscale) j["mscale"] = *r.mscale;
      if (r.mscale_all_dim) j["mscale_all_dim"] = *r.mscale_all_dim;
      j["truncate"] = r.truncate;
      break;
    case RopeType::llama3:
      j["factor"] = r.factor;
      j["low_freq_factor"] = r.low_freq_factor;
      j["high_freq_factor"] = r.high_freq_factor;
      break;
    case RopeType::rerope: j["window"] = r.window; break;
    case RopeType::leaky_rerope: j["window"] = r.window; j["factor"] = r.leaky_k; break;
    case RopeType::self_extend: j["window"] = r.window; j["group"] = r.group; break;
    default: break;
  }
  return j;
}

json attention_to_json(const ReachAttention& a) {
  json j = json::object();
  j["logn_train_len"] = a.logn_train_len;
  j["qk_norm"] = qk_norm_name(a.qk_norm);
  if (a.cos_n) j["cos_n"] = *a.cos_n;
  j["window"] = a.window;
  j["sinks"] = a.sinks;
  if (a.alibi_max_bias) j["alibi_max_bias"] = *a.alibi_max_bias;
  if (!a.layers.empty()) {
    json layers = json::object();
    for (const auto& [idx, la] : a.layers) {
      json l = json::object();
      if (la.window) l["window"] = *la.window;
      if (la.rope) l["rope"] = *la.rope;
      if (la.logn) l["logn"] = *la.logn;
      layers[std::to_string(idx)] = l;
    }
    j["layers"] = layers;
  }
  return j;
}

// Re-throws a config-style error as a command-line one.
[[noreturn]] void rethrow_cli(const Error& e, const char* key_hint) {
  const ErrorCode code = e.code() == ErrorCode::unsupported ? ErrorCode::unsupported : ErrorCode::invalid_argument;
  throw Error(code, std::string(e.what()) + " [" + key_hint + "]");
}

[[noreturn]] void fail_schemes(ErrorCode code, const std::string& msg) {
  throw Error(code, "position schemes: " + msg);
}

const char* layout_name(KeyCacheMode m) { return m == KeyCacheMode::raw ? "raw" : "rotated"; }

std::string layer_desc(const AttentionSpec& s) {
  std::ostringstream o;
  if (s.alibi_max_bias > 0) o << "ALiBi (max_bias " << fmt(s.alibi_max_bias) << ")";
  else if (!s.rope) o << "no RoPE";
  else if (!s.dual()) o << "RoPE";
  else {
    o << "dual branch W=" << s.branch_window << " (q2 ";
    switch (s.q2_mode) {
      case Q2Pos::constant: o << "at " << s.q2_const; break;
      case Q2Pos::shifted: o << "at i+" << s.q2_const; break;
      case Q2Pos::grouped: o << "at i/" << s.group << "+" << s.q2_const; break;
    }
    o << ", k2 ";
    switch (s.k2_mode) {
      case K2Pos::unrotated: o << "unrotated"; break;
      case K2Pos::same: o << "at m"; break;
      case K2Pos::grouped: o << "at m/" << s.group; break;
    }
    if (s.branch2_table2) o << ", table 2";
    o << ")";
  }
  o << ", cache " << layout_name(s.cache);
  if (s.window) {
    o << ", window " << s.window;
    if (s.sinks) o << " + " << s.sinks << " sinks";
  } else {
    o << ", full";
  }
  if (s.logn_train_len > 0) o << ", logn " << fmt(s.logn_train_len);
  switch (s.norm) {
    case ScoreNorm::none: o << ", scale " << fmt(s.scale); break;
    case ScoreNorm::key: o << ", key norm"; break;
    case ScoreNorm::query: o << ", query norm"; break;
    case ScoreNorm::cos:
      o << ", cos norm (lambda = 4 ln ";
      if (s.cos_n > 0) o << fmt(s.cos_n);
      else o << "(i+1)";
      o << ")";
      break;
  }
  return o.str();
}

}  // namespace

// ---------------------------------------------------------------------------
// Flags

bool SchemeOverrides::empty() const {
  return !rope_scaling && !rope_factor && !original_ctx && !rerope_window && !leaky_k && !se_group && !se_window &&
         !logn && !qk_norm && !cos_n && !attn_window && !attn_sinks;
}

std::string SchemeOverrides::describe() const {
  std::ostringstream o;
  auto add = [&](const char* flag, const std::string& v) { o << (o.tellp() > 0 ? " " : "") << flag << " " << v; };
  if (rope_scaling) add("--rope-scaling", *rope_scaling);
  if (rope_factor) add("--rope-factor", fmt(*rope_factor));
  if (original_ctx) add("--original-ctx", std::to_string(*original_ctx));
  if (rerope_window) add("--rerope-window", std::to_string(*rerope_window));
  if (leaky_k) add("--leaky-k", fmt(*leaky_k));
  if (se_group) add("--self-extend-group", std::to_string(*se_group));
  if (se_window) add("--self-extend-window", std::to_string(*se_window));
  if (logn) add("--logn", std::to_string(*logn));
  if (qk_norm) add("--qk-norm", *qk_norm);
  if (cos_n) add("--cos-n", fmt(*cos_n));
  if (attn_window) add("--attn-window", std::to_string(*attn_window));
  if (attn_sinks) add("--attn-sinks", std::to_string(*attn_sinks));
  return o.str();
}

bool parse_scheme_flag(const std::vector<std::string>& args, size_t& i, SchemeOverrides& out) {
  if (i >= args.size()) return false;
  const std::string& a = args[i];
  std::string flag = a, value;
  bool inline_value = false;
  if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
    flag = a.substr(0, eq);
    value = a.substr(eq + 1);
    inline_value = true;
  }
  static const char* const kFlags[] = {"--rope-scaling", "--rope-factor", "--original-ctx", "--rerope-window",
                                       "--leaky-k", "--self-extend-group", "--self-extend-window", "--logn",
                                       "--qk-norm", "--cos-n", "--attn-window", "--attn-sinks"};
  bool known = false;
  for (const char* f : kFlags) known = known || flag == f;
  if (!known) return false;
  size_t j = i;
  if (!inline_value) {
    if (i + 1 >= args.size()) throw Error(ErrorCode::invalid_argument, "option " + flag + " needs a value");
    j = i + 1;
    value = args[j];
  }
  if (flag == "--rope-scaling") {
    std::string t = normalize_type(value);
    if (!known_type(t)) bad_flag_value(flag, value, std::string("one of ") + kRopeTypes);
    out.rope_scaling = t;
  } else if (flag == "--rope-factor") {
    out.rope_factor = flag_positive_number(flag, value, "a number > 0 (the scaling factor s)");
  } else if (flag == "--original-ctx") {
    out.original_ctx = flag_integer(flag, value, 1, INT32_MAX, "an integer > 0 (the trained context length)");
  } else if (flag == "--rerope-window") {
    out.rerope_window = flag_integer(flag, value, 1, INT32_MAX, "an integer > 0 (e.g. 512)");
  } else if (flag == "--leaky-k") {
    out.leaky_k = flag_positive_number(flag, value, "a number > 0 (e.g. 16)");
  } else if (flag == "--self-extend-group") {
    out.se_group = flag_integer(flag, value, 1, INT32_MAX, "an integer > 0 (e.g. 4)");
  } else if (flag == "--self-extend-window") {
    out.se_window = flag_integer(flag, value, 1, INT32_MAX, "an integer > 0 and a multiple of the group (e.g. 1024)");
  } else if (flag == "--logn") {
    const int64_t l = flag_integer(flag, value, 0, INT32_MAX, "0 (off) or the training length > 1 (e.g. 4096)");
    if (l == 1) bad_flag_value(flag, value, "0 (off) or the training length > 1 (e.g. 4096)");
    out.logn = l;
  } else if (flag == "--qk-norm") {
    if (value != "none" && value != "key" && value != "query" && value != "cos")
      bad_flag_value(flag, value, "none, key, query or cos");
    out.qk_norm = value;
  } else if (flag == "--cos-n") {
    out.cos_n = flag_positive_number(flag, value, "a number > 0 (lambda = 4 ln n)");
  } else if (flag == "--attn-window") {
    out.attn_window = flag_integer(flag, value, 0, INT32_MAX, "an integer >= 0 (0 = full attention)");
  } else if (flag == "--attn-sinks") {
    out.attn_sinks = flag_integer(flag, value, 0, INT32_MAX, "an integer >= 0");
  }
  i = j;
  return true;
}

std::string scheme_flags_help() {
  return "position schemes (override config.json rope_scaling / reach_attention):\n"
         "  --rope-scaling TYPE       default|none|linear|dynamic|yarn|llama3|ntk|rerope|leaky_rerope|self_extend\n"
         "                            (replaces the config's rope_scaling; llama3 keeps low/high_freq_factor)\n"
         "  --rope-factor S           scaling factor of linear/dynamic/yarn/llama3/ntk\n"
         "  --original-ctx N          original (trained) context of dynamic/yarn/llama3\n"
         "  --rerope-window W         ReRoPE / Leaky ReRoPE window (alone: implies rerope)\n"
         "  --leaky-k K               Leaky ReRoPE slope divisor (implies leaky_rerope; W·(K−1) must be whole)\n"
         "  --self-extend-group G     Self-Extend group size (implies self_extend)\n"
         "  --self-extend-window W    Self-Extend neighbour window (a multiple of G)\n"
         "  --logn L                  log-n query scaling with training length L (0 = off)\n"
         "  --qk-norm MODE            none|key|query|cos (KeyNorm / QueryNorm / CosA)\n"
         "  --cos-n N                 CosA lambda = 4 ln N (default: query position + 1)\n"
         "  --attn-window W           sliding window for every layer (0 = full)\n"
         "  --attn-sinks S            first S tokens stay visible with a window\n";
}

void apply_overrides(ModelConfig& cfg, const SchemeOverrides& o) {
  if (o.empty()) return;
  const std::string where = "command line (" + o.describe() + ")";
  const bool rope_flags = o.rope_scaling || o.rope_factor || o.original_ctx || o.rerope_window || o.leaky_k ||
                          o.se_group || o.se_window;
  if (rope_flags) {
    const RopeType cur = cfg.rope.type;
    const std::string cur_name = rope_type_name(cur);
    std::string kind;
    bool fresh;
    if (o.rope_scaling) {
      kind = normalize_type(*o.rope_scaling);
      if (!known_type(kind))
        throw Error(ErrorCode::invalid_argument, where + ": unknown --rope-scaling '" + *o.rope_scaling + "' (known: " +
                                                     kRopeTypes + ")");
      fresh = true;
    } else if (o.rerope_window || o.leaky_k) {
      kind = o.leaky_k || cur == RopeType::leaky_rerope ? "leaky_rerope" : "rerope";
      fresh = kind != cur_name;
    } else if (o.se_group || o.se_window) {
      kind = "self_extend";
      fresh = kind != cur_name;
    } else {
      kind = cur_name;
      fresh = false;
    }
    auto reject = [&](bool given, const char* flag, const char* applies) {
      if (given)
        throw Error(ErrorCode::invalid_argument, where + ": " + flag + " does not apply to rope scaling \"" + kind +
                                                     "\" (it applies to " + applies + ")");
    };
    const bool takes_factor = kind == "linear" || kind == "dynamic" || kind == "yarn" || kind == "llama3" || kind == "ntk";
    reject(o.rope_factor && !takes_factor, "--rope-factor",
           kind == "leaky_rerope" ? "linear, dynamic, yarn, llama3, ntk; use --leaky-k for Leaky ReRoPE"
                                  : "linear, dynamic, yarn, llama3, ntk");
    reject(o.original_ctx && kind != "dynamic" && kind != "yarn" && kind != "llama3", "--original-ctx",
           "dynamic, yarn, llama3");
    reject(o.rerope_window && kind != "rerope" && kind != "leaky_rerope", "--rerope-window", "rerope, leaky_rerope");
    reject(o.leaky_k && kind != "leaky_rerope", "--leaky-k", "leaky_rerope");
    reject(o.se_group && kind != "self_extend", "--self-extend-group", "self_extend");
    reject(o.se_window && kind != "self_extend", "--self-extend-window", "self_extend");

    json r;
    if (!fresh) {
      r = rope_to_json(cfg.rope);
    } else {
      r = json{{"rope_type", kind}};
      // An implied switch between rerope and leaky_rerope keeps the window.
      const bool rr_family = kind == "rerope" || kind == "leaky_rerope";
      if (!o.rope_scaling && rr_family && (cur == RopeType::rerope || cur == RopeType::leaky_rerope))
        r["window"] = cfg.rope.window;
      if (kind == "llama3") {   // as tools/reference_forward.py
        r["low_freq_factor"] = cfg.rope.low_freq_factor;
        r["high_freq_factor"] = cfg.rope.high_freq_factor;
        r["original_max_position_embeddings"] =
            cfg.rope.original_max_position > 0 ? cfg.rope.original_max_position : cfg.max_position_embeddings;
      }
    }
    if (o.rope_factor) r["factor"] = *o.rope_factor;
    if (o.original_ctx) r["original_max_position_embeddings"] = *o.original_ctx;
    if (o.rerope_window) r["window"] = *o.rerope_window;
    if (o.leaky_k) r["factor"] = *o.leaky_k;
    if (o.se_group) r["group"] = *o.se_group;
    if (o.se_window) r["window"] = *o.se_window;
    try {
      cfg.rope = parse_rope_scaling(r, where + ": rope_scaling");
    } catch (const Error& e) {
      rethrow_cli(e, "factor = --rope-factor (--leaky-k for leaky_rerope), original_max_position_embeddings = "
                     "--original-ctx, window = --rerope-window / --self-extend-window, group = --self-extend-group");
    }
  }
  if (o.logn || o.qk_norm || o.cos_n || o.attn_window || o.attn_sinks) {
    json a = attention_to_json(cfg.attn);
    if (o.logn) a["logn_train_len"] = *o.logn;
    if (o.qk_norm) {
      a["qk_norm"] = *o.qk_norm;
      if (*o.qk_norm != "cos") a.erase("cos_n");
    }
    if (o.cos_n) a["cos_n"] = *o.cos_n;
    if (o.attn_window) a["window"] = *o.attn_window;
    if (o.attn_sinks) a["sinks"] = *o.attn_sinks;
    try {
      cfg.attn = parse_reach_attention(a, where + ": reach_attention", cfg.n_layers);
    } catch (const Error& e) {
      rethrow_cli(e, "logn_train_len = --logn, qk_norm = --qk-norm, cos_n = --cos-n, window = --attn-window, "
                     "sinks = --attn-sinks");
    }
  }
}

// ---------------------------------------------------------------------------
// Resolution

ResolvedSchemes resolve_schemes(const ModelConfig& cfg, uint32_t context, int64_t l_test) {
  const auto fail = [](ErrorCode code, const std::string& msg) { fail_schemes(code, msg); };
  if (context == 0) fail(ErrorCode::invalid_argument, "context must be >= 1 position");
  if (cfg.n_layers <= 0 || cfg.n_heads <= 0 || cfg.n_kv_heads <= 0 || cfg.head_dim <= 0)
    fail(ErrorCode::invalid_argument, "the model config has no layer/head sizes (was it parsed?)");
  if (cfg.rotary_dim < 2 || cfg.rotary_dim > cfg.head_dim || cfg.rotary_dim % 2)
    fail(ErrorCode::invalid_argument, "rotary dim " + std::to_string(cfg.rotary_dim) + " must be even, >= 2 and <= head_dim " +
                                          std::to_string(cfg.head_dim));

  ResolvedSchemes R;
  R.rope = cfg.rope;
  R.l_test = l_test > 0 ? l_test : static_cast<int64_t>(context);
  R.table1 = rope_freqs(cfg, R.l_test);
  R.table1_positions = context;

  const ReachAttention& at = cfg.attn;
  const bool alibi = at.alibi_max_bias.has_value();
  if (alibi && cfg.rope.type != RopeType::default_ && cfg.rope.type != RopeType::none_)
    fail(ErrorCode::unsupported, std::string("reach_attention.alibi_max_bias replaces RoPE, but rope_scaling is \"") +
                                     rope_type_name(cfg.rope.type) + "\" - remove one of them");

  AttentionSpec base;
  base.n_heads = static_cast<uint32_t>(cfg.n_heads);
  base.n_kv_heads = static_cast<uint32_t>(cfg.n_kv_heads);
  base.head_dim = static_cast<uint32_t>(cfg.head_dim);
  base.rotary_dim = static_cast<uint32_t>(cfg.rotary_dim);
  base.rope = !alibi;
  base.alibi_max_bias = alibi ? static_cast<float>(*at.alibi_max_bias) : 0.0f;
  switch (at.qk_norm) {
    case QkNorm::none: base.norm = ScoreNorm::none; break;
    case QkNorm::key: base.norm = ScoreNorm::key; break;
    case QkNorm::query: base.norm = ScoreNorm::query; break;
    case QkNorm::cos: base.norm = ScoreNorm::cos; break;
  }
  // The normalised modes carry their own temperature (EXTRAPOLATION.md seeds): no 1/sqrt(d).
  base.scale = base.norm == ScoreNorm::none ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.head_dim))) : 1.0f;
  base.cos_n = at.cos_n ? static_cast<float>(*at.cos_n) : 0.0f;
  base.logn_train_len = static_cast<float>(at.logn_train_len);

  auto u32 = [](int64_t v, const char* what) -> uint32_t {
    if (v < 0 || v >= static_cast<int64_t>(INT32_MAX))
      fail_schemes(ErrorCode::invalid_argument, std::string(what) + " " + std::to_string(v) + " is out of range");
    return static_cast<uint32_t>(v);
  };
  // Global mask: reach_attention.window, else Mistral's sliding_window when it bites.
  int64_t global_window = at.window;
  if (!global_window && cfg.sliding_window && *cfg.sliding_window < static_cast<int64_t>(context))
    global_window = *cfg.sliding_window;

  const RopeScaling& rs = cfg.rope;
  switch (rs.type) {
    case RopeType::rerope: {
      base.branch_window = u32(rs.window, "rerope window");
      base.q2_mode = Q2Pos::constant;
      base.q2_const = static_cast<int32_t>(rs.window);
      base.k2_mode = K2Pos::unrotated;
      base.cache = KeyCacheMode::raw;
      R.table1_positions = std::max<uint32_t>(context, static_cast<uint32_t>(rs.window) + 1);
      break;
    }
    case RopeType::leaky_rerope: {
      const double shift = static_cast<double>(rs.window) * (rs.leaky_k - 1.0);
      if (!(rs.leaky_k >= 1.0))
        fail(ErrorCode::unsupported, "leaky_rerope factor k = " + fmt(rs.leaky_k) +
                                         " < 1 would make distant tokens advance faster than near ones; use k >= 1");
      if (shift != std::floor(shift) || shift > INT32_MAX)
        fail(ErrorCode::unsupported, "leaky_rerope window·(k−1) = " + std::to_string(rs.window) + "·(" + fmt(rs.leaky_k) +
                                         "−1) = " + fmt(shift) +
                                         " is not a whole number of positions; the cos/sin tables are indexed by "
                                         "integer positions - choose k so that window·(k−1) is whole (e.g. an integer k)");
      base.branch_window = u32(rs.window, "leaky_rerope window");
      base.q2_mode = Q2Pos::shifted;
      base.q2_const = static_cast<int32_t>(shift);
      base.k2_mode = K2Pos::same;
      base.branch2_table2 = true;
      base.cache = KeyCacheMode::raw;
      RopeFreqs t2;
      t2.inv_freq = R.table1.inv_freq;
      for (double& x : t2.inv_freq) x /= rs.leaky_k;
      t2.attention_factor = 1.0;
      R.table2 = std::move(t2);
      const uint64_t rows = static_cast<uint64_t>(context) + static_cast<uint64_t>(shift);
      if (rows >= UINT32_MAX) fail(ErrorCode::invalid_argument, "leaky_rerope table 2 would need " + std::to_string(rows) + " rows");
      R.table2_positions = static_cast<uint32_t>(rows);
      break;
    }
    case RopeType::self_extend: {
      const int64_t G = rs.group, W = rs.window;
      if (G < 1 || W < 1 || W % G)
        fail(ErrorCode::invalid_argument, "self_extend group " + std::to_string(G) + " must divide window " + std::to_string(W));
      base.branch_window = u32(W, "self_extend window");
      base.q2_mode = Q2Pos::grouped;
      base.q2_const = static_cast<int32_t>(W - W / G);
      base.k2_mode = K2Pos::grouped;
      base.group = static_cast<uint32_t>(G);
      base.cache = KeyCacheMode::raw;
      const int64_t max_q2 = (static_cast<int64_t>(context) - 1) / G + W - W / G;
      R.table1_positions = static_cast<uint32_t>(std::max<int64_t>(context, max_q2 + 1));
      break;
    }
    default: break;   // single branch, rotated cache (dynamic: L_test fixed per request)
  }

  const int64_t L = at.logn_train_len;
  R.layers.reserve(static_cast<size_t>(cfg.n_layers));
  for (int64_t li = 0; li < cfg.n_layers; ++li) {
    AttentionSpec s = base;
    int64_t window = global_window;
    if (auto it = at.layers.find(static_cast<int>(li)); it != at.layers.end()) {
      const LayerAttention& lo = it->second;
      if (lo.window) window = *lo.window;
      if (lo.logn) {
        if (*lo.logn && !L)
          fail(ErrorCode::invalid_argument, "reach_attention.layers[" + std::to_string(li) +
                                                "] asks for logn but logn_train_len is not set - add "
                                                "\"logn_train_len\" (or --logn L)");
        s.logn_train_len = *lo.logn ? static_cast<float>(L) : 0.0f;
      }
      if (lo.rope && !*lo.rope) {   // NoPE layer: no rotation, single branch
        s.rope = false;
        s.branch_window = UINT32_MAX;
        s.q2_mode = Q2Pos::constant;
        s.q2_const = 0;
        s.k2_mode = K2Pos::unrotated;
        s.group = 1;
        s.branch2_table2 = false;
        s.cache = KeyCacheMode::rotated;   // nothing is rotated: the cache holds k as is
      }
    }
    s.window = u32(window, "attention window");
    s.sinks = s.window ? u32(at.sinks, "attention sinks") : 0;
    R.layers.push_back(s);
  }
  return R;
}

std::string ResolvedSchemes::describe() const {
  std::ostringstream o;
  o << rope_type_name(rope.type);
  switch (rope.type) {
    case RopeType::linear: case RopeType::ntk: o << ": factor " << fmt(rope.factor); break;
    case RopeType::dynamic: o << ": factor " << fmt(rope.factor) << ", L_test " << l_test << " (fixed for this request)"; break;
    case RopeType::yarn:
      o << ": factor " << fmt(rope.factor) << ", beta " << fmt(rope.beta_fast) << "/" << fmt(rope.beta_slow)
        << (rope.truncate ? "" : ", truncate=false");
      break;
    case RopeType::llama3:
      o << ": factor " << fmt(rope.factor) << ", low/high freq factor " << fmt(rope.low_freq_factor) << "/"
        << fmt(rope.high_freq_factor);
      break;
    case RopeType::rerope: o << ": window " << rope.window << " (relative positions clamped at " << rope.window << ")"; break;
    case RopeType::leaky_rerope:
      o << ": window " << rope.window << ", k " << fmt(rope.leaky_k) << " (beyond the window positions advance by 1/k)";
      break;
    case RopeType::self_extend:
      o << ": group " << rope.group << ", neighbour window " << rope.window;
      break;
    default: break;
  }
  if (rope.original_max_position) o << ", original context " << rope.original_max_position;
  o << "\n  table 1: " << table1.inv_freq.size() << " pairs x " << table1_positions << " positions, attention factor "
    << fmt(table1.attention_factor);
  if (!table1.inv_freq.empty())
    o << ", inv_freq " << fmt(table1.inv_freq.front()) << " .. " << fmt(table1.inv_freq.back());
  if (table2) o << "\n  table 2: " << table2->inv_freq.size() << " pairs x " << table2_positions << " positions";
  // Per-layer layout, runs of identical layers folded.
  size_t i = 0;
  while (i < layers.size()) {
    const std::string d = layer_desc(layers[i]);
    size_t j = i + 1;
    while (j < layers.size() && layer_desc(layers[j]) == d) ++j;
    o << "\n  layer" << (j - i > 1 ? "s " : " ") << i;
    if (j - i > 1) o << "-" << j - 1;
    o << ": " << d;
    i = j;
  }
  return o.str();
}

}  // namespace reach
