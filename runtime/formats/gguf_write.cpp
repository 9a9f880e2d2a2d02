#include "runtime/formats/gguf_write.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <system_error>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "base/platform/process.hpp"

namespace fs = std::filesystem;

namespace reach {

namespace {

void add_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void add_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void add_f32(std::string& s, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  add_u32(s, u);
}
void add_str(std::string& s, std::string_view v) {
  add_u64(s, v.size());
  s.append(v);
}
uint32_t type_id(GgufType t) { return static_cast<uint32_t>(t); }

// An open temporary file, removed unless committed.
class TempFile {
 public:
  explicit TempFile(const fs::path& out) : out_(out) {
    tmp_ = out;
    tmp_ += ".tmp-" + std::to_string(platform::process_id());
    f_ = platform::open_file(tmp_, "wb");
    if (!f_)
      throw Error(ErrorCode::io, "cannot write " + platform::path_to_utf8(out) + ": " + std::strerror(errno) +
                                     " - check that its folder exists and is writable");
  }
  ~TempFile() {
    if (f_) std::fclose(f_);
    if (!committed_) {
      std::error_code ec;
      fs::remove(tmp_, ec);
    }
  }
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) fail();
    written_ += n;
  }
  void pad_to(uint64_t alignment) {
    static const char zeros[256] = {};
    while (written_ % alignment) write(zeros, std::min<uint64_t>(sizeof zeros, alignment - written_ % alignment));
  }
  uint64_t written() const { return written_; }
  void commit() {
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail();
    std::error_code ec;
    fs::rename(tmp_, out_, ec);
    if (ec) throw Error(ErrorCode::io, "cannot write " + platform::path_to_utf8(out_) + ": renaming " + platform::path_to_utf8(tmp_) +
                                           " failed: " + ec.message());
    committed_ = true;
  }

 private:
  [[noreturn]] void fail() {
    throw Error(ErrorCode::io, "cannot write " + platform::path_to_utf8(out_) + ": " + std::strerror(errno) +
                                   " (is the disk full?)");
  }
  fs::path out_, tmp_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace

GgmlType ggml_type_of(WType t) {
  switch (t) {
    case WType::f32: return GgmlType::f32;
    case WType::f16: return GgmlType::f16;
    case WType::bf16: return GgmlType::bf16;
    case WType::q8_0: return GgmlType::q8_0;
    case WType::q4_0: return GgmlType::q4_0;
    case WType::q4_1: return GgmlType::q4_1;
    case WType::q5_0: return GgmlType::q5_0;
    case WType::q5_1: return GgmlType::q5_1;
    case WType::q4_k: return GgmlType::q4_k;
    case WType::q5_k: return GgmlType::q5_k;
    case WType::q6_k: return GgmlType::q6_k;
    case WType::mxfp4: return GgmlType::mxfp4;
  }
  throw Error(ErrorCode::internal, "ggml_type_of: unknown weight type");
}

void GgufWriter::put(std::string_view key, std::string encoded) {
  if (key.empty() || key.size() > kGgufMaxKeyBytes)
    throw Error(ErrorCode::invalid_argument, "gguf writer: metadata key '" + std::string(key.substr(0, 80)) +
                                                 "' must be 1.." + std::to_string(kGgufMaxKeyBytes) + " bytes");
  for (Kv& kv : kv_) {
    if (kv.key == key) {
      kv.encoded = std::move(encoded);
      return;
    }
  }
  kv_.push_back({std::string(key), std::move(encoded)});
}

void GgufWriter::put_string(std::string_view key, std::string_view value) {
  std::string e;
  add_u32(e, type_id(GgufType::string));
  add_str(e, value);
  put(key, std::move(e));
}
void GgufWriter::put_u32(std::string_view key, uint32_t value) {
  std::string e;
  add_u32(e, type_id(GgufType::u32));
  add_u32(e, value);
  put(key, std::move(e));
}
void GgufWriter::put_i32(std::string_view key, int32_t value) {
  std::string e;
  add_u32(e, type_id(GgufType::i32));
  add_u32(e, static_cast<uint32_t>(value));
  put(key, std::move(e));
}
void GgufWriter::put_f32(std::string_view key, float value) {
  std::string e;
  add_u32(e, type_id(GgufType::f32));
  add_f32(e, value);
  put(key, std::move(e));
}
void GgufWriter::put_bool(std::string_view key, bool value) {
  std::string e;
  add_u32(e, type_id(GgufType::boolean));
  e.push_back(value ? 1 : 0);
  put(key, std::move(e));
}
void GgufWriter::put_string_array(std::string_view key, const std::vector<std::string>& values) {
  std::string e;
  add_u32(e, type_id(GgufType::array));
  add_u32(e, type_id(GgufType::string));
  add_u64(e, values.size());
  for (const auto& v : values) add_str(e, v);
  put(key, std::move(e));
}
void GgufWriter::put_i32_array(std::string_view key, const std::vector<int32_t>& values) {
  std::string e;
  add_u32(e, type_id(GgufType::array));
  add_u32(e, type_id(GgufType::i32));
  add_u64(e, values.size());
  for (int32_t v : values) add_u32(e, static_cast<uint32_t>(v));
  put(key, std::move(e));
}
void GgufWriter::put_f32_array(std::string_view key, const std::vector<float>& values) {
  std::string e;
  add_u32(e, type_id(GgufType::array));
  add_u32(e, type_id(GgufType::f32));
  add_u64(e, values.size());
  for (float v : values) add_f32(e, v);
  put(key, std::move(e));
}

uint64_t GgufWriter::tensor_bytes(GgmlType type, const std::vector<int64_t>& shape) {
  const GgmlTypeTraits& tr = ggml_type_traits(type);
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n / tr.block_size * tr.block_bytes;
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape, Producer produce) {
  auto bad = [&](const std::string& what) {
    throw Error(ErrorCode::invalid_argument, "gguf writer: tensor '" + name + "' " + what);
  };
  if (name.empty() || name.size() > kGgufMaxTensorNameBytes)
    bad("has a name of " + std::to_string(name.size()) + " bytes; GGUF allows 1.." +
        std::to_string(kGgufMaxTensorNameBytes));
  if (!ggml_type_traits(static_cast<uint32_t>(type))) bad("has an unknown type");
  if (shape.empty() || shape.size() > kGgufMaxDims) bad("has " + std::to_string(shape.size()) + " dimensions (1..4)");
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0 || uint64_t(d) > (uint64_t(1) << 40) / n) bad("has a dimension <= 0 or too many elements");
    n *= uint64_t(d);
  }
  const GgmlTypeTraits& tr = ggml_type_traits(type);
  if (shape.back() % tr.block_size)
    bad("has rows of " + std::to_string(shape.back()) + ", not a multiple of " + tr.name + "'s block of " +
        std::to_string(tr.block_size));
  for (const Tensor& t : tensors_)
    if (t.name == name) bad("is added twice");
  const uint64_t nbytes = tensor_bytes(type, shape);
  tensors_.push_back({std::move(name), type, std::move(shape), nbytes, std::move(produce)});
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape, std::vector<std::byte> bytes) {
  const uint64_t want = tensor_bytes(type, shape);
  if (bytes.size() != want && !shape.empty())
    throw Error(ErrorCode::invalid_argument, "gguf writer: tensor '" + name + "' has " +
                                                 std::to_string(bytes.size()) + " bytes, its shape and type need " +
                                                 std::to_string(want));
  auto data = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  add_tensor(std::move(name), type, std::move(shape),
             [data](std::byte* out) { std::memcpy(out, data->data(), data->size()); });
}

