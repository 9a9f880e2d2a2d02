#include "runtime/formats/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/half.hpp"
#include "base/platform/file_names.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/json_parse.hpp"

namespace reach {

namespace {

constexpr uint64_t kMaxHeaderSize = 100'000'000;   // as the reference implementation
constexpr int kMaxHeaderDepth = 8;
constexpr int kMaxIndexDepth = 16;   // {"metadata": {..}, "weight_map": {..}} is 2 deep
constexpr size_t kMaxIndexValues = size_t{4} << 20;   // one per tensor: ~100k for the largest models

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::F32, "F32", 4},   {DType::F16, "F16", 2},          {DType::BF16, "BF16", 2},
    {DType::F64, "F64", 8},   {DType::I64, "I64", 8},          {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},   {DType::I8, "I8", 1},            {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

std::string q(const std::filesystem::path& p) { return platform::path_to_utf8(p); }

[[noreturn]] void fail(ErrorCode code, const std::filesystem::path& file, const std::string& what) {
  throw Error(code, "safetensors file " + q(file) + ": " + what);
}

// Reading a JSON integer that must be a non-negative exact integer.
bool json_u64(const nlohmann::json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    *out = static_cast<uint64_t>(s);
    return true;
  }
  return false;
}

constexpr const char* kRedownload =
    " - the file is corrupt or truncated (an interrupted download?); download it again";

}  // namespace

size_t dtype_size(DType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e.size;
  return 0;
}

const char* dtype_name(DType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e.name;
  return "?";
}

bool dtype_is_compute(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

bool parse_dtype(std::string_view name, DType* out) {
  for (const auto& e : kDTypes) {
    if (name == e.name) {
      *out = e.dtype;
      return true;
    }
  }
  return false;
}

std::string shape_to_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;   // validated against overflow at open()
  return n;
}

std::string TensorInfo::shape_string() const { return shape_to_string(shape); }

// ---------------------------------------------------------------------------
// SafeTensorsFile

SafeTensorsFile::~SafeTensorsFile() { release(); }

void SafeTensorsFile::release() noexcept {
  map_.unmap();
}

SafeTensorsFile::SafeTensorsFile(SafeTensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::move(o.map_)),
      header_size_(o.header_size_),
      tensors_(std::move(o.tensors_)),
      metadata_(std::move(o.metadata_)) {}

