// CLI scheme flags, their application to a ModelConfig, and the per-layer
// AttentionSpecs (docs EXTRAPOLATION.md §1.2, §1.3, §3, §4, §5.6).
#include "runtime/config/position_schemes.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "runtime/config/flag_values.hpp"

namespace reach {

using nlohmann::json;

namespace {

// --rope-scaling's spellings and their list, from the rope-type table (runtime/rope_types).
const std::string kRopeTypes = rope_type_names(", ");

std::string fmt(double v) {
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}

// The canonical name of a --rope-scaling spelling ("leaky-rerope" -> "leaky_rerope"); others unchanged.
std::string normalize_type(const std::string& t) {
  const RopeTypeInfo* info = rope_type_from_flag(t);
  return info ? info->name : t;
}

bool known_type(const std::string& t) { return rope_type_from_flag(t) != nullptr; }

// config.json's rope_scaling for r: the keys of the parameters its type takes.
json rope_to_json(const RopeScaling& r) {
  const RopeTypeInfo& info = rope_type_info(r.type);
  json j = {{"rope_type", info.name}};
  if (info.hf && r.original_max_position > 0) j["original_max_position_embeddings"] = r.original_max_position;
  if (info.takes(RopeParam::factor) && r.factor > 0) j["factor"] = r.factor;   // longrope's may be unset (0)
  if (info.takes(RopeParam::longrope)) {
    j["short_factor"] = r.short_factor;
    j["long_factor"] = r.long_factor;
    if (r.attention_factor) j["attention_factor"] = *r.attention_factor;
  }
  if (info.takes(RopeParam::yarn)) {
    j["beta_fast"] = r.beta_fast;
    j["beta_slow"] = r.beta_slow;
    if (r.attention_factor) j["attention_factor"] = *r.attention_factor;
    if (r.mscale) j["mscale"] = *r.mscale;
    if (r.mscale_all_dim) j["mscale_all_dim"] = *r.mscale_all_dim;
    j["truncate"] = r.truncate;
  }
  if (info.takes(RopeParam::llama3)) {
    j["low_freq_factor"] = r.low_freq_factor;
    j["high_freq_factor"] = r.high_freq_factor;
  }
  if (info.takes(RopeParam::rerope_window) || info.takes(RopeParam::se_window)) j["window"] = r.window;
  if (info.takes(RopeParam::leaky_k)) j["factor"] = r.leaky_k;
  if (info.takes(RopeParam::se_group)) j["group"] = r.group;
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
  if (s.softcap > 0) o << ", cap " << fmt(s.softcap);
  switch (s.norm) {
    case QkNorm::none: o << ", scale " << fmt(s.scale); break;
    case QkNorm::key: o << ", key norm"; break;
    case QkNorm::query: o << ", query norm"; break;
    case QkNorm::cos:
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
    if (!parse_qk_norm(value)) bad_flag_value(flag, value, qk_norm_names("", ", ", " or "));
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
  auto taking = [](RopeParam p) { return rope_type_names("/", [p](const RopeTypeInfo& t) { return t.takes(p); }); };
  return "position schemes (override config.json rope_scaling / reach_attention):\n"
         "  --rope-scaling TYPE       " + rope_type_names("|") + "\n"
         "                            (replaces the config's rope_scaling; llama3 keeps low/high_freq_factor)\n"
         "  --rope-factor S           scaling factor of " + taking(RopeParam::factor) + "\n"
         "  --original-ctx N          original (trained) context of " + taking(RopeParam::original_ctx) + "\n"
         "  --rerope-window W         ReRoPE / Leaky ReRoPE window (alone: implies rerope)\n"
         "  --leaky-k K               Leaky ReRoPE slope divisor (implies leaky_rerope; W·(K−1) must be whole)\n"
         "  --self-extend-group G     Self-Extend group size (implies self_extend)\n"
         "  --self-extend-window W    Self-Extend neighbour window (a multiple of G)\n"
         "  --logn L                  log-n query scaling with training length L (0 = off)\n"
         "  --qk-norm MODE            " + qk_norm_names("", "|", "|") + " (KeyNorm / QueryNorm / CosA)\n"
         "  --cos-n N                 CosA lambda = 4 ln N (default: query position + 1)\n"
         "  --attn-window W           sliding window for every layer (0 = full)\n"
         "  --attn-sinks S            first S tokens stay visible with a window\n"
         "  Models with local sliding-window layers (Gemma 3): these flags act on the global layers only;\n"
         "  the local layers keep their window, rotary base and scale (they never see longer distances).\n";
}

void apply_overrides(ModelConfig& cfg, const SchemeOverrides& o) {
  if (o.empty()) return;
  const std::string where = "command line (" + o.describe() + ")";
  const bool rope_flags = o.rope_scaling || o.rope_factor || o.original_ctx || o.rerope_window || o.leaky_k ||
                          o.se_group || o.se_window;
  if (rope_flags) {
    const RopeTypeInfo& cur = rope_type_info(cfg.rope.type);
    const RopeTypeInfo* kind;
    bool fresh;
    if (o.rope_scaling) {
      kind = rope_type_from_flag(*o.rope_scaling);
      if (!kind)
        throw Error(ErrorCode::invalid_argument, where + ": unknown --rope-scaling '" + *o.rope_scaling + "' (known: " +
                                                     kRopeTypes + ")");
      fresh = true;
    } else if (o.rerope_window || o.leaky_k) {
      const bool leaky = o.leaky_k || cur.type == RopeType::leaky_rerope;
      kind = &rope_type_info(leaky ? RopeType::leaky_rerope : RopeType::rerope);
      fresh = kind != &cur;
    } else if (o.se_group || o.se_window) {
      kind = &rope_type_info(RopeType::self_extend);
      fresh = kind != &cur;
    } else {
      kind = &cur;
      fresh = false;
    }
    // Each rope flag, the parameter it sets (whose config key takes its value) and that value.
    struct RopeFlag {
      const char* flag;
      RopeParam param;
      std::optional<json> value;
    };
    auto value = [](const auto& v) { return v ? std::optional<json>(*v) : std::nullopt; };
    const RopeFlag rope_flags_given[] = {
        {"--rope-factor", RopeParam::factor, value(o.rope_factor)},
        {"--original-ctx", RopeParam::original_ctx, value(o.original_ctx)},
        {"--rerope-window", RopeParam::rerope_window, value(o.rerope_window)},
        {"--leaky-k", RopeParam::leaky_k, value(o.leaky_k)},
        {"--self-extend-group", RopeParam::se_group, value(o.se_group)},
        {"--self-extend-window", RopeParam::se_window, value(o.se_window)},
    };
    for (const RopeFlag& f : rope_flags_given) {
      if (!f.value || kind->takes(f.param)) continue;
      std::string applies = rope_type_names(", ", [&](const RopeTypeInfo& t) { return t.takes(f.param); });
      if (f.param == RopeParam::factor && kind->takes(RopeParam::leaky_k))
        applies += "; use --leaky-k for Leaky ReRoPE";
      throw Error(ErrorCode::invalid_argument, where + ": " + f.flag + " does not apply to rope scaling \"" +
                                                   kind->name + "\" (it applies to " + applies + ")");
    }

    json r;
    if (!fresh) {
      r = rope_to_json(cfg.rope);
    } else {
      r = json{{"rope_type", kind->name}};
      // An implied switch between rerope and leaky_rerope keeps the window.
      if (!o.rope_scaling && kind->takes(RopeParam::rerope_window) && cur.takes(RopeParam::rerope_window))
        r["window"] = cfg.rope.window;
      if (kind->type == RopeType::longrope) {
        // The factors are the model's own (searched per model): only a config that has them can run it.
        if (cfg.rope.type != RopeType::longrope)
          throw Error(ErrorCode::invalid_argument,
                      where + ": --rope-scaling longrope needs the model's own short_factor / long_factor, and this "
                              "model's config has rope type \"" + std::string(cur.name) + "\" - LongRoPE runs on "
                              "models that carry them (Phi-3, Phi-4-mini)");
        r = rope_to_json(cfg.rope);
        r.erase("factor");
      }
      if (kind->type == RopeType::llama3) {   // as tools/reference_forward.py
        r["low_freq_factor"] = cfg.rope.low_freq_factor;
        r["high_freq_factor"] = cfg.rope.high_freq_factor;
        r["original_max_position_embeddings"] =
            cfg.rope.original_max_position > 0 ? cfg.rope.original_max_position : cfg.max_position_embeddings;
      }
    }
    for (const RopeFlag& f : rope_flags_given)
      if (f.value) r[rope_param_keys(uint32_t(f.param)).front()] = *f.value;
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
      cfg.attn = parse_reach_attention(a, where + ": reach_attention", cfg.n_layers, cfg.sliding_window.has_value());
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
  R.softcap = cfg.attn_softcap;
  R.l_test = l_test > 0 ? l_test : static_cast<int64_t>(context);
  R.table1 = rope_freqs(cfg, R.l_test);
  R.table1_positions = context;
  R.table_pairs = static_cast<uint32_t>(kernel_rotary_dim(cfg.rotary_dim) / 2);

  const ReachAttention& at = cfg.attn;
  const bool alibi = at.alibi_max_bias.has_value();
  if (alibi && cfg.rope.type != RopeType::default_ && cfg.rope.type != RopeType::none_)
    fail(ErrorCode::unsupported, std::string("reach_attention.alibi_max_bias replaces RoPE, but rope_scaling is \"") +
                                     rope_type_name(cfg.rope.type) + "\" - remove one of them");

  AttentionSpec base = AttentionSpec::plain(static_cast<uint32_t>(cfg.n_heads), static_cast<uint32_t>(cfg.n_kv_heads),
                                            static_cast<uint32_t>(cfg.head_dim))
                           .with_rotary_dim(static_cast<uint32_t>(kernel_rotary_dim(cfg.rotary_dim)))
                           .with_norm(at.qk_norm, at.cos_n ? static_cast<float>(*at.cos_n) : 0.0f)
                           .with_logn(static_cast<float>(at.logn_train_len));
  if (alibi) base = base.with_alibi(static_cast<float>(*at.alibi_max_bias));

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
      base = base.with_rerope(u32(rs.window, "rerope window"));
      R.table1_positions = std::max<uint32_t>(context, static_cast<uint32_t>(rs.window) + 1);
      break;
    }
    case RopeType::leaky_rerope: {
      const double shift = static_cast<double>(rs.window) * (rs.leaky_k - 1.0);
      if (!(rs.leaky_k >= 1.0))
        fail(ErrorCode::unsupported, "leaky_rerope factor k = " + fmt(rs.leaky_k) +
                                         " < 1 would make distant tokens advance faster than near ones; use k >= 1");
      if (shift > INT32_MAX)
        fail(ErrorCode::unsupported, "leaky_rerope window·(k−1) = " + std::to_string(rs.window) + "·(" + fmt(rs.leaky_k) +
                                         "−1) = " + fmt(shift) + " positions is beyond the 2^31 − 1 positions of the "
                                         "cos/sin tables: choose a smaller window or k");
      if (shift != std::floor(shift))
        fail(ErrorCode::unsupported, "leaky_rerope window·(k−1) = " + std::to_string(rs.window) + "·(" + fmt(rs.leaky_k) +
                                         "−1) = " + fmt(shift) +
                                         " is not a whole number of positions; the cos/sin tables are indexed by "
                                         "integer positions - choose k so that window·(k−1) is whole (e.g. an integer k)");
      base = base.with_leaky_rerope(u32(rs.window, "leaky_rerope window"), static_cast<int32_t>(shift));
      RopeFreqs t2;
      t2.inv_freq = R.table1.inv_freq;
      for (double& x : t2.inv_freq) x /= rs.leaky_k;
      t2.attention_factor = 1.0;
      R.table2 = std::move(t2);
      const uint64_t rows = static_cast<uint64_t>(context) + static_cast<uint64_t>(shift);
      if (rows >= UINT32_MAX)
        fail(ErrorCode::unsupported, "leaky_rerope window·(k−1) = " + fmt(shift) + " plus the context needs " +
                                         std::to_string(rows) + " positions in table 2, beyond 32-bit positions - "
                                         "use a smaller window or k");
      R.table2_positions = static_cast<uint32_t>(rows);
      break;
    }
    case RopeType::self_extend: {
      const int64_t G = rs.group, W = rs.window;
      if (G < 1 || W < 1 || W % G)
        fail(ErrorCode::invalid_argument, "self_extend group " + std::to_string(G) + " must divide window " + std::to_string(W));
      base = base.with_self_extend(static_cast<uint32_t>(G), u32(W, "self_extend window"));
      const int64_t max_q2 = (static_cast<int64_t>(context) - 1) / G + W - W / G;
      if (max_q2 + 1 >= static_cast<int64_t>(UINT32_MAX))
        fail(ErrorCode::unsupported, "self_extend group " + std::to_string(G) + ", window " + std::to_string(W) +
                                         " puts grouped queries at position " + std::to_string(max_q2) +
                                         ", beyond 32-bit positions - use a smaller window or context");
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
        s = s.with_logn(*lo.logn ? static_cast<float>(L) : 0.0f);
      }
      if (lo.rope && !*lo.rope) s = s.without_rope();   // NoPE layer: no rotation, single branch
    }
    const uint32_t w = u32(window, "attention window");
    R.layers.push_back(s.with_window(w, w ? u32(at.sinks, "attention sinks") : 0));
  }
  // The model's own query scale (Gemma: query_pre_attn_scalar^-0.5) where the scores are not normalised.
  if (cfg.query_scale)
    for (AttentionSpec& s : R.layers)
      if (s.norm == QkNorm::none) s.scale = static_cast<float>(*cfg.query_scale);
  // Gemma 2 caps every layer's scores, local ones included (applied after the local layers are set below).
  const float cap = static_cast<float>(cfg.attn_softcap);
  if (cfg.has_local_layers()) {
    if (cfg.local_layers.size() != static_cast<size_t>(cfg.n_layers))
      fail(ErrorCode::internal, "the config marks " + std::to_string(cfg.local_layers.size()) + " local layers of " +
                                    std::to_string(cfg.n_layers));
    R.local = cfg.local_layers;
    R.table_local = rope_freqs(cfg.local_rope, cfg.rotary_dim, cfg.rope_local_theta, cfg.max_position_embeddings,
                               R.l_test);
    AttentionSpec local = AttentionSpec::plain(static_cast<uint32_t>(cfg.n_heads),
                                               static_cast<uint32_t>(cfg.n_kv_heads),
                                               static_cast<uint32_t>(cfg.head_dim))
                              .with_rotary_dim(static_cast<uint32_t>(kernel_rotary_dim(cfg.rotary_dim)))
                              .with_window(u32(cfg.local_window, "local attention window"), 0);
    if (cfg.query_scale) local.scale = static_cast<float>(*cfg.query_scale);
    for (size_t li = 0; li < R.local.size(); ++li)
      if (R.local[li]) R.layers[li] = local;
  }
  if (cap > 0)
    for (AttentionSpec& s : R.layers) s = s.with_softcap(cap);
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
    case RopeType::longrope: {
      const int64_t orig = rope.original_max_position;
      o << ": " << (l_test > orig ? "long" : "short") << " factors (length " << l_test
        << (l_test > orig ? " > " : " <= ") << "original context " << orig << ")";
      break;
    }
    case RopeType::rerope: o << ": window " << rope.window << " (relative positions clamped at " << rope.window << ")"; break;
    case RopeType::leaky_rerope:
      o << ": window " << rope.window << ", k " << fmt(rope.leaky_k) << " (beyond the window positions advance by 1/k)";
      break;
    case RopeType::self_extend:
      o << ": group " << rope.group << ", neighbour window " << rope.window;
      break;
    default: break;
  }
  if (rope.original_max_position && rope.type != RopeType::longrope)
    o << ", original context " << rope.original_max_position;
  if (softcap > 0) o << "\n  attention logits capped at " << fmt(softcap) << " (cap * tanh(score / cap))";
  o << "\n  table 1: " << table1.inv_freq.size() << " pairs x " << table1_positions << " positions, attention factor "
    << fmt(table1.attention_factor);
  if (!table1.inv_freq.empty())
    o << ", inv_freq " << fmt(table1.inv_freq.front()) << " .. " << fmt(table1.inv_freq.back());
  if (table2) o << "\n  table 2: " << table2->inv_freq.size() << " pairs x " << table2_positions << " positions";
  if (table_local) {
    o << "\n  local layers' table: " << table_local->inv_freq.size() << " pairs, inv_freq "
      << fmt(table_local->inv_freq.front()) << " .. " << fmt(table_local->inv_freq.back())
      << " (position schemes act on the global layers only)";
  }
  // Per-layer layout, runs of identical layers folded.
  size_t i = 0;
  while (i < layers.size()) {
    const std::string d = layer_desc(layers[i]);
    size_t j = i + 1;
    while (j < layers.size() && layer_desc(layers[j]) == d) ++j;
    o << "\n  layer" << (j - i > 1 ? "s " : " ") << i;
    if (j - i > 1) o << "-" << j - 1;
    o << ": " << (i < local.size() && local[i] ? "local, " : "") << d;
    i = j;
  }
  return o.str();
}

}  // namespace reach