uint64_t GgufWriter::data_bytes() const {
  uint64_t n = 0;
  for (const Tensor& t : tensors_) n += t.nbytes;
  return n;
}

uint32_t GgufWriter::alignment() const {
  for (const Kv& kv : kv_) {
    if (kv.key != "general.alignment") continue;
    uint32_t type, v;
    std::memcpy(&type, kv.encoded.data(), 4);
    if (type != type_id(GgufType::u32))
      throw Error(ErrorCode::invalid_argument, "gguf writer: general.alignment must be put as UINT32");
    std::memcpy(&v, kv.encoded.data() + 4, 4);
    if (v == 0 || (v & (v - 1)))
      throw Error(ErrorCode::invalid_argument, "gguf writer: general.alignment " + std::to_string(v) +
                                                   " is not a power of two");
    return v;
  }
  return 32;
}

void GgufWriter::write(const fs::path& path, const ProgressFn& progress) const {
  const uint32_t align = alignment();
  std::string head = "GGUF";
  add_u32(head, 3);
  add_u64(head, tensors_.size());
  add_u64(head, kv_.size());
  for (const Kv& kv : kv_) {
    add_str(head, kv.key);
    head += kv.encoded;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    add_str(head, t.name);
    add_u32(head, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) add_u64(head, static_cast<uint64_t>(*it));
    add_u32(head, static_cast<uint32_t>(t.type));
    add_u64(head, offset);
    offset += (t.nbytes + align - 1) / align * align;
  }
  TempFile f(path);
  f.write(head.data(), head.size());
  f.pad_to(align);
  const uint64_t total = data_bytes();
  uint64_t done = 0;
  std::vector<std::byte> buf;
  for (const Tensor& t : tensors_) {
    buf.assign(t.nbytes, std::byte{0});
    t.produce(buf.data());
    f.write(buf.data(), buf.size());
    f.pad_to(align);
    done += t.nbytes;
    if (progress && !progress(done, total))
      throw Error(ErrorCode::cancelled, "writing " + platform::path_to_utf8(path) + " was cancelled");
  }
  f.commit();
}

}  // namespace reach
