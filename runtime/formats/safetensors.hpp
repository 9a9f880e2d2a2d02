#pragma once
// safetensors files (https://github.com/huggingface/safetensors), read through
// a read-only mmap.  Every byte of the header is validated before a tensor is
// handed out: header length, JSON, dtype, shape x dtype size == byte range,
// ranges inside the file, contiguous without overlap or holes.  Failures are
// reach::Error (io / format / unsupported / invalid_argument) whose message
// names the file, the tensor and what to do.
//
// A model directory holds either `model.safetensors` or the sharded
// `model.safetensors.index.json` + shards; ModelWeights opens both.
//
// Pointers in TensorInfo point into the mapping and stay valid as long as the
// SafeTensorsFile / ModelWeights that produced them lives (moves included).
// Tensor data is not necessarily aligned: read it with memcpy.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/platform/file_map.hpp"

namespace reach {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };

size_t dtype_size(DType dtype);          // bytes per element
const char* dtype_name(DType dtype);     // the safetensors spelling: "F32", "BF16", ...
bool dtype_is_compute(DType dtype);      // F32 / F16 / BF16: what reach's kernels read
// Parses the safetensors spelling; false for anything unknown.
bool parse_dtype(std::string_view name, DType* out);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;   // into the mmap; unaligned in general
  size_t nbytes = 0;
  std::filesystem::path file;        // the file the bytes live in (for messages)
  int64_t numel() const;
  std::string shape_string() const;  // "[4096, 11008]"
};

std::string shape_to_string(std::span<const int64_t> shape);

// One .safetensors file, mapped read-only.  Move-only.
class SafeTensorsFile {
 public:
  // Maps and validates the whole header; throws io / format errors.
  static SafeTensorsFile open(const std::filesystem::path& path);

  SafeTensorsFile() = default;
  ~SafeTensorsFile();
  SafeTensorsFile(SafeTensorsFile&& other) noexcept;
  SafeTensorsFile& operator=(SafeTensorsFile&& other) noexcept;
  SafeTensorsFile(const SafeTensorsFile&) = delete;
  SafeTensorsFile& operator=(const SafeTensorsFile&) = delete;

  const std::map<std::string, TensorInfo, std::less<>>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(std::string_view name) const;
  const std::filesystem::path& path() const { return path_; }
  uint64_t file_size() const { return map_.size(); }
  uint64_t header_size() const { return header_size_; }   // N, the JSON length

 private:
  void release() noexcept;

  std::filesystem::path path_;
  platform::FileMapping map_;   // the whole file, read-only
  uint64_t header_size_ = 0;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The weights of one model directory.  Move-only (owns the mappings).
class ModelWeights {
 public:
  // `dir` holds model.safetensors.index.json (sharded) or model.safetensors.
  // A path to a single .safetensors file is accepted too.
  static ModelWeights open_dir(const std::filesystem::path& dir);

  ModelWeights() = default;
  ModelWeights(ModelWeights&&) noexcept = default;
  ModelWeights& operator=(ModelWeights&&) noexcept = default;
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;

  const TensorInfo* find(std::string_view name) const;
  // Throws format naming the tensor and the directory, with a few
  // similarly-named tensors that do exist.
  const TensorInfo& get(std::string_view name) const;
  // As get(), and throws format when the shape differs:
  // "tensor X in FILE has shape [a, b], expected [c, d] (<why>)".
  // `why` says where the expectation comes from, e.g.
  // "config.json says hidden_size=4096, vocab_size=32000".
  const TensorInfo& get(std::string_view name, std::span<const int64_t> expected_shape,
                        std::string_view why = {}) const;
  const TensorInfo& get(std::string_view name, std::initializer_list<int64_t> expected_shape,
                        std::string_view why = {}) const {
    return get(name, std::span<const int64_t>(expected_shape.begin(), expected_shape.size()), why);
  }

  std::vector<std::string> names() const;     // sorted
  size_t size() const { return tensors_.size(); }
  uint64_t total_bytes() const;               // sum of all tensors' bytes
  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<SafeTensorsFile>& files() const { return files_; }

 private:
  std::filesystem::path dir_;
  std::vector<SafeTensorsFile> files_;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
};

// Host conversions.  F32 / F16 (exact: subnormals, inf, nan) / BF16 (shift);
// any other dtype throws unsupported naming the tensor and file.
// `out` must hold t.numel() floats.
void convert_to_f32(const TensorInfo& t, float* out);

}  // namespace reach
