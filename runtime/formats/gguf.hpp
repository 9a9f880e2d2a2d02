#pragma once
// GGUF files (the llama.cpp model format, v2 and v3, little-endian), read
// through a read-only mmap and validated as strictly as safetensors: magic,
// version, bounded tensor / metadata counts, every string and array length
// checked against the bytes left before anything is built from it, known
// value types, bounded array nesting, a cap on the metadata size, the
// alignment (general.alignment, default 32, a power of two), and per tensor:
// 1..4 non-zero dims without overflow, a type reach reads, a byte size of
// whole blocks, an aligned offset inside the file, no overlap with another
// tensor.  Errors are reach::Error(format) (io when the file cannot be opened
// or mapped) whose message starts with "gguf (PATH):" and names the key or
// tensor at fault.
//
// Model::load reads model weights through it (runtime/model/model_gguf.cpp), and
// gguf_config.hpp maps the llama metadata to ModelConfig.
//
// Views (strings, tensor data) point into the mapping and stay valid as long
// as the GgufFile lives (moves included).  Tensor data is aligned to the
// file's alignment relative to the file start.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/platform/file_map.hpp"

namespace reach {

// The tensor types reach reads (ggml's ids).  Other ggml types are refused
// at open() with the tensor's name and the type id.
enum class GgmlType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8,
  q4_k = 12, q5_k = 13, q6_k = 14, bf16 = 30, mxfp4 = 39,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;       // "Q4_K", as ggml spells it
  uint32_t block_size;    // elements per block (1 for plain floats)
  uint32_t block_bytes;   // bytes per block
};

// nullptr when `id` is not a type reach reads.
const GgmlTypeTraits* ggml_type_traits(uint32_t id);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);
// ggml's name for any id it ever defined ("Q2_K", "IQ4_XS", ...), or nullptr.
const char* ggml_type_name(uint32_t id);
// "F32, F16, BF16, Q8_0, ..." for messages.
std::string ggml_supported_type_names();

// Metadata value types, as stored in the file.
enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* gguf_type_name(GgufType type);   // "UINT32", "ARRAY", ... as the spec names them

// One metadata value: a view of its validated bytes in the mapping.
struct GgufValue {
  GgufType type = GgufType::u8;
  GgufType elem_type = GgufType::u8;   // arrays only
  uint64_t count = 0;                  // arrays only: number of elements
  const std::byte* data = nullptr;     // scalars: the value; arrays: the first element
  uint64_t nbytes = 0;                 // bytes from `data` to the value's end
  std::string type_string() const;     // "UINT32", "ARRAY[STRING]", ...
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::f32;
  std::vector<int64_t> ne;             // ggml order: ne[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;                 // from the start of the data section
  const std::byte* data = nullptr;     // into the mapping
  uint64_t nbytes = 0;
  int64_t numel() const;
  std::vector<int64_t> shape() const;  // row-major order (ne reversed), as safetensors / numpy write it
  std::string ne_string() const;       // "[576, 49152]" (ggml order)
};

// One .gguf file, mapped read-only.  Move-only.
class GgufFile {
 public:
  // Maps and validates header, metadata and tensor infos; throws io / format.
  static GgufFile open(const std::filesystem::path& path);

  GgufFile() = default;
  ~GgufFile();
  GgufFile(GgufFile&& other) noexcept;
  GgufFile& operator=(GgufFile&& other) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t file_size() const { return map_.size(); }
  uint64_t data_offset() const { return data_offset_; }   // file offset of the tensor data section

  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  const GgufTensor& tensor(std::string_view name) const;   // throws format naming the tensor and file

  // Metadata keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed access.  get_* throw format when the key is missing or holds
  // another type ("gguf (PATH): key 'K' is FLOAT32, expected an integer");
  // opt_* return nullopt when missing and throw on a wrong type.  Integers
  // of any width are accepted when the value fits the asked type.
  uint32_t get_u32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  double get_f64(std::string_view key) const;   // FLOAT32 or FLOAT64
  bool get_bool(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;
  std::optional<uint32_t> opt_u32(std::string_view key) const;
  std::optional<uint64_t> opt_u64(std::string_view key) const;
  std::optional<int64_t> opt_i64(std::string_view key) const;
  std::optional<double> opt_f64(std::string_view key) const;
  std::optional<bool> opt_bool(std::string_view key) const;
  std::optional<std::string_view> opt_string(std::string_view key) const;
  // Arrays: the element type must match (any integer type for get_int_array).
  uint64_t array_size(std::string_view key) const;   // any array
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;   // FLOAT32 (FLOAT64 rounded)

  // "gguf (PATH): " + what, for messages of code built on this file.
  [[noreturn]] void fail(const std::string& what) const;

 private:
  void release() noexcept;
  const GgufValue& need(std::string_view key, const char* expected) const;
  [[noreturn]] void wrong_type(std::string_view key, const GgufValue& v, const char* expected) const;
  std::optional<int64_t> int_value(std::string_view key, const GgufValue& v, const char* expected) const;

  std::filesystem::path path_;
  platform::FileMapping map_;   // the whole file, read-only
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::vector<std::string> keys_;
  std::map<std::string, GgufValue, std::less<>> values_;
};

// Limits (exposed so tests can aim just past them).
constexpr uint64_t kGgufMaxTensors = 1u << 20;
constexpr uint64_t kGgufMaxKeys = 1u << 20;
constexpr uint64_t kGgufMaxMetadataBytes = 128ull << 20;   // the key/value section
constexpr int kGgufMaxArrayDepth = 4;                      // arrays of arrays of ...
constexpr uint64_t kGgufMaxKeyBytes = 65535;               // per the GGUF spec
constexpr uint64_t kGgufMaxTensorNameBytes = 64;           // per the GGUF spec (ggml's GGML_MAX_NAME)
constexpr uint32_t kGgufMaxDims = 4;

}  // namespace reach
