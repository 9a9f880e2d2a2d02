#include "cli/options.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "cli/progress_bar.hpp"
#include "runtime/config/flag_values.hpp"
#include "runtime/quant/quantize.hpp"

namespace reach::cli {

const Settings& cli_settings() {
  static const Settings settings = settings_from(std::getenv);
  return settings;
}

const std::string& value_of(const Args& args, size_t& i) {
  if (i + 1 >= args.size()) missing_flag_value(args[i]);
  return args[++i];
}

int64_t int_of(const Args& args, size_t& i, int64_t lo, int64_t hi) {
  const std::string& flag = args[i];
  return flag_integer(flag, value_of(args, i), lo, hi);
}

double float_of(const Args& args, size_t& i, double lo, double hi, const std::string& expected) {
  const std::string& flag = args[i];
  return flag_number_in(flag, value_of(args, i), lo, hi, expected);
}

void parse_kv_size(const Args& args, size_t& i, uint32_t& tokens, uint64_t& bytes) {
  const std::string& flag = args[i];
  const std::string& v = value_of(args, i);
  size_t digits = 0;
  while (digits < v.size() && (std::isdigit(static_cast<unsigned char>(v[digits])) || v[digits] == '.')) ++digits;
  std::string unit = v.substr(digits);
  for (char& c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (unit.empty()) {   // tokens
    tokens = uint32_t(flag_integer(flag, v, 1, int64_t(1) << 31));
    bytes = 0;
    return;
  }
  static const std::pair<const char*, double> units[] = {
      {"b", 1.0},           {"k", 1024.0},   {"kib", 1024.0},   {"kb", 1e3}, {"m", 1048576.0}, {"mib", 1048576.0},
      {"mb", 1e6},          {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9}};
  const auto* u = std::find_if(std::begin(units), std::end(units), [&](const auto& p) { return unit == p.first; });
  const double n = digits ? flag_number_in(flag, v.substr(0, digits), 0, 1e15, "a size") : -1;
  if (u == std::end(units) || n <= 0)
    throw Error(ErrorCode::invalid_argument,
                flag + " " + v + ": give the pool's size in tokens (4096) or in bytes (512MiB, 2GiB, 1.5GB)");
  tokens = 0;
  bytes = uint64_t(n * u->second);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string option_help(const std::string& flag, const std::string& text, size_t column) {
  std::string out = "  " + flag;
  out += out.size() < column ? std::string(column - out.size(), ' ') : "  ";
  for (char c : text) {
    out += c;
    if (c == '\n') out += std::string(column, ' ');
  }
  return out + "\n";
}

std::string quantize_flag_help(size_t column) {
  return option_help("--quantize T", "quantize a safetensors model's weight matrices at load: q8_0, q4_0 or q4_k",
                     column);
}

std::string full_kv_flag_help(size_t column) {
  return option_help("--full-kv",
                     "keep every position in the KV cache of sliding-window layers too (default:\n"
                     "a ring of window + chunk - 1 rows, O(window) memory; a rewind cannot go back\n"
                     "past what the ring overwrote)",
                     column);
}

std::string key_calib_flag_help(size_t column, bool save) {
  std::string h = option_help("--no-key-calib",
                              "q4_0 keys as plain blocks: without it they are stored centred and smoothed by a\n"
                              "calibration from the prefill chunks seen (exact; about half of q4_0's cost)",
                              column);
  h += option_help("--kv-calib FILE", "q4_0 keys: start that calibration from FILE's statistics", column);
  if (save) h += option_help("--kv-calib-save FILE", "q4_0 keys: write the calibration's statistics to FILE at the end", column);
  return h;
}

bool parse_key_calib_flag(const Args& args, size_t& i, bool& calibrate, std::string& load, std::string* save) {
  const std::string& a = args[i];
  if (a == "--no-key-calib") calibrate = false;
  else if (a == "--kv-calib") load = value_of(args, i);
  else if (a == "--kv-calib-save" && save) *save = value_of(args, i);
  else return false;
  return true;
}

std::string kv_cache_flag_help(size_t column) {
  return option_help("-ctk, --cache-type-k T",
                     "how the KV cache stores keys: f16 (the default), f32, q8_0 or q4_0 (blocks of 32\n"
                     "values with an f16 scale, quantized as they are written; head_dim a multiple of 32);\n"
                     "-ctk f32 -ctv f32 for an exact f32 cache",
                     column) +
         option_help("-ctv, --cache-type-v T", "how it stores values: the same types (default f16)", column);
}

bool parse_kv_cache_flag(const Args& args, size_t& i, KvType& k, KvType& v) {
  const std::string& a = args[i];
  const bool is_k = a == "-ctk" || a == "--cache-type-k", is_v = a == "-ctv" || a == "--cache-type-v";
  if (!is_k && !is_v) return false;
  const std::string& name = value_of(args, i);
  const std::optional<KvType> t = parse_kv_type(name);
  if (!t) throw Error(ErrorCode::invalid_argument, a + " expects " + kv_type_names() + ", got '" + name + "'");
  (is_k ? k : v) = *t;
  return true;
}

std::string activations_flag_help(size_t column) {
  return option_help("--exact-activations",
                     "quantized weights multiply f32 activations exactly (the default)",
                     column) +
         option_help("--int8-activations",
                     "quantized weights multiply activations rounded to 8 bits per 32 values with integer\n"
                     "dot products, as llama.cpp does (needs shaderIntegerDotProduct)",
                     column);
}

bool parse_activations_flag(const Args& args, size_t i, QuantActivations& out) {
  if (args[i] == "--exact-activations") out = QuantActivations::exact;
  else if (args[i] == "--int8-activations") out = QuantActivations::int8;
  else return false;
  return true;
}

WType quantize_of(const Args& args, size_t& i) {
  const std::string& flag = args[i];
  const std::string& v = value_of(args, i);
  const std::optional<WType> t = wtype_from_name(v);
  if (!t || !quantize_supported(*t))
    throw Error(ErrorCode::invalid_argument, flag + " '" + v + "' is not a type reach quantizes to: use " +
                                                 quantize_type_names() +
                                                 (t ? " (other types load from GGUF files as they are)" : ""));
  return *t;
}

Engine open_engine(const std::string& model_dir, const std::string& device, bool require_tokenizer,
                   std::optional<WType> quantize) {
  if (model_dir.empty())
    throw Error(ErrorCode::invalid_argument, "no model given: pass -m DIR (a folder with config.json, "
                                             "model.safetensors and tokenizer.json) or -m FILE.gguf");
  Engine e;
  DeviceOptions opt;
  opt.settings = cli_settings();
  if (!device.empty()) {
    const std::optional<int64_t> idx = to_integer(device);
    if (idx && *idx >= INT_MIN && *idx <= INT_MAX) opt.index = int(*idx);
    else opt.name = device;
  }
  e.device = Device::create(opt);
  e.allocator = std::make_unique<Allocator>(*e.device);
  auto t0 = std::chrono::steady_clock::now();
  LoadOptions lo;
  lo.require_tokenizer = require_tokenizer;
  lo.quantize = quantize;
  ProgressBar bar("loading " + platform::path_to_utf8(platform::path_from_utf8(model_dir).filename()), 0, true);
  lo.on_progress = bar.callback();
  e.model = Model::load(*e.device, *e.allocator, platform::path_from_utf8(model_dir), lo);
  bar.finish();
  if (!e.model->load_note().empty()) std::fprintf(stderr, "load: %s\n", e.model->load_note().c_str());
  e.load_seconds = seconds_since(t0);
  return e;
}

}  // namespace reach::cli
