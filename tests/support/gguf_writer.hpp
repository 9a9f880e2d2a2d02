#pragma once
// A GGUF writer for tests that craft good and bad files (the engine only
// reads them).  Metadata and tensors are written in the order added; tensor
// data goes at the next aligned offset unless an offset is forced.  The raw
// pieces (kv_raw, Layout's counts, magic and version) make hostile files.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reach::test {

// Little-endian encodings of GGUF's pieces.
std::string gguf_u32(uint32_t v);
std::string gguf_u64(uint64_t v);
std::string gguf_str(std::string_view s);   // u64 length + bytes

// GGUF value type ids (the format's numbering).
enum GgufTypeId : uint32_t {
  kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64,
};

class GgufBuilder {
 public:
  struct Layout {
    std::string magic = "GGUF";
    uint32_t version = 3;
    std::optional<uint64_t> n_tensors, n_keys;   // the counts written; default: what was added
    std::optional<uint32_t> alignment;           // padding used; default: general.alignment or 32
  };

  GgufBuilder& kv_u8(const std::string& key, uint8_t v);
  GgufBuilder& kv_u32(const std::string& key, uint32_t v);   // "general.alignment" also sets the padding
  GgufBuilder& kv_i32(const std::string& key, int32_t v);
  GgufBuilder& kv_u64(const std::string& key, uint64_t v);
  GgufBuilder& kv_i64(const std::string& key, int64_t v);
  GgufBuilder& kv_f32(const std::string& key, float v);
  GgufBuilder& kv_f64(const std::string& key, double v);
  GgufBuilder& kv_bool(const std::string& key, bool v);
  GgufBuilder& kv_string(const std::string& key, std::string_view v);
  GgufBuilder& kv_strings(const std::string& key, const std::vector<std::string>& v);
  GgufBuilder& kv_i32s(const std::string& key, const std::vector<int32_t>& v);
  GgufBuilder& kv_f32s(const std::string& key, const std::vector<float>& v);
  // type id + the value's bytes exactly as given.
  GgufBuilder& kv_raw(const std::string& key, uint32_t type, const std::string& value);
  // Drops a key added before (for "missing key" cases built from a full file).
  GgufBuilder& remove_kv(const std::string& key);

  // ne in ggml order.  data: the tensor's bytes; default: ne x type's size of
  // a byte pattern (empty for a type the reader does not know).
  GgufBuilder& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                      std::optional<std::string> data = std::nullopt, std::optional<uint64_t> offset = std::nullopt);
  GgufBuilder& remove_tensor(const std::string& name);

  std::string bytes(const Layout& layout) const;
  std::string bytes() const { return bytes(Layout{}); }
  void write(const std::filesystem::path& path, const Layout& layout) const;
  void write(const std::filesystem::path& path) const { write(path, Layout{}); }

 private:
  struct Kv {
    std::string key, encoded;   // key string + type + value
  };
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string data;
    std::optional<uint64_t> offset;
  };
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

// A small valid llama GGUF (hidden 64, 4 heads / 2 KV heads, ffn 96, 2 layers,
// vocab 40, context 256, F32 weights, tied output) for config and loader tests.
GgufBuilder tiny_llama_gguf();

// Writes `size` bytes at `path`: `head` and then a hole of zeros (sparse, so a
// huge file costs no disk).
void write_sparse(const std::filesystem::path& path, const std::string& head, uint64_t size);

}  // namespace reach::test