SafeTensorsFile& SafeTensorsFile::operator=(SafeTensorsFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::move(o.map_);
    header_size_ = o.header_size_;
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

const TensorInfo* SafeTensorsFile::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

SafeTensorsFile SafeTensorsFile::open(const std::filesystem::path& path) {
  SafeTensorsFile f;
  f.path_ = path;

  uint64_t size = 0;
  {
    const OpenFile file = open_regular_file(path, "safetensors file", " - check the path and the file's permissions");
    size = file.size();
    if (size < 8)
      fail(ErrorCode::format, path, "only " + std::to_string(size) +
                                        " bytes, shorter than the 8-byte header length" + kRedownload);
    if (size > std::numeric_limits<size_t>::max())
      fail(ErrorCode::unsupported, path, "larger than this process can map");
    std::string error;
    if (!f.map_.map(file.file(), size, error))
      fail(ErrorCode::io, path, "mapping " + std::to_string(size) + " bytes failed: " + error +
                                    " - check free address space / ulimit -v");
  }  // the file is closed here: the mapping keeps it alive
  const std::byte* bytes = f.map_.data();

  // 1. Header length.
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<uint64_t>(bytes[i]);
  if (n > kMaxHeaderSize) {
    fail(ErrorCode::format, path, "header length " + std::to_string(n) + " exceeds the " +
                                      std::to_string(kMaxHeaderSize) +
                                      "-byte limit - this is not a safetensors file, or it is corrupt");
  }
  if (n > size - 8) {
    fail(ErrorCode::format, path, "header length " + std::to_string(n) + " runs past the end of the " +
                                      std::to_string(size) + "-byte file" + kRedownload);
  }
  f.header_size_ = n;
  const uint64_t data_size = size - 8 - n;
  const std::byte* data = bytes + 8 + n;

  // 2. JSON.
  nlohmann::json header;
  try {
    // A real header nests 3 deep ({name: {shape: [..]}}); refusing deeper
    // input keeps a hostile 100 MB "[[[[..." from allocating gigabytes.
    header = parse_json_bounded(std::string_view(reinterpret_cast<const char*>(bytes + 8), n), kMaxHeaderDepth);
  } catch (const JsonTooLarge& e) {
    fail(ErrorCode::format, path, std::string("header JSON ") + e.what() +
                                      "; a safetensors header is {name: {dtype, shape, data_offsets}}" + kRedownload);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::format, path, std::string("header is not valid JSON (") + e.what() + ")" + kRedownload);
  }
  if (!header.is_object()) {
    fail(ErrorCode::format, path, std::string("header is a JSON ") + header.type_name() +
                                      ", expected an object of tensors" + kRedownload);
  }

  // 3. Entries.
  struct Range {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;
  ranges.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object())
        fail(ErrorCode::format, path, std::string("__metadata__ is a ") + v.type_name() +
                                          ", expected an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m->is_string())
          fail(ErrorCode::format, path, "__metadata__ key '" + m.key() + "' is a " + m->type_name() +
                                            ", expected a string (the format allows only string values)");
        f.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!v.is_object())
      fail(ErrorCode::format, path, where + "entry is a " + v.type_name() +
                                        ", expected {dtype, shape, data_offsets}" + kRedownload);
    for (auto k = v.begin(); k != v.end(); ++k) {
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets")
        fail(ErrorCode::format, path, where + "unknown field '" + k.key() +
                                          "' (expected dtype, shape, data_offsets)");
    }
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || sh == v.end() || off == v.end())
      fail(ErrorCode::format, path, where + "missing '" +
                                        std::string(dt == v.end() ? "dtype" : sh == v.end() ? "shape" : "data_offsets") +
                                        "'" + kRedownload);
    TensorInfo t;
    t.name = name;
    t.file = path;
    if (!dt->is_string())
      fail(ErrorCode::format, path, where + "dtype is a " + dt->type_name() + ", expected a string like \"F16\"");
    const std::string dts = dt->get<std::string>();
    if (!parse_dtype(dts, &t.dtype))
      fail(ErrorCode::format, path, where + "unknown dtype \"" + dts +
                                        "\" (known: F32 F16 BF16 F64 I64 I32 I16 I8 U8 BOOL F8_E4M3 F8_E5M2)"
                                        " - convert the checkpoint to F16/BF16/F32");
    if (!sh->is_array())
      fail(ErrorCode::format, path, where + "shape is a " + sh->type_name() + ", expected an array of integers");
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      uint64_t dim = 0;
      if (!json_u64(d, &dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(ErrorCode::format, path, where + "shape " + sh->dump() + " has an entry that is not a non-negative integer");
      if (__builtin_mul_overflow(numel, dim, &numel))
        fail(ErrorCode::format, path, where + "shape " + sh->dump() + " overflows 64 bits" + kRedownload);
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    if (numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(ErrorCode::format, path, where + "shape " + sh->dump() + " has too many elements");
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(t.dtype)), &nbytes))
      fail(ErrorCode::format, path, where + "shape " + sh->dump() + " x " + dts + " overflows 64 bits");
    uint64_t b = 0, e = 0;
    if (!off->is_array() || off->size() != 2 || !json_u64((*off)[0], &b) || !json_u64((*off)[1], &e))
      fail(ErrorCode::format, path, where + "data_offsets must be [begin, end] with non-negative integers" + kRedownload);
    if (b > e)
      fail(ErrorCode::format, path, where + "data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                                        "] has begin > end" + kRedownload);
    if (e - b != nbytes)
      fail(ErrorCode::format, path, where + "shape " + t.shape_string() + " x " + dts + " (" +
                                        std::to_string(dtype_size(t.dtype)) + " bytes) = " + std::to_string(nbytes) +
                                        " bytes, but data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                                        "] hold " + std::to_string(e - b) + " bytes" + kRedownload);
    if (e > data_size)
      fail(ErrorCode::format, path, where + "data_offsets end " + std::to_string(e) + " is past the " +
                                        std::to_string(data_size) + "-byte data section (file size " +
                                        std::to_string(size) + ", header " + std::to_string(n) + ")" + kRedownload);
    t.data = data + b;
    t.nbytes = static_cast<size_t>(nbytes);
    auto [pos, inserted] = f.tensors_.emplace(name, std::move(t));
    ranges.push_back({b, e, &pos->first});
  }

  // 4. Layout: contiguous from 0, no overlap, no holes, ends at the file end.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const std::string* prev = nullptr;
  for (const Range& r : ranges) {
    if (r.begin < cursor)
      fail(ErrorCode::format, path, "tensors '" + *prev + "' and '" + *r.name + "' overlap (bytes " +
                                        std::to_string(r.begin) + ".." + std::to_string(cursor) +
                                        " of the data section) - the file is malformed; re-export it");
    if (r.begin > cursor)
      fail(ErrorCode::format, path, "hole of " + std::to_string(r.begin - cursor) + " bytes before tensor '" +
                                        *r.name + "' (data offset " + std::to_string(cursor) +
                                        "); the format requires the data section to be fully covered"
                                        " - the file is malformed; re-export it");
    cursor = r.end;
    prev = r.name;
  }
  if (cursor != data_size)
    fail(ErrorCode::format, path, std::to_string(data_size - cursor) + " bytes after the last tensor are not " +
                                      "covered by any tensor (data section " + std::to_string(data_size) +
                                      " bytes, tensors end at " + std::to_string(cursor) +
                                      "); the format forbids trailing bytes" + kRedownload);
  return f;
}

