#include "runtime/formats/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"

namespace reach {

namespace {

constexpr GgmlTypeTraits kTypes[] = {
    {GgmlType::f32, "F32", 1, 4},       {GgmlType::f16, "F16", 1, 2},       {GgmlType::bf16, "BF16", 1, 2},
    {GgmlType::q8_0, "Q8_0", 32, 34},   {GgmlType::q4_0, "Q4_0", 32, 18},   {GgmlType::q4_1, "Q4_1", 32, 20},
    {GgmlType::q5_0, "Q5_0", 32, 22},   {GgmlType::q5_1, "Q5_1", 32, 24},   {GgmlType::q4_k, "Q4_K", 256, 144},
    {GgmlType::q5_k, "Q5_K", 256, 176}, {GgmlType::q6_k, "Q6_K", 256, 210}, {GgmlType::mxfp4, "MXFP4", 32, 17},
};

// Every id ggml has defined, for messages about the ones reach does not read.
constexpr std::pair<uint32_t, const char*> kAllTypeNames[] = {
    {0, "F32"},      {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {4, "Q4_2 (removed from ggml)"},
    {5, "Q4_3 (removed from ggml)"}, {6, "Q5_0"},    {7, "Q5_1"},    {8, "Q8_0"},   {9, "Q8_1"},
    {10, "Q2_K"},    {11, "Q3_K"},   {12, "Q4_K"},   {13, "Q5_K"},   {14, "Q6_K"},  {15, "Q8_K"},
    {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"},
    {22, "IQ2_S"},   {23, "IQ4_XS"}, {24, "I8"},     {25, "I16"},    {26, "I32"},   {27, "I64"},
    {28, "F64"},     {29, "IQ1_M"},  {30, "BF16"},   {31, "Q4_0_4_4 (removed from ggml)"},
    {32, "Q4_0_4_8 (removed from ggml)"}, {33, "Q4_0_8_8 (removed from ggml)"}, {34, "TQ1_0"}, {35, "TQ2_0"},
    {36, "IQ4_NL_4_4 (removed from ggml)"}, {37, "IQ4_NL_4_8 (removed from ggml)"},
    {38, "IQ4_NL_8_8 (removed from ggml)"}, {39, "MXFP4"}, {40, "NVFP4"}, {41, "Q1_0"},
};

constexpr const char* kValueTypeNames[] = {"UINT8", "INT8",   "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                           "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64", "FLOAT64"};
constexpr uint32_t kValueTypes = 13;

// Bytes of one scalar of a fixed-size type; 0 for STRING / ARRAY.
uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    default: return 0;
  }
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::u16: case GgufType::i16: case GgufType::u32:
    case GgufType::i32: case GgufType::u64: case GgufType::i64: return true;
    default: return false;
  }
}

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);   // little-endian host (checked in open()); unaligned in general
  return v;
}

// An integer element as int64 (nullopt: a UINT64 above INT64_MAX).
std::optional<int64_t> load_int(GgufType t, const std::byte* p) {
  switch (t) {
    case GgufType::u8: return load<uint8_t>(p);
    case GgufType::i8: return load<int8_t>(p);
    case GgufType::u16: return load<uint16_t>(p);
    case GgufType::i16: return load<int16_t>(p);
    case GgufType::u32: return load<uint32_t>(p);
    case GgufType::i32: return load<int32_t>(p);
    case GgufType::i64: return load<int64_t>(p);
    case GgufType::u64: {
      const uint64_t u = load<uint64_t>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    }
    default: return std::nullopt;
  }
}

std::string hex4(const std::byte* p) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const unsigned b = std::to_integer<unsigned>(p[i]);
    if (i) s += ' ';
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

constexpr const char* kRedownload =
    " - the file is corrupt or truncated (an interrupted download?); download it again";

