// A key calibration's statistics as a file (KeyCalibration::save / load): what lets a cache start from a
// calibration taken over thousands of rows of other text, as llama.cpp's imatrix files do for weights.
//
// Layout, little-endian: "REACHKVC", u32 version (1), u32 layers, u32 kv heads, u32 head_dim, then per
// layer u32 rows taken and the statistics, f32 [kv heads][4][head_dim] (key_calib_bytes).  mu and s are not
// kept: they depend on the context a cache serves (mu's average turn), so the next prefill sets them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/session/key_calibration.hpp"

namespace reach {

namespace {

constexpr char kMagic[8] = {'R', 'E', 'A', 'C', 'H', 'K', 'V', 'C'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 * 4;

std::string named(const std::filesystem::path& path) { return "key calibration file " + platform::path_to_utf8(path); }

}  // namespace

uint64_t KeyCalibration::stats_floats() const { return uint64_t(n_kv_heads_) * 4 * head_dim_; }

void KeyCalibration::save(const std::filesystem::path& path) const {
  if (!buffer_) throw Error(ErrorCode::invalid_argument, "no key calibration to save: the keys are not q4_0, or calibration is off");
  std::string out(kMagic, 8);
  auto put = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  put(kVersion), put(n_layers_), put(n_kv_heads_), put(head_dim_);
  const size_t mu_s = 4 + 2 * size_t(n_kv_heads_) * head_dim_;
  for (uint32_t l = 0; l < n_layers_; ++l) {
    const std::vector<float> f = read(l);
    out.append(reinterpret_cast<const char*>(f.data() + 1), 4);   // rows taken
    out.append(reinterpret_cast<const char*>(f.data() + mu_s), stats_floats() * 4);
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(out.data(), std::streamsize(out.size()));
  if (!file.flush()) throw Error(ErrorCode::io, "cannot write the " + named(path) + " - is its folder writable?");
}

void KeyCalibration::load(const std::filesystem::path& path) {
  if (!buffer_) throw Error(ErrorCode::invalid_argument, "cannot load the " + named(path) + ": the keys are not q4_0, or calibration is off");
  if (!open_)
    throw Error(ErrorCode::invalid_argument, "cannot load the " + named(path) + " into a cache that holds keys");
  const uint64_t layer_bytes = 4 + stats_floats() * 4;
  const FileKind kind{"key calibration file", kHeaderBytes + uint64_t(n_layers_) * layer_bytes + 1,
                      "a few hundred kB"};
  const std::string data = read_file(path, kind);
  const std::string what = named(path) + ": ";
  if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, 8) != 0)
    throw Error(ErrorCode::format, what + "not a key calibration (no REACHKVC header); write one with --kv-calib-save");
  uint32_t h[4];
  std::memcpy(h, data.data() + 8, sizeof h);
  if (h[0] != kVersion)
    throw Error(ErrorCode::format, what + "version " + std::to_string(h[0]) + ", this build reads version " +
                                       std::to_string(kVersion));
  if (h[1] != n_layers_ || h[2] != n_kv_heads_ || h[3] != head_dim_)
    throw Error(ErrorCode::invalid_argument,
                what + "taken from a model of " + std::to_string(h[1]) + " layers, " + std::to_string(h[2]) +
                    " kv heads of " + std::to_string(h[3]) + "; this model has " + std::to_string(n_layers_) + ", " +
                    std::to_string(n_kv_heads_) + " of " + std::to_string(head_dim_) + " (save one with this model)");
  if (data.size() != kHeaderBytes + n_layers_ * layer_bytes)
    throw Error(ErrorCode::format, what + std::to_string(data.size()) + " bytes, a calibration of this shape takes " +
                                       std::to_string(kHeaderBytes + n_layers_ * layer_bytes) + " (truncated?)");
  const size_t mu_s = 4 + 2 * size_t(n_kv_heads_) * head_dim_;
  std::vector<std::vector<float>> layers;
  uint32_t rows_max = 0;
  for (uint32_t l = 0; l < n_layers_; ++l) {
    const char* p = data.data() + kHeaderBytes + l * layer_bytes;
    std::vector<float> f(mu_s + stats_floats(), 0.0f);
    uint32_t rows;
    std::memcpy(&rows, p, 4);
    std::memcpy(f.data() + mu_s, p + 4, stats_floats() * 4);
    for (size_t i = mu_s; i < f.size(); ++i)
      if (!std::isfinite(f[i]))
        throw Error(ErrorCode::format, what + "layer " + std::to_string(l) + " holds a value that is not finite");
    const uint32_t header[4] = {0, rows, cap_, 0};   // to set mu and s at the next prefill, from these rows on
    std::memcpy(f.data(), header, sizeof header);
    for (uint32_t g = 0; g < n_kv_heads_; ++g)
      for (uint32_t j = 0; j < head_dim_; ++j) f[4 + (2 * size_t(g) + 1) * head_dim_ + j] = 1.0f;
    rows_max = std::max(rows_max, rows);
    layers.push_back(std::move(f));
  }
  for (uint32_t l = 0; l < n_layers_; ++l) upload(l, layers[l]);
  seen_ = rows_max;
}

}  // namespace reach