// ---------------------------------------------------------------------------
// ModelWeights

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Rejects shard names that would escape the model directory.
bool safe_shard_name(const std::string& s) {
  if (s.empty()) return false;
  const std::filesystem::path p = platform::path_from_utf8(s);
  if (p.is_absolute()) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

}  // namespace

ModelWeights ModelWeights::open_dir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  ModelWeights w;
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) {
    w.dir_ = dir.parent_path();
    w.files_.push_back(SafeTensorsFile::open(dir));
    w.tensors_ = w.files_.back().tensors();
    return w;
  }
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorCode::io, "model directory " + q(dir) +
                                   " does not exist or is not a directory - pass the folder holding config.json and "
                                   "model.safetensors");
  w.dir_ = dir;
  const fs::path index_path = dir / "model.safetensors.index.json";
  const fs::path single_path = dir / "model.safetensors";
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single_path, ec))
      throw Error(ErrorCode::io, "model directory " + q(dir) +
                                     " has neither model.safetensors nor model.safetensors.index.json - download the "
                                     "weights into it (reach reads safetensors only; convert .bin/.gguf first)");
    w.files_.push_back(SafeTensorsFile::open(single_path));
    w.tensors_ = w.files_.back().tensors();
    return w;
  }

  // Sharded.
  const std::string where = "shard index " + q(index_path) + ": ";
  nlohmann::json index;
  {
    const std::string text = read_file(index_path, file_kinds::safetensors_index);
    try {
      index = parse_json_bounded(text, kMaxIndexDepth, kMaxIndexValues);
    } catch (const JsonTooLarge& e) {
      throw Error(ErrorCode::format, where + "JSON " + e.what() +
                                         "; an index is {\"metadata\": {...}, \"weight_map\": {tensor: shard file}}");
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorCode::format, where + "not valid JSON (" + e.what() + ") - download it again");
    }
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw Error(ErrorCode::format, where + "expected an object with a \"weight_map\" object {tensor: shard file}");
  const auto& wm = index["weight_map"];
  std::map<std::string, size_t> shard_slot;   // shard file name -> index in files_
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    if (!it->is_string() || !safe_shard_name(it->get<std::string>()))
      throw Error(ErrorCode::format, where + "weight_map entry for '" + it.key() +
                                         "' must be a shard file name inside the model directory");
    shard_slot.emplace(it->get<std::string>(), 0);
  }
  if (shard_slot.empty()) throw Error(ErrorCode::format, where + "weight_map is empty");
  for (auto& [shard, slot] : shard_slot) {
    const fs::path shard_path = dir / platform::path_from_utf8(shard);   // the index is UTF-8
    if (!fs::exists(shard_path, ec)) {
      std::string user;
      for (auto it = wm.begin(); it != wm.end(); ++it)
        if (it->get<std::string>() == shard) {
          user = it.key();
          break;
        }
      throw Error(ErrorCode::io, where + "shard " + shard + " (holding e.g. '" + user + "') is missing from " +
                                     q(dir) + " - download all " + std::to_string(shard_slot.size()) +
                                     " shard files");
    }
    slot = w.files_.size();
    w.files_.push_back(SafeTensorsFile::open(shard_path));
  }
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    const std::string& shard = it->get_ref<const std::string&>();
    const SafeTensorsFile& f = w.files_[shard_slot[shard]];
    const TensorInfo* t = f.find(it.key());
    if (!t)
      throw Error(ErrorCode::format, where + "weight_map puts tensor '" + it.key() + "' in " + q(f.path()) +
                                         ", which does not contain it - the index and shards do not match; "
                                         "download them again from the same revision");
    w.tensors_.emplace(it.key(), *t);
  }
  return w;
}