// Reads the header front to back; every read is checked against the bytes left.
class Cursor {
 public:
  Cursor(const std::byte* base, uint64_t size, const std::filesystem::path& path)
      : base_(base), size_(size), path_(path) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::format, "gguf (" + platform::path_to_utf8(path_) + "): " + what);
  }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const std::byte* here() const { return base_ + pos_; }

  // `what` names the field for the message ("key 'x': string length").
  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail(what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) + " but the " +
           std::to_string(size_) + "-byte file has only " + std::to_string(left()) + " left" + kRedownload);
  }
  const std::byte* take(uint64_t n, const std::string& what) {
    need(n, what);
    const std::byte* p = here();
    pos_ += n;
    return p;
  }
  uint32_t u32(const std::string& what) { return load<uint32_t>(take(4, what)); }
  uint64_t u64(const std::string& what) { return load<uint64_t>(take(8, what)); }
  std::string_view str(const std::string& what, uint64_t max_len) {
    const uint64_t n = u64(what + " length");
    if (n > max_len)
      fail(what + " is " + std::to_string(n) + " bytes long, more than the " + std::to_string(max_len) +
           " the format allows" + kRedownload);
    const std::byte* p = take(n, what + " (" + std::to_string(n) + " bytes)");
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(n)};
  }

 private:
  const std::byte* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::filesystem::path& path_;
};

// Checks one value of type `t` at the cursor and steps over it.  Nothing is
// allocated: arrays are checked element by element (strings, arrays) or as one
// byte range (fixed-size types), their count first bounded by the bytes left.
// `path` holds the array indices above this value; messages are built only on
// failure, as a tokenizer's vocabulary is hundreds of thousands of strings.
void check_value(Cursor& c, uint32_t t, const std::string& key, std::vector<uint64_t>& path) {
  auto where = [&] {
    std::string w = "key '";   // appended piece by piece: GCC 12 gives a false -Wrestrict on "..." + str
    w += key;
    w += '\'';
    for (uint64_t i : path) {
      w += '[';
      w += std::to_string(i);
      w += ']';
    }
    return w;
  };
  if (t >= kValueTypes)
    c.fail(where() + " has unknown value type " + std::to_string(t) + " (the format defines 0..12)" + kRedownload);
  const GgufType type = static_cast<GgufType>(t);
  if (type == GgufType::string) {
    if (c.left() < 8) c.need(8, where() + " string length");
    const uint64_t n = load<uint64_t>(c.here());
    // (Not need(8 + n): a length near 2^64 would wrap the sum and pass.)
    if (n > c.left() - 8)
      c.fail(where() + " string of " + std::to_string(n) + " bytes needs 8 + " + std::to_string(n) +
             " bytes at offset " + std::to_string(c.pos()) + " but the file has only " + std::to_string(c.left()) +
             " left" + kRedownload);
    c.take(8 + n, "");
    return;
  }
  if (type != GgufType::array) {
    const uint64_t n = scalar_size(type);
    if (c.left() < n) c.need(n, where() + " " + kValueTypeNames[t] + " value");
    const std::byte* p = c.take(n, "");
    if (type == GgufType::boolean && std::to_integer<unsigned>(*p) > 1)
      c.fail(where() + " is a BOOL of byte value " + std::to_string(std::to_integer<unsigned>(*p)) +
             " (only 0 and 1 are valid)" + kRedownload);
    return;
  }
  if (path.size() >= static_cast<size_t>(kGgufMaxArrayDepth))
    c.fail(where() + " nests arrays deeper than " + std::to_string(kGgufMaxArrayDepth) +
           " levels; no model metadata needs that" + kRedownload);
  if (c.left() < 12) c.need(12, where() + " array header");
  const uint32_t et = c.u32("");
  const uint64_t count = c.u64("");
  if (et >= kValueTypes)
    c.fail(where() + " is an array of unknown value type " + std::to_string(et) + " (the format defines 0..12)" +
           kRedownload);
  const GgufType elem = static_cast<GgufType>(et);
  // The smallest encoding of one element: a string is its 8-byte length, an
  // array its 4-byte type and 8-byte count.
  const uint64_t min_elem = elem == GgufType::string ? 8 : elem == GgufType::array ? 12 : scalar_size(elem);
  if (count > c.left() / min_elem)
    c.fail(where() + " is an array of " + std::to_string(count) + " " + kValueTypeNames[et] + " elements (at least " +
           std::to_string(min_elem) + " bytes each) but only " + std::to_string(c.left()) +
           " bytes of the file are left" + kRedownload);
  if (elem == GgufType::string || elem == GgufType::array) {
    path.push_back(0);
    for (uint64_t i = 0; i < count; ++i) {
      path.back() = i;
      check_value(c, et, key, path);
    }
    path.pop_back();
    return;
  }
  const std::byte* p = c.take(count * min_elem, "");
  if (elem == GgufType::boolean)
    for (uint64_t i = 0; i < count; ++i)
      if (std::to_integer<unsigned>(p[i]) > 1)
        c.fail(where() + "[" + std::to_string(i) + "] is a BOOL of byte value " +
               std::to_string(std::to_integer<unsigned>(p[i])) + " (only 0 and 1 are valid)" + kRedownload);
}

