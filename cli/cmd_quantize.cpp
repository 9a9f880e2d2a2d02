// `reach quantize IN OUT.gguf --type T`: a safetensors model folder written
// once as a GGUF (runtime/quant/quantize_model.hpp), to load fast later.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "cli/options.hpp"
#include "cli/progress_bar.hpp"
#include "runtime/quant/quantize.hpp"
#include "runtime/quant/quantize_model.hpp"

namespace reach::cli {

namespace {

void quantize_usage() {
  std::printf(
      "usage: reach quantize IN OUT.gguf --type T [options]\n"
      "  IN               model folder (config.json, *.safetensors, tokenizer.json)\n"
      "  OUT.gguf         the GGUF file to write (llama architecture, llama.cpp's tensor names)\n"
      "  -t, --type T     weight type: q8_0, q4_0, q4_k, f16 or f32 (norms stay f32; a matrix whose rows\n"
      "                   do not split into T's blocks is written as q8_0, or f16 when not a multiple of 32)\n"
      "  --threads N      quantization threads (default: all cores)\n");
}

}  // namespace

int cmd_quantize(const Args& args) {
  std::string in, out;
  std::optional<WType> type;
  unsigned threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { quantize_usage(); return 0; }
    else if (a == "--type" || a == "-t") {
      const std::string& v = value_of(args, i);
      type = wtype_from_name(v);
      if (!type || !quantize_model_supported(*type))
        throw Error(ErrorCode::invalid_argument, "--type '" + v + "' is not a type reach quantize writes: use "
                                                 "q8_0, q4_0, q4_k, f16 or f32");
    }
    else if (a == "--threads") threads = static_cast<unsigned>(int_of(args, i, 1, 1024));
    else if (!a.empty() && a[0] == '-')
      throw Error(ErrorCode::invalid_argument,
                  "unknown option '" + a + "' (see reach quantize --help)");
    else if (in.empty()) in = a;
    else if (out.empty()) out = a;
    else throw Error(ErrorCode::invalid_argument, "unexpected argument '" + a + "' (IN OUT.gguf are given "
                                                  "already)");
  }
  if (in.empty() || out.empty())
    throw Error(ErrorCode::invalid_argument, "IN (a model folder) and OUT.gguf are needed (see reach quantize "
                                             "--help)");
  if (!type) throw Error(ErrorCode::invalid_argument, "no --type given: pass --type q8_0, q4_0, q4_k, f16 or f32");

  const auto t0 = std::chrono::steady_clock::now();
  ProgressBar bar("quantizing " + platform::path_to_utf8(platform::path_from_utf8(in).filename()), 0, true);
  QuantizeModelOptions o;
  o.type = *type;
  o.threads = threads;
  o.on_progress = bar.callback();
  o.on_note = [&](const std::string& line) { bar.println("note: " + line); };
  const QuantizeModelSummary s = quantize_model(platform::path_from_utf8(in), platform::path_from_utf8(out), o);
  bar.finish();
  std::map<std::string, int> counts;
  for (const auto& [name, t] : s.types) counts[wtype_name(t)]++;
  std::string mix;
  for (const auto& [name, n] : counts) mix += (mix.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::fprintf(stderr, "wrote %s: %llu tensors (%s), %.1f MiB of weights for %llu parameters, in %.1f s\n",
               out.c_str(), (unsigned long long)s.tensors, mix.c_str(), double(s.bytes) / (1 << 20),
               (unsigned long long)s.params, seconds_since(t0));
  return 0;
}

}  // namespace reach::cli