const TensorInfo* ModelWeights::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorInfo& ModelWeights::get(std::string_view name) const {
  if (const TensorInfo* t = find(name)) return *t;
  std::vector<std::pair<size_t, const std::string*>> scored;
  for (const auto& [n, t] : tensors_) scored.emplace_back(edit_distance(name, n), &n);
  const size_t k = std::min<size_t>(5, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + k, scored.end());
  std::string similar;
  for (size_t i = 0; i < k; ++i) similar += (i ? ", '" : "'") + *scored[i].second + "'";
  throw Error(ErrorCode::format,
              "tensor '" + std::string(name) + "' not found in model " + q(dir_) + " (" +
                  std::to_string(tensors_.size()) + " tensors in " + std::to_string(files_.size()) + " file(s))" +
                  (similar.empty() ? std::string() : "; closest names: " + similar) +
                  " - the checkpoint may be for another architecture or use other tensor names");
}

const TensorInfo& ModelWeights::get(std::string_view name, std::span<const int64_t> expected,
                                    std::string_view why) const {
  const TensorInfo& t = get(name);
  if (!std::equal(t.shape.begin(), t.shape.end(), expected.begin(), expected.end()))
    throw Error(ErrorCode::format, "tensor '" + t.name + "' in " + q(t.file) + " has shape " + t.shape_string() +
                                       ", expected " + shape_to_string(expected) +
                                       (why.empty() ? std::string() : " (" + std::string(why) + ")") +
                                       " - config.json and the weights do not belong together");
  return t;
}

std::vector<std::string> ModelWeights::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [n, t] : tensors_) out.push_back(n);
  return out;
}

uint64_t ModelWeights::total_bytes() const {
  uint64_t s = 0;
  for (const auto& [n, t] : tensors_) s += t.nbytes;
  return s;
}

// ---------------------------------------------------------------------------
// Conversions

void convert_to_f32(const TensorInfo& t, float* out) {
  const size_t n = static_cast<size_t>(t.numel());
  switch (t.dtype) {
    case DType::F32:
      if (n) std::memcpy(out, t.data, n * 4);
      return;
    case DType::F16:
    case DType::BF16: {
      const bool half = t.dtype == DType::F16;
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = half ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    }
    default:
      throw Error(ErrorCode::unsupported, "tensor '" + t.name + "' in " + q(t.file) + " has dtype " +
                                              dtype_name(t.dtype) +
                                              "; reach computes with F32, F16 or BF16 weights - convert the "
                                              "checkpoint (e.g. save it with torch_dtype=float16)");
  }
}

}  // namespace reach
