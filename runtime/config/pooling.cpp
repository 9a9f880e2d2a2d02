#include "runtime/config/pooling.hpp"

#include "base/error.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/json_parse.hpp"

namespace reach {

namespace {

constexpr FileKind kModulesJson{"sentence-transformers module file", 1 << 20, "well under 1 kB"};

nlohmann::json read_json(const std::filesystem::path& path) {
  const std::string text = read_file(path, kModulesJson);
  try {
    return parse_json_bounded(text, 8, 4096);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::format, path.string() + " is not valid JSON: " + e.what());
  }
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::last: return "last";
    default: return "none";
  }
}

Pooling pooling_from_name(const std::string& name) {
  for (Pooling p : {Pooling::mean, Pooling::cls, Pooling::last})
    if (name == pooling_name(p)) return p;
  throw Error(ErrorCode::invalid_argument, "pooling '" + name + "' is not known: use mean, cls or last");
}

PoolingSpec pooling_of_folder(const std::filesystem::path& dir) {
  PoolingSpec spec;
  const std::filesystem::path modules_path = dir / "modules.json";
  std::error_code ec;
  if (!std::filesystem::exists(modules_path, ec)) return spec;
  const nlohmann::json modules = read_json(modules_path);
  if (!modules.is_array())
    throw Error(ErrorCode::format, modules_path.string() + ": expected a list of modules ({\"type\", \"path\"})");
  for (const auto& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string())
      throw Error(ErrorCode::format, modules_path.string() + ": a module without a string 'type'");
    // sentence_transformers.models.Pooling (v2 - v5), ...sentence_transformer.modules.pooling.Pooling (v6).
    const std::string type = m["type"].get<std::string>();
    const std::string cls = type.substr(type.rfind('.') + 1);
    if (type.rfind("sentence_transformers.", 0) != 0) continue;
    if (cls == "Normalize") spec.normalize = true;
    if (cls != "Pooling") continue;
    const std::string sub = m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
    if (sub.empty() || sub.find("..") != std::string::npos)
      throw Error(ErrorCode::format, modules_path.string() + ": the Pooling module's 'path' must name its folder");
    const std::filesystem::path cfg_path = dir / sub / "config.json";
    const nlohmann::json cfg = read_json(cfg_path);
    if (!cfg.is_object()) throw Error(ErrorCode::format, cfg_path.string() + ": expected an object");
    // v6 writes "pooling_mode": "lasttoken"; older versions one boolean per mode.
    const std::string mode = cfg.contains("pooling_mode") && cfg["pooling_mode"].is_string()
                                 ? cfg["pooling_mode"].get<std::string>() : "";
    auto on = [&](const char* key) {
      if (!mode.empty()) return "pooling_mode_" + mode == key || "pooling_mode_" + mode + "_tokens" == key ||
                                "pooling_mode_" + mode + "_token" == key;
      return cfg.contains(key) && cfg[key].is_boolean() && cfg[key].get<bool>();
    };
    int modes = 0;
    for (const char* key : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                            "pooling_mode_weightedmean_tokens"})
      if (on(key))
        throw Error(ErrorCode::unsupported, cfg_path.string() + ": '" + key +
                                                "' pooling is not supported: reach pools by mean, CLS or last token");
    if (on("pooling_mode_mean_tokens")) spec.pooling = Pooling::mean, ++modes;
    if (on("pooling_mode_cls_token")) spec.pooling = Pooling::cls, ++modes;
    if (on("pooling_mode_lasttoken")) spec.pooling = Pooling::last, ++modes;
    if (modes != 1)
      throw Error(ErrorCode::unsupported, cfg_path.string() + ": " + std::to_string(modes) +
                                              " pooling modes are on; reach needs exactly one of "
                                              "pooling_mode_mean_tokens, pooling_mode_cls_token, pooling_mode_lasttoken");
  }
  return spec;
}

PoolingSpec pooling_of_gguf(const GgufFile& file) {
  PoolingSpec spec;
  if (!file.has("general.architecture")) return spec;
  const std::string key = std::string(file.get_string("general.architecture")) + ".pooling_type";
  if (!file.has(key)) return spec;
  const int64_t t = file.get_i64(key);
  switch (t) {
    case 0: return spec;
    case 1: spec.pooling = Pooling::mean; break;
    case 2: spec.pooling = Pooling::cls; break;
    case 3: spec.pooling = Pooling::last; break;
    default:
      throw Error(ErrorCode::unsupported, file.path().string() + ": " + key + " = " + std::to_string(t) +
                                              " is not supported: reach pools by mean (1), CLS (2) or last token (3)");
  }
  spec.normalize = true;
  return spec;
}

}  // namespace reach