std::string dims_string(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

// ---------------------------------------------------------------------------
// Types

const GgmlTypeTraits* ggml_type_traits(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) { return *ggml_type_traits(static_cast<uint32_t>(type)); }

const char* ggml_type_name(uint32_t id) {
  for (const auto& [i, n] : kAllTypeNames)
    if (i == id) return n;
  return nullptr;
}

std::string ggml_supported_type_names() {
  std::string s;
  for (const auto& t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

const char* gguf_type_name(GgufType type) {
  const auto t = static_cast<uint32_t>(type);
  return t < kValueTypes ? kValueTypeNames[t] : "?";
}

std::string GgufValue::type_string() const {
  if (type != GgufType::array) return gguf_type_name(type);
  return std::string("ARRAY[") + gguf_type_name(elem_type) + "]";
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;   // checked against overflow at open()
  return n;
}

std::vector<int64_t> GgufTensor::shape() const { return {ne.rbegin(), ne.rend()}; }

std::string GgufTensor::ne_string() const {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// ---------------------------------------------------------------------------
// GgufFile: life cycle

GgufFile::~GgufFile() { release(); }

void GgufFile::release() noexcept {
  map_.unmap();
}

GgufFile::GgufFile(GgufFile&& o) noexcept { *this = std::move(o); }

GgufFile& GgufFile::operator=(GgufFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::move(o.map_);
    version_ = o.version_;
    alignment_ = o.alignment_;
    data_offset_ = o.data_offset_;
    tensors_ = std::move(o.tensors_);
    tensor_index_ = std::move(o.tensor_index_);
    keys_ = std::move(o.keys_);
    values_ = std::move(o.values_);
  }
  return *this;
}

void GgufFile::fail(const std::string& what) const {
  throw Error(ErrorCode::format, "gguf (" + platform::path_to_utf8(path_) + "): " + what);
}

// ---------------------------------------------------------------------------
// GgufFile::open

GgufFile GgufFile::open(const std::filesystem::path& path) {
  static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");
  GgufFile f;
  f.path_ = path;
  auto io_fail = [&](const std::string& what) {
    throw Error(ErrorCode::io, "gguf (" + platform::path_to_utf8(path) + "): " + what);
  };

  uint64_t size = 0;
  {
    platform::ReadOnlyFile file;
    std::string error;
    platform::FileType type{};
    if (!file.open(path, error)) {
      // A directory cannot be opened on Windows: say what it is there too.
      if (platform::path_type(path, type) && type == platform::FileType::directory)
        io_fail("is a directory, not a .gguf file");
      io_fail("cannot open: " + error + " - check the path and the file's permissions");
    }
    if (!file.status(type, size, error)) io_fail("cannot stat: " + error);
    if (type != platform::FileType::regular)
      io_fail(type == platform::FileType::directory ? std::string("is a directory, not a .gguf file")
                                                    : std::string("not a regular file (") +
                                                          platform::file_type_name(type) + ")");
    constexpr uint64_t kHeader = 4 + 4 + 8 + 8;   // magic, version, tensor count, key count
    if (size < kHeader)
      f.fail("only " + std::to_string(size) + " bytes, shorter than the " + std::to_string(kHeader) +
             "-byte GGUF header" + kRedownload);
    if (size > std::numeric_limits<size_t>::max()) io_fail("larger than this process can map");
    if (!f.map_.map(file, size, error))
      io_fail("mapping " + std::to_string(size) + " bytes failed: " + error +
              " - check free address space / ulimit -v");
  }  // the file is closed here: the mapping keeps it alive
  const std::byte* bytes = f.map_.data();
  Cursor c(bytes, size, f.path_);

  // 1. Magic and version.
  if (std::memcmp(bytes, "GGUF", 4) != 0)
    f.fail("not a GGUF file: it starts with bytes " + hex4(bytes) + ", a GGUF file with 47 47 55 46 (\"GGUF\")");
  c.take(4, "magic");
  const uint32_t version = c.u32("version");
  const uint32_t swapped = __builtin_bswap32(version);
  if (version == 1)
    f.fail("GGUF version 1 (the 2023 draft with 32-bit lengths) is not supported; reach reads versions 2 and 3"
           " - convert the model again with a current llama.cpp");
  if (version != 2 && version != 3) {
    if (swapped >= 1 && swapped <= 3)
      f.fail("big-endian GGUF (version " + std::to_string(swapped) +
             " byte-swapped); reach reads little-endian files - use the little-endian file");
    f.fail("GGUF version " + std::to_string(version) + " is not supported; reach reads versions 2 and 3" +
           (version > 3 ? " - the file is newer than this reach" : kRedownload));
  }
  f.version_ = version;

  // 2. Counts, bounded by a hard limit and by what the rest of the file could hold.
  const uint64_t n_tensors = c.u64("tensor count");
  const uint64_t n_keys = c.u64("metadata key count");
  constexpr uint64_t kMinTensorInfo = 8 + 1 + 4 + 8 + 4 + 8;   // name of 1 byte, 1 dim
  constexpr uint64_t kMinKeyValue = 8 + 1 + 4 + 1;             // key of 1 byte, a UINT8
  if (n_tensors > kGgufMaxTensors || n_tensors > c.left() / kMinTensorInfo)
    f.fail("tensor count " + std::to_string(n_tensors) + " is more than " +
           (n_tensors > kGgufMaxTensors ? "reach accepts (" + std::to_string(kGgufMaxTensors) + ")"
                                        : "the " + std::to_string(size) + "-byte file could describe") +
           kRedownload);
  if (n_keys > kGgufMaxKeys || n_keys > c.left() / kMinKeyValue)
    f.fail("metadata key count " + std::to_string(n_keys) + " is more than " +
           (n_keys > kGgufMaxKeys ? "reach accepts (" + std::to_string(kGgufMaxKeys) + ")"
                                  : "the " + std::to_string(size) + "-byte file could hold") +
           kRedownload);

  // 3. Metadata.  Values stay in the mapping; only views are kept.
  const uint64_t meta_begin = c.pos();
  f.keys_.reserve(static_cast<size_t>(n_keys));
  for (uint64_t i = 0; i < n_keys; ++i) {
    const std::string where_key = "metadata key #" + std::to_string(i);
    const std::string_view key = c.str(where_key, kGgufMaxKeyBytes);
    if (key.empty()) f.fail(where_key + " is an empty string" + kRedownload);
    const std::string where = "key '" + std::string(key) + "'";
    if (f.values_.count(key)) f.fail(where + " appears twice" + kRedownload);
    const uint32_t t = c.u32(where + " value type");
    GgufValue v;
    if (t < kValueTypes) v.type = static_cast<GgufType>(t);
    const uint64_t value_begin = c.pos();
    std::vector<uint64_t> array_path;
    check_value(c, t, std::string(key), array_path);
    if (c.pos() - meta_begin > kGgufMaxMetadataBytes)
      f.fail("metadata is more than " + std::to_string(kGgufMaxMetadataBytes >> 20) + " MiB (at " + where +
             ", which ends " + std::to_string(c.pos() - meta_begin) +
             " bytes into the metadata); no model needs that much - the file is malformed");
    const std::byte* p = bytes + value_begin;
    if (v.type == GgufType::array) {
      v.elem_type = static_cast<GgufType>(load<uint32_t>(p));
      v.count = load<uint64_t>(p + 4);
      p += 12;
    } else if (v.type == GgufType::string) {
      v.count = load<uint64_t>(p);
      p += 8;
    }
    v.data = p;
    v.nbytes = static_cast<uint64_t>((bytes + c.pos()) - p);
    f.keys_.emplace_back(key);
    f.values_.emplace(std::string(key), v);
  }

  // 4. Alignment.
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufType::u32)
      f.fail("key 'general.alignment' is " + a->type_string() + ", expected UINT32" + kRedownload);
    const uint32_t al = load<uint32_t>(a->data);
    if (al == 0 || (al & (al - 1)) != 0)
      f.fail("key 'general.alignment' is " + std::to_string(al) + ", expected a power of two" + kRedownload);
    f.alignment_ = al;
  }

  // 5. Tensor infos.
  f.tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string where_name = "tensor #" + std::to_string(i) + " name";
    const std::string_view name = c.str(where_name, kGgufMaxTensorNameBytes);
    if (name.empty()) f.fail(where_name + " is an empty string" + kRedownload);
    const std::string where = "tensor '" + std::string(name) + "'";
    if (f.tensor_index_.count(name)) f.fail(where + " appears twice" + kRedownload);
    const uint32_t n_dims = c.u32(where + " dimension count");
    if (n_dims < 1 || n_dims > kGgufMaxDims)
      f.fail(where + " has " + std::to_string(n_dims) + " dimensions; a GGUF tensor has 1 to " +
             std::to_string(kGgufMaxDims) + kRedownload);
    std::vector<uint64_t> dims(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      dims[d] = c.u64(where + " dimension " + std::to_string(d));
      if (dims[d] == 0) f.fail(where + " has a zero dimension (ne[" + std::to_string(d) + "] = 0)" + kRedownload);
      if (__builtin_mul_overflow(numel, dims[d], &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        f.fail(where + " dimensions " + dims_string(std::vector<uint64_t>(dims.begin(), dims.begin() + d + 1)) +
               " have more elements than 2^63" + kRedownload);
    }
    const uint32_t type_id = c.u32(where + " type");
    const GgmlTypeTraits* tt = ggml_type_traits(type_id);
    if (!tt) {
      const char* known = ggml_type_name(type_id);
      f.fail(where + " has " +
             (known ? std::string("type ") + known + " (id " + std::to_string(type_id) + "), which reach does not read"
                    : "unknown type id " + std::to_string(type_id)) +
             " (reach reads " + ggml_supported_type_names() + ")" +
             (known ? " - use a file quantized to one of those" : kRedownload));
    }
    if (dims[0] % tt->block_size != 0)
      f.fail(where + " has rows of " + std::to_string(dims[0]) + " elements (ne[0]), not a whole number of " +
             tt->name + " blocks of " + std::to_string(tt->block_size) + ", so its byte size " +
             dims_string(dims) + " x " + std::to_string(tt->block_bytes) + "/" + std::to_string(tt->block_size) +
             " is not whole" + kRedownload);
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel / tt->block_size, static_cast<uint64_t>(tt->block_bytes), &nbytes))
      f.fail(where + " byte size " + dims_string(dims) + " x " + tt->name + " overflows 64 bits" + kRedownload);
    const uint64_t offset = c.u64(where + " data offset");
    GgufTensor t;
    t.name = std::string(name);
    t.type = tt->type;
    for (uint64_t d : dims) t.ne.push_back(static_cast<int64_t>(d));
    t.offset = offset;
    t.nbytes = nbytes;
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  // 6. Data section: starts at the next multiple of the alignment.
  const uint64_t header_end = c.pos();
  const uint64_t al = f.alignment_;
  const uint64_t padded = header_end % al == 0 ? header_end : header_end + (al - header_end % al);
  if (f.tensors_.empty()) {
    f.data_offset_ = std::min(padded, size);   // a file without tensors may end at the header
    return f;
  }
  if (padded > size)
    f.fail("the tensor data section would start at offset " + std::to_string(padded) + " (header end " +
           std::to_string(header_end) + " aligned to " + std::to_string(al) + "), past the end of the " +
           std::to_string(size) + "-byte file" + kRedownload);
  f.data_offset_ = padded;
  const uint64_t data_size = size - padded;

  // 7. Every tensor aligned, inside the file, and no two overlapping.
  std::vector<size_t> order(f.tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (GgufTensor& t : f.tensors_) {
    const std::string where = "tensor '" + t.name + "'";
    if (t.offset % al != 0)
      f.fail(where + " has data offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
             std::to_string(al) + (f.has("general.alignment") ? " (general.alignment)" : " (the default)") +
             kRedownload);
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      f.fail(where + " (" + ggml_type_traits(t.type).name + " " + t.ne_string() + ", " + std::to_string(t.nbytes) +
             " bytes at data offset " + std::to_string(t.offset) + ") runs past the end of the " +
             std::to_string(data_size) + "-byte data section (file size " + std::to_string(size) +
             ", data starts at " + std::to_string(padded) + ")" + kRedownload);
    t.data = bytes + padded + t.offset;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return f.tensors_[a].offset != f.tensors_[b].offset ? f.tensors_[a].offset < f.tensors_[b].offset : a < b;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensor& prev = f.tensors_[order[k - 1]];
    const GgufTensor& cur = f.tensors_[order[k]];
    if (cur.offset < prev.offset + prev.nbytes)
      f.fail("tensors '" + prev.name + "' (data bytes " + std::to_string(prev.offset) + ".." +
             std::to_string(prev.offset + prev.nbytes) + ") and '" + cur.name + "' (from " +
             std::to_string(cur.offset) + ") overlap - the file is malformed; convert it again");
  }
  return f;
}

// ---------------------------------------------------------------------------
// GgufFile: access

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  if (const GgufTensor* t = find_tensor(name)) return *t;
  fail("tensor '" + std::string(name) + "' not found (the file has " + std::to_string(tensors_.size()) +
       " tensors) - the file may be for another architecture");
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

void GgufFile::wrong_type(std::string_view key, const GgufValue& v, const char* expected) const {
  fail("key '" + std::string(key) + "' is " + v.type_string() + ", expected " + expected);
}

const GgufValue& GgufFile::need(std::string_view key, const char* expected) const {
  if (const GgufValue* v = find(key)) return *v;
  fail("missing key '" + std::string(key) + "' (" + expected + ")");
}

std::optional<int64_t> GgufFile::int_value(std::string_view key, const GgufValue& v, const char* expected) const {
  if (!is_integer(v.type)) wrong_type(key, v, expected);
  return load_int(v.type, v.data);
}

std::optional<uint64_t> GgufFile::opt_u64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::u64) return load<uint64_t>(v->data);
  const std::optional<int64_t> i = int_value(key, *v, "an unsigned integer");
  if (!i || *i < 0) fail("key '" + std::string(key) + "' is negative, expected an unsigned integer");
  return static_cast<uint64_t>(*i);
}

