// config.json's scheme blocks: rope_scaling (Hugging Face's, and reach's own rope types) and
// reach_attention (windows, sinks, per-layer layouts), parsed and checked.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "runtime/config/config_reader.hpp"
#include "runtime/config/model_config.hpp"

namespace reach {

using namespace config_detail;

namespace {

// "default, linear, ... (Hugging Face) and none, ntk, ... (reach)" from the rope-type table.
std::string known_rope_types() {
  return rope_type_names(", ", [](const RopeTypeInfo& t) { return t.hf; }) + " (Hugging Face) and " +
         rope_type_names(", ", [](const RopeTypeInfo& t) { return !t.hf; }) + " (reach)";
}

}  // namespace

RopeScaling parse_rope_scaling(const json& obj, const std::string& where) {
  RopeScaling rs;
  if (obj.is_null()) return rs;
  if (!obj.is_object())
    throw Error(ErrorCode::format, where + ": is " + describe_value(obj) +
                                       ", expected an object like {\"rope_type\": \"linear\", \"factor\": 2}");
  Reader r{obj, where};
  auto type = r.opt_str("rope_type");
  auto legacy = r.opt_str("type");
  if (type && legacy && *type != *legacy)
    r.fail(ErrorCode::format, "'rope_type' is \"" + *type + "\" but 'type' is \"" + *legacy + "\" - keep one");
  if (!type) type = legacy;
  if (!type) {
    if (r.has("factor"))
      r.fail(ErrorCode::format, std::string("has 'factor' but no 'rope_type' - add \"rope_type\" (one of ") +
                                    known_rope_types() + ")");
    type = "default";
  }
  const std::string& t = *type;
  const RopeTypeInfo* info = rope_type_from_config(t);
  if (!info && rope_type_unsupported(t))
    r.fail(ErrorCode::unsupported, "rope_type \"" + t + "\" is not supported by reach yet (supported: " +
                                       known_rope_types() + ")");
  if (!info) r.fail(ErrorCode::unsupported, "unknown rope_type \"" + t + "\" (known: " + known_rope_types() + ")");
  rs.type = info->type;
  if (!info->hf) {   // reach's own types: a misspelt key must not pass
    std::vector<const char*> keys = {"rope_type", "type"};
    for (const char* k : rope_param_keys(info->params)) keys.push_back(k);
    keys.insert(keys.end(), {"rope_theta", "partial_rotary_factor"});
    r.only_keys(keys);
  }
  const std::string fhint = "rope_type \"" + t + "\" needs it (the scaling factor s = new context / trained context)";
  auto common_hf = [&] {   // keys every HF type may carry (v5 standardizes original_max_position_embeddings)
    if (auto o = r.opt_int("original_max_position_embeddings"))
      rs.original_max_position = r.dimension("original_max_position_embeddings", *o);
  };
  switch (rs.type) {
    case RopeType::default_:
      common_hf();
      break;
    case RopeType::linear:
    case RopeType::dynamic:
      rs.factor = r.positive("factor", r.req_num("factor", fhint));
      common_hf();
      break;
    case RopeType::yarn:
      rs.factor = r.positive("factor", r.req_num("factor", fhint));
      common_hf();
      // HF reads these with `get(...) or default`: null and 0 fall back.
      if (auto v = r.opt_num("beta_fast"); v && *v != 0) rs.beta_fast = r.positive("beta_fast", *v);
      if (auto v = r.opt_num("beta_slow"); v && *v != 0) rs.beta_slow = r.positive("beta_slow", *v);
      rs.attention_factor = r.opt_num("attention_factor");
      if (rs.attention_factor) r.positive("attention_factor", *rs.attention_factor);
      rs.mscale = r.opt_num("mscale");
      rs.mscale_all_dim = r.opt_num("mscale_all_dim");
      rs.truncate = r.opt_bool("truncate").value_or(true);
      break;
    case RopeType::llama3: {
      const std::string h = "rope_type \"llama3\" requires factor, low_freq_factor, high_freq_factor and "
                            "original_max_position_embeddings (Llama 3.1 uses 8, 1, 4, 8192)";
      rs.factor = r.positive("factor", r.req_num("factor", h));
      rs.low_freq_factor = r.positive("low_freq_factor", r.req_num("low_freq_factor", h));
      rs.high_freq_factor = r.positive("high_freq_factor", r.req_num("high_freq_factor", h));
      rs.original_max_position =
          r.dimension("original_max_position_embeddings", r.req_int("original_max_position_embeddings", h));
      if (rs.high_freq_factor < rs.low_freq_factor)
        r.fail(ErrorCode::format, "high_freq_factor " + json(rs.high_freq_factor).dump() + " < low_freq_factor " +
                                      json(rs.low_freq_factor).dump() + " - swap them");
      break;
    }
    case RopeType::longrope: {
      // factor is optional: Phi-3 gives max_position_embeddings / original instead (rope_freqs).
      if (auto f = r.opt_num("factor")) rs.factor = r.positive("factor", *f);
      else rs.factor = 0;
      common_hf();
      rs.attention_factor = r.opt_num("attention_factor");
      if (rs.attention_factor) r.positive("attention_factor", *rs.attention_factor);
      const std::string h = "rope_type \"longrope\" needs 'short_factor' and 'long_factor' (one divisor per "
                            "rotary frequency, as Phi-3 configs carry them)";
      rs.short_factor = r.positive_list("short_factor");
      rs.long_factor = r.positive_list("long_factor");
      if (rs.short_factor.empty()) r.missing("short_factor", h);
      if (rs.long_factor.empty()) r.missing("long_factor", h);
      if (rs.short_factor.size() != rs.long_factor.size())
        r.fail(ErrorCode::format, "'short_factor' has " + std::to_string(rs.short_factor.size()) +
                                      " entries but 'long_factor' has " + std::to_string(rs.long_factor.size()) +
                                      " - both need one per rotary frequency");
      break;
    }
    case RopeType::ntk:
      rs.factor = r.positive("factor", r.req_num("factor", fhint));
      break;
    case RopeType::rerope:
      rs.window = r.positive("window", r.req_int("window", "ReRoPE clamps relative positions at 'window' (e.g. 512)"));
      break;
    case RopeType::leaky_rerope: {
      const std::string h = "Leaky ReRoPE needs 'window' w and 'factor' k (positions beyond w advance by 1/k; "
                            "e.g. 512 and 16)";
      rs.window = r.positive("window", r.req_int("window", h));
      rs.leaky_k = r.positive("factor", r.req_num("factor", h));
      break;
    }
    case RopeType::self_extend: {
      const std::string h = "Self-Extend needs 'group' G and neighbour 'window' W (e.g. 4 and 1024)";
      rs.group = r.positive("group", r.req_int("group", h));
      rs.window = r.positive("window", r.req_int("window", h));
      if (rs.window % rs.group != 0) {
        // The next multiple of G above W, or the one below where that overflows.
        const int64_t below = rs.window / rs.group * rs.group;
        const int64_t above = below > INT64_MAX - rs.group ? below : below + rs.group;
        r.fail(ErrorCode::format, "self_extend window " + std::to_string(rs.window) + " is not a multiple of group " +
                                      std::to_string(rs.group) +
                                      ": the grouped positions floor(i/G) + W - W/G only continue the neighbour "
                                      "positions when G divides W - use e.g. window " +
                                      std::to_string(above > 0 ? above : rs.group));
      }
      break;
    }
    case RopeType::none_:
      break;
  }
  return rs;
}

ReachAttention parse_reach_attention(const json& obj, const std::string& where, int64_t n_layers,
                                     bool model_window) {
  ReachAttention a;
  if (obj.is_null()) return a;
  if (!obj.is_object())
    throw Error(ErrorCode::format, where + ": is " + describe_value(obj) + ", expected an object");
  Reader r{obj, where};
  r.only_keys({"logn_train_len", "qk_norm", "cos_n", "window", "sinks", "layers", "alibi_max_bias"});
  if (auto v = r.opt_int("logn_train_len")) {
    a.logn_train_len = r.non_negative("logn_train_len", *v);
    if (a.logn_train_len == 1)
      r.fail(ErrorCode::format, "'logn_train_len' is 1 (ln 1 = 0 would divide by zero) - use the training "
                                "context length, e.g. 4096, or 0 to disable");
  }
  if (auto v = r.opt_str("qk_norm")) {
    const std::optional<QkNorm> n = parse_qk_norm(*v);
    if (!n) r.fail(ErrorCode::format, "'qk_norm' is \"" + *v + "\", expected " + qk_norm_names("\"", ", ", " or "));
    a.qk_norm = *n;
  }
  if (auto v = r.opt_num("cos_n")) {
    a.cos_n = r.positive("cos_n", *v);
    if (a.qk_norm != QkNorm::cos)
      r.fail(ErrorCode::format, "'cos_n' is only used with \"qk_norm\": \"cos\" - set both or remove cos_n");
  }
  if (auto v = r.opt_int("window")) a.window = r.non_negative("window", *v);
  if (auto v = r.opt_int("sinks")) a.sinks = r.non_negative("sinks", *v);
  if (auto v = r.opt_num("alibi_max_bias")) a.alibi_max_bias = r.positive("alibi_max_bias", *v);
  if (const json* layers = r.find("layers")) {
    if (!layers->is_object()) r.wrong_type("layers", *layers, "an object {\"<layer index>\": {...}}");
    for (auto it = layers->begin(); it != layers->end(); ++it) {
      const std::string& k = it.key();
      bool digits = !k.empty() && k.size() <= 9;
      for (char c : k) digits = digits && c >= '0' && c <= '9';
      if (!digits)
        r.fail(ErrorCode::format, "layers key \"" + k + "\" is not a layer index (use \"0\", \"1\", ...)");
      const int idx = std::stoi(k);
      if (idx >= n_layers)
        r.fail(ErrorCode::format, "layers key \"" + k + "\" is out of range: the model has num_hidden_layers=" +
                                      std::to_string(n_layers) + " (indices 0.." + std::to_string(n_layers - 1) + ")");
      if (!it->is_object()) r.wrong_type(k.c_str(), *it, "an object like {\"window\": 512, \"rope\": false}");
      Reader lr{*it, where + ": layers[" + k + "]"};
      lr.only_keys({"window", "rope", "logn"});
      LayerAttention la;
      if (auto w = lr.opt_int("window")) la.window = lr.non_negative("window", *w);
      la.rope = lr.opt_bool("rope");
      la.logn = lr.opt_bool("logn");
      a.layers[idx] = la;
    }
  }
  // Sinks are what a sliding window keeps visible: with no window anywhere
  // every token is visible, and the value would be ignored without a word.
  bool any_window = a.window > 0 || model_window;
  for (const auto& [idx, la] : a.layers) any_window = any_window || la.window.value_or(0) > 0;
  if (a.sinks > 0 && !any_window)
    r.fail(ErrorCode::format, "'sinks' is " + std::to_string(a.sinks) + " but no attention window is set (sinks "
                              "are the first tokens a sliding window keeps visible) - set 'window' (or a layer's "
                              "'window') too, or set 'sinks' to 0");
  return a;
}

}  // namespace reach
