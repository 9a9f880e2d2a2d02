#include "cli/options.hpp"

#include <cstdlib>
#include <filesystem>

#include "cli/progress_bar.hpp"
#include "engine/error.hpp"

namespace reach::cli {

const std::string& value_of(const Args& args, size_t& i) {
  if (i + 1 >= args.size()) throw Error(ErrorCode::invalid_argument, "option " + args[i] + " needs a value");
  return args[++i];
}

int64_t int_of(const Args& args, size_t& i, int64_t lo, int64_t hi) {
  const std::string flag = args[i];
  const std::string& v = value_of(args, i);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || x < lo || x > hi)
    throw Error(ErrorCode::invalid_argument, "option " + flag + " expects an integer in [" + std::to_string(lo) +
                                                 ", " + std::to_string(hi) + "], got '" + v + "'");
  return x;
}

double float_of(const Args& args, size_t& i) {
  const std::string flag = args[i];
  const std::string& v = value_of(args, i);
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end) throw Error(ErrorCode::invalid_argument, "option " + flag + " expects a number, got '" + v + "'");
  return x;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Engine open_engine(const std::string& model_dir, const std::string& device, bool require_tokenizer) {
  if (model_dir.empty())
    throw Error(ErrorCode::invalid_argument, "no model given: pass -m DIR (a folder with config.json, "
                                             "model.safetensors and tokenizer.json)");
  Engine e;
  DeviceOptions opt;
  if (!device.empty()) {
    char* end = nullptr;
    long idx = std::strtol(device.c_str(), &end, 10);
    if (*end == '\0') opt.index = int(idx);
    else opt.name = device;
  }
  e.device = Device::create(opt);
  e.allocator = std::make_unique<Allocator>(*e.device);
  auto t0 = std::chrono::steady_clock::now();
  LoadOptions lo;
  lo.require_tokenizer = require_tokenizer;
  ProgressBar bar("loading " + std::filesystem::path(model_dir).filename().string(), 0, true);
  lo.on_progress = bar.callback();
  e.model = Model::load(*e.device, *e.allocator, model_dir, lo);
  bar.finish();
  e.load_seconds = seconds_since(t0);
  return e;
}

}  // namespace reach::cli