std::optional<uint32_t> GgufFile::opt_u32(std::string_view key) const {
  const std::optional<uint64_t> v = opt_u64(key);
  if (v && *v > std::numeric_limits<uint32_t>::max())
    fail("key '" + std::string(key) + "' is " + std::to_string(*v) + ", more than a 32-bit value holds");
  if (!v) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

std::optional<int64_t> GgufFile::opt_i64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  const std::optional<int64_t> i = int_value(key, *v, "an integer");
  if (!i) fail("key '" + std::string(key) + "' is " + std::to_string(load<uint64_t>(v->data)) + ", more than 2^63 - 1");
  return i;
}

std::optional<double> GgufFile::opt_f64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::f32) return static_cast<double>(load<float>(v->data));
  if (v->type == GgufType::f64) return load<double>(v->data);
  wrong_type(key, *v, "FLOAT32 or FLOAT64");
}

std::optional<bool> GgufFile::opt_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::boolean) wrong_type(key, *v, "BOOL");
  return std::to_integer<unsigned>(*v->data) != 0;
}

std::optional<std::string_view> GgufFile::opt_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::string) wrong_type(key, *v, "STRING");
  return std::string_view(reinterpret_cast<const char*>(v->data), static_cast<size_t>(v->count));
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  need(key, "an unsigned integer");
  return *opt_u32(key);
}
uint64_t GgufFile::get_u64(std::string_view key) const {
  need(key, "an unsigned integer");
  return *opt_u64(key);
}
int64_t GgufFile::get_i64(std::string_view key) const {
  need(key, "an integer");
  return *opt_i64(key);
}
double GgufFile::get_f64(std::string_view key) const {
  need(key, "a FLOAT32 or FLOAT64");
  return *opt_f64(key);
}
bool GgufFile::get_bool(std::string_view key) const {
  need(key, "a BOOL");
  return *opt_bool(key);
}
std::string_view GgufFile::get_string(std::string_view key) const {
  need(key, "a STRING");
  return *opt_string(key);
}

