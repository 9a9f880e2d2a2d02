#pragma once
// Writes GGUF v3 files (little-endian): metadata in the order put (a key put
// again keeps its place and takes the new value), then tensor infos and the
// tensor data, each tensor at an offset aligned to general.alignment (put it
// as UINT32; default 32), zero padding between.  The file is written to
// "OUT.tmp-PID" beside OUT and renamed over OUT only when complete, so a
// failed or cancelled write never leaves a partial OUT.
//
// Tensor bytes come either whole (add_tensor with bytes) or from a producer
// called once, in file order, while writing: a model's quantized weights are
// never all in memory at once.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.hpp"
#include "base/wtype.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/formats/gguf_meta_sink.hpp"

namespace reach {

GgmlType ggml_type_of(WType t);

class GgufWriter : public GgufMetaSink {
 public:
  // Fills exactly the tensor's byte size.
  using Producer = std::function<void(std::byte* out)>;

  void put_string(std::string_view key, std::string_view value) override;
  void put_u32(std::string_view key, uint32_t value) override;
  void put_i32(std::string_view key, int32_t value) override;
  void put_f32(std::string_view key, float value) override;
  void put_bool(std::string_view key, bool value) override;
  void put_string_array(std::string_view key, const std::vector<std::string>& values) override;
  void put_i32_array(std::string_view key, const std::vector<int32_t>& values) override;
  void put_f32_array(std::string_view key, const std::vector<float>& values) override;

  // `shape` is row-major (safetensors / numpy order, the last dimension
  // contiguous); the file stores it reversed (ggml's ne).  1..4 dimensions,
  // each > 0, the last a multiple of the type's block size; names unique and at
  // most 64 bytes.  Throws invalid_argument naming the tensor.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape, std::vector<std::byte> bytes);
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape, Producer produce);
  static uint64_t tensor_bytes(GgmlType type, const std::vector<int64_t>& shape);

  size_t n_keys() const { return kv_.size(); }
  size_t n_tensors() const { return tensors_.size(); }
  uint64_t data_bytes() const;   // sum of the tensors' bytes

  // Writes everything to `path` (see above).  `progress` gets the tensor bytes
  // written and the total after each tensor; false cancels (Error cancelled).
  // Throws io naming the path when it cannot be written.
  void write(const std::filesystem::path& path, const ProgressFn& progress = {}) const;

 private:
  struct Kv {
    std::string key;
    std::string encoded;   // u32 type + value, as in the file
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    Producer produce;
  };
  void put(std::string_view key, std::string encoded);
  uint32_t alignment() const;

  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace reach
