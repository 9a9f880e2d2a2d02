#pragma once
// Option parsing and model opening shared by run / bench / eval.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/kv_type.hpp"
#include "cli/commands.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "runtime/config/position_schemes.hpp"
#include "runtime/model/model.hpp"

namespace reach::cli {

// The value after the flag args[i], advancing i to it.  Throws
// Error(invalid_argument) naming the flag when the value is missing or bad,
// in the style of runtime/config/flag_values.hpp.
const std::string& value_of(const Args& args, size_t& i);
int64_t int_of(const Args& args, size_t& i, int64_t lo, int64_t hi);
// A finite number in [lo, hi]; `expected` words the error.
double float_of(const Args& args, size_t& i, double lo, double hi, const std::string& expected);

// The REACH_* settings (base/settings.hpp), read from the environment on the first call and kept: the
// one place the CLI reads them.  main() reports the values it ignored.
const Settings& cli_settings();

struct Engine {
  std::unique_ptr<Device> device;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<Model> model;
  double load_seconds = 0;
};

// --quantize T: the value after the flag, a type quantize_matrix produces
// (q8_0, q4_0, q4_k); throws invalid_argument naming the flag otherwise.
WType quantize_of(const Args& args, size_t& i);
// One option of a --help text: "  FLAG" padded to `column` (a command lines all its options up at
// one column), then `text`, whose further lines ('\n') start at that column too; ends with '\n'.
std::string option_help(const std::string& flag, const std::string& text, size_t column);
// --quantize and --full-kv (SessionOptions::full_kv), shared by run / bench / eval / serve.
std::string quantize_flag_help(size_t column);
std::string full_kv_flag_help(size_t column);
// --exact-activations / --int8-activations (SessionOptions::activations), shared by run / bench / eval:
// true (i stays) when args[i] is one of them.
std::string activations_flag_help(size_t column);
// The KV cache type of every front end (run, bench, eval, serve, tune; reach_session_default_params in capi/
// says the same): f16 halves the cache at no measurable quality cost, and is llama.cpp's default too.
// SessionOptions keeps f32, the exact setting the reference suites check; -ctk f32 -ctv f32 asks for it.
inline constexpr KvType kFrontEndKvType = KvType::f16;
// -ctk / --cache-type-k and -ctv / --cache-type-v (SessionOptions::cache_type_k / _v), shared by run / bench /
// eval / serve: true (i at the value) when args[i] is one of them; an unknown type throws naming the flag.
std::string kv_cache_flag_help(size_t column);
// --no-key-calib (run, eval): SessionOptions::calibrate_keys off, the comparison point for q4_0 keys;
// --kv-calib FILE (SessionOptions::key_calib_file) and, with `save`, --kv-calib-save FILE (eval).
std::string key_calib_flag_help(size_t column, bool save);
// true (i at the value, if any) when args[i] is one of them; `save` null: --kv-calib-save is unknown.
bool parse_key_calib_flag(const Args& args, size_t& i, bool& calibrate, std::string& load, std::string* save);
bool parse_kv_cache_flag(const Args& args, size_t& i, KvType& k, KvType& v);
bool parse_activations_flag(const Args& args, size_t i, QuantActivations& out);
// --kv-size N|SIZE (serve, bench --parallel): a paged KV pool of N tokens, or of at most SIZE device
// bytes ("512MiB", "2GiB", "1.5GB"); the value after args[i] goes into `tokens` or `bytes`.
void parse_kv_size(const Args& args, size_t& i, uint32_t& tokens, uint64_t& bytes);

// --device N|NAME overrides REACH_DEVICE; the device gets cli_settings().  `quantize` sets
// LoadOptions::quantize.
Engine open_engine(const std::string& model_dir, const std::string& device, bool require_tokenizer = true,
                   std::optional<WType> quantize = std::nullopt);

double seconds_since(std::chrono::steady_clock::time_point t0);

}  // namespace reach::cli