uint64_t GgufFile::array_size(std::string_view key) const {
  const GgufValue& v = need(key, "an ARRAY");
  if (v.type != GgufType::array) wrong_type(key, v, "an ARRAY");
  return v.count;
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = need(key, "an ARRAY[STRING]");
  if (v.type != GgufType::array || v.elem_type != GgufType::string) wrong_type(key, v, "ARRAY[STRING]");
  // Lengths were all checked at open(); the count is bounded by the file size / 8.
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(v.count));
  const std::byte* p = v.data;
  for (uint64_t i = 0; i < v.count; ++i) {
    const uint64_t n = load<uint64_t>(p);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), static_cast<size_t>(n));
    p += 8 + n;
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue& v = need(key, "an ARRAY of integers");
  if (v.type != GgufType::array || !is_integer(v.elem_type)) wrong_type(key, v, "an ARRAY of integers");
  const uint64_t es = scalar_size(v.elem_type);
  std::vector<int64_t> out(static_cast<size_t>(v.count));
  for (uint64_t i = 0; i < v.count; ++i) {
    const std::optional<int64_t> x = load_int(v.elem_type, v.data + i * es);
    if (!x) fail("key '" + std::string(key) + "'[" + std::to_string(i) + "] is more than 2^63 - 1");
    out[i] = *x;
  }
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue& v = need(key, "an ARRAY[FLOAT32]");
  if (v.type != GgufType::array || (v.elem_type != GgufType::f32 && v.elem_type != GgufType::f64))
    wrong_type(key, v, "ARRAY[FLOAT32]");
  std::vector<float> out(static_cast<size_t>(v.count));
  for (uint64_t i = 0; i < v.count; ++i)
    out[i] = v.elem_type == GgufType::f32 ? load<float>(v.data + 4 * i)
                                          : static_cast<float>(load<double>(v.data + 8 * i));
  return out;
}

}  // namespace reach
