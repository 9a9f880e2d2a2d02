// safetensors reading/validation, sharded model directories and host
// conversions.  Bad files are generated into a temp dir per test.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/half.hpp"
#include "runtime/formats/safetensors.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/safetensors_writer.hpp"

namespace fs = std::filesystem;
using reach::DType;
using reach::ErrorCode;
using reach::test::error_of;
using reach::test::TempDir;

namespace {

// Writes 8-byte length + header + data; `len` overrides the length field.
void write_raw(const fs::path& p, const std::string& header, const std::string& data = {},
               std::optional<uint64_t> len = std::nullopt) {
  std::ofstream o(p, std::ios::binary);
  uint64_t n = len.value_or(header.size());
  for (int i = 0; i < 8; ++i) o.put(static_cast<char>((n >> (8 * i)) & 0xFF));
  o << header << data;
}

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> to_f32(const reach::TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  reach::convert_to_f32(t, out.data());
  return out;
}

// Independent f16 reference: (-1)^s * 2^(e-15) * (1 + m/1024), subnormal 2^-24 * m.
double f16_reference(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v;
  if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
  else v = std::ldexp(1.0 + m / 1024.0, e - 15);
  return s ? -v : v;
}

}  // namespace

TEST_CASE("safetensors: f32/f16/bf16 round trip and __metadata__") {
  TempDir dir;
  const fs::path p = dir / "rt.safetensors";
  std::vector<float> f32 = {1.5f, -2.25f, 0.0f, 3.0e38f, -1.0e-30f, 7.0f};
  std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x7C00};   // 1, -2, 2^-24, inf
  std::vector<uint16_t> bf16 = {0x3F80, 0xC0A0, 0x0000};          // 1, -5, 0
  reach::write_safetensors(p,
                           {{"a.f32", DType::F32, {2, 3}, bytes_of(f32)},
                            {"b.f16", DType::F16, {4}, bytes_of(f16)},
                            {"c.bf16", DType::BF16, {1, 3}, bytes_of(bf16)},
                            {"d.empty", DType::F16, {0, 5}, {}},
                            {"e.scalar", DType::F32, {}, bytes_of(std::vector<float>{42.0f})}},
                           {{"format", "pt"}, {"note", "hello"}});
  auto f = reach::SafeTensorsFile::open(p);
  CHECK(f.tensors().size() == 5);
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.metadata().at("note") == "hello");
  CHECK(f.header_size() % 8 == 0);

  const reach::TensorInfo* a = f.find("a.f32");
  REQUIRE(a);
  CHECK(a->dtype == DType::F32);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(a->numel() == 6);
  CHECK(a->nbytes == 24);
  CHECK(a->file == p);
  CHECK(to_f32(*a) == f32);

  auto h = to_f32(*f.find("b.f16"));
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == std::ldexp(1.0f, -24));
  CHECK(std::isinf(h[3]));
  CHECK(h[3] > 0);

  auto b = to_f32(*f.find("c.bf16"));
  CHECK(b == std::vector<float>{1.0f, -5.0f, 0.0f});

  CHECK(f.find("d.empty")->numel() == 0);
  CHECK(f.find("d.empty")->nbytes == 0);
  CHECK(f.find("e.scalar")->numel() == 1);
  CHECK(to_f32(*f.find("e.scalar"))[0] == 42.0f);

  // Move keeps the mapping and the pointers valid.
  const std::byte* data_before = f.find("a.f32")->data;
  reach::SafeTensorsFile g = std::move(f);
  CHECK(g.find("a.f32")->data == data_before);
  CHECK(to_f32(*g.find("a.f32")) == f32);
}

TEST_CASE("safetensors: f16 conversion is exact for all 65536 bit patterns") {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = reach::f16_to_f32(static_cast<uint16_t>(h));
    const double want = f16_reference(static_cast<uint16_t>(h));
    const bool ok = std::isnan(want) ? std::isnan(got)
                                     : (static_cast<double>(got) == want && std::signbit(got) == std::signbit(want));
    if (!ok && bad++ < 5) FAIL_CHECK("f16 0x" << std::hex << h << ": got " << got << ", want " << want);
  }
  CHECK(bad == 0);
  CHECK(reach::bf16_to_f32(0x3F80) == 1.0f);
  CHECK(std::isinf(reach::bf16_to_f32(0xFF80)));
  CHECK(std::isnan(reach::bf16_to_f32(0x7FC0)));
}

TEST_CASE("safetensors: file shorter than 8 bytes") {
  TempDir dir;
  const fs::path p = dir / "short.safetensors";
  std::ofstream(p, std::ios::binary) << "abc";
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "3 bytes");
}

TEST_CASE("safetensors: header cut short (length past EOF)") {
  TempDir dir;
  const fs::path p = dir / "cut.safetensors";
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  write_raw(p, header.substr(0, 20), {}, header.size());
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "past the end");
}

TEST_CASE("safetensors: header length over 100 MB") {
  TempDir dir;
  const fs::path p = dir / "huge.safetensors";
  write_raw(p, "{}", {}, 100'000'001ull);
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "100000001");
  write_raw(p, "{}", {}, ~0ull);   // 2^64-1: no overflow in 8 + N
  error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
}

TEST_CASE("safetensors: invalid JSON header") {
  TempDir dir;
  const fs::path p = dir / "badjson.safetensors";
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [1], )");
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "JSON");
}

TEST_CASE("safetensors: deeply nested JSON header does not crash") {
  TempDir dir;
  const fs::path p = dir / "deep.safetensors";
  write_raw(p, std::string(200000, '[') + std::string(200000, ']'));
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "deeper");
  std::string nest;
  for (int i = 0; i < 100000; ++i) nest += R"({"k":)";
  write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":)" + nest);
  msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "deeper");
}

TEST_CASE("safetensors: header is not an object") {
  TempDir dir;
  const fs::path p = dir / "array.safetensors";
  write_raw(p, "[1, 2, 3]");
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "array");
}

TEST_CASE("safetensors: unknown dtype") {
  TempDir dir;
  const fs::path p = dir / "dtype.safetensors";
  write_raw(p, R"({"layer.w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", "xx");
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "layer.w");
  CHECK_HAS(msg, "Q4_K");
}

TEST_CASE("safetensors: byte range does not match shape x dtype") {
  TempDir dir;
  const fs::path p = dir / "range.safetensors";
  write_raw(p, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", std::string(16, '\0'));
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "'w'");
  CHECK_HAS(msg, "12 bytes");
  CHECK_HAS(msg, "16");
}

TEST_CASE("safetensors: shape overflow is caught") {
  TempDir dir;
  const fs::path p = dir / "overflow.safetensors";
  write_raw(p, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})");
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "overflow");
  CHECK_HAS(msg, "'w'");
  write_raw(p, R"({"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})");
  msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "overflow");
}

TEST_CASE("safetensors: negative shape and begin > end") {
  TempDir dir;
  const fs::path p = dir / "neg.safetensors";
  write_raw(p, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "non-negative");
  write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::string(8, '\0'));
  msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "begin > end");
}

TEST_CASE("safetensors: offsets past the end of the file") {
  TempDir dir;
  const fs::path p = dir / "past.safetensors";
  write_raw(p, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0'));
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "'w'");
  CHECK_HAS(msg, "past");
}

TEST_CASE("safetensors: overlapping tensors name both") {
  TempDir dir;
  const fs::path p = dir / "overlap.safetensors";
  write_raw(p,
            R"({"first":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("second":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            std::string(12, '\0'));
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "first");
  CHECK_HAS(msg, "second");
  CHECK_HAS(msg, "overlap");
}

TEST_CASE("safetensors: holes and trailing bytes are rejected") {
  TempDir dir;
  const fs::path p = dir / "hole.safetensors";
  write_raw(p,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            std::string(12, '\0'));
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "hole");
  CHECK_HAS(msg, "'b'");
  write_raw(p, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(6, '\0'));
  msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "trailing");
  CHECK_HAS(msg, p.string());
}

TEST_CASE("safetensors: __metadata__ must map strings to strings") {
  TempDir dir;
  const fs::path p = dir / "meta.safetensors";
  write_raw(p, R"({"__metadata__":{"format":1}})");
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::format);
  CHECK_HAS(msg, "format");
  write_raw(p, R"({"__metadata__":{"format":"pt"}})");   // no tensors at all: valid
  CHECK(reach::SafeTensorsFile::open(p).tensors().empty());
}

TEST_CASE("safetensors: random corruptions never crash") {
  TempDir dir;
  const fs::path good = dir / "good.safetensors";
  reach::write_safetensors(good,
                           {{"a", DType::F16, {2, 3}, std::vector<std::byte>(12, std::byte{0x3C})},
                            {"b", DType::F32, {2}, std::vector<std::byte>(8)}},
                           {{"format", "pt"}});
  const std::string original = reach::test::read_text(good);
  uint64_t state = 0x9E3779B97F4A7C15ull;   // fixed seed: reproducible
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const fs::path p = dir / "fuzz.safetensors";
  int opened = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = original;
    const int edits = 1 + static_cast<int>(next() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = next() % s.size();
      switch (next() % 4) {
        case 0: s[pos] = static_cast<char>(next()); break;                           // flip a byte
        case 1: s.resize(pos); break;                                                 // truncate
        case 2: s[pos] = "0123456789[]{},\":-"[next() % 17]; break;                  // JSON-ish byte
        case 3: s.insert(pos, 1, static_cast<char>(next())); break;                   // insert a byte
      }
      if (s.empty()) s = "x";
    }
    std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
    try {
      auto f = reach::SafeTensorsFile::open(p);
      for (const auto& [name, t] : f.tensors()) {
        std::vector<float> out(static_cast<size_t>(t.numel()));
        if (reach::dtype_is_compute(t.dtype)) reach::convert_to_f32(t, out.data());
      }
      ++opened;
    } catch (const reach::Error& e) {
      ++rejected;
      if (std::string(e.what()).find(p.string()) == std::string::npos)
        FAIL_CHECK("message lacks the file name: " << e.what());
    }
  }
  CHECK(opened + rejected == 3000);
  CHECK(rejected > 0);
}

TEST_CASE("safetensors: missing file is an io error naming it") {
  TempDir dir;
  const fs::path p = dir / "nope.safetensors";
  auto msg = error_of([&] { reach::SafeTensorsFile::open(p); }, ErrorCode::io);
  CHECK_HAS(msg, p.string());
  msg = error_of([&] { reach::SafeTensorsFile::open(dir.path); }, ErrorCode::io);
  CHECK_HAS(msg, "directory");
}

TEST_CASE("safetensors: convert_to_f32 refuses non-float dtypes") {
  TempDir dir;
  const fs::path p = dir / "int.safetensors";
  reach::write_safetensors(p, {{"ids", DType::I32, {2}, bytes_of(std::vector<int32_t>{1, 2})}});
  auto f = reach::SafeTensorsFile::open(p);
  float out[2];
  auto msg = error_of([&] { reach::convert_to_f32(*f.find("ids"), out); }, ErrorCode::unsupported);
  CHECK_HAS(msg, "ids");
  CHECK_HAS(msg, "I32");
  CHECK_HAS(msg, p.string());
}

TEST_CASE("safetensors: writer rejects bytes that do not match the shape") {
  TempDir dir;
  auto msg = error_of(
      [&] { reach::write_safetensors(dir / "w.safetensors", {{"w", DType::F16, {3}, std::vector<std::byte>(4)}}); },
      ErrorCode::invalid_argument);
  CHECK_HAS(msg, "'w'");
}

TEST_CASE("model weights: single file, get() and missing tensor") {
  TempDir dir;
  reach::write_safetensors(dir / "model.safetensors",
                           {{"model.embed_tokens.weight", DType::F32, {4, 2}, std::vector<std::byte>(32)},
                            {"model.norm.weight", DType::F32, {2}, std::vector<std::byte>(8)},
                            {"lm_head.weight", DType::F32, {4, 2}, std::vector<std::byte>(32)}});
  auto w = reach::ModelWeights::open_dir(dir.path);
  CHECK(w.size() == 3);
  CHECK(w.total_bytes() == 72);
  CHECK(w.names() == std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"});
  CHECK(w.get("model.norm.weight").nbytes == 8);
  CHECK(w.find("nope") == nullptr);

  auto msg = error_of([&] { w.get("model.nrom.weight"); }, ErrorCode::format);
  CHECK_HAS(msg, "model.nrom.weight");
  CHECK_HAS(msg, dir.path.string());
  CHECK_HAS(msg, "model.norm.weight");   // suggested as a close name

  // A path to the file itself works too.
  auto w2 = reach::ModelWeights::open_dir(dir / "model.safetensors");
  CHECK(w2.size() == 3);
}

TEST_CASE("model weights: get() with the wrong shape") {
  TempDir dir;
  reach::write_safetensors(dir / "model.safetensors",
                           {{"model.embed_tokens.weight", DType::F32, {4, 2}, std::vector<std::byte>(32)}});
  auto w = reach::ModelWeights::open_dir(dir.path);
  CHECK(w.get("model.embed_tokens.weight", {4, 2}).numel() == 8);
  auto msg = error_of([&] { w.get("model.embed_tokens.weight", {5, 2}, "config.json says vocab_size=5"); },
                      ErrorCode::format);
  CHECK_HAS(msg, "model.embed_tokens.weight");
  CHECK_HAS(msg, "model.safetensors");
  CHECK_HAS(msg, "[4, 2]");
  CHECK_HAS(msg, "[5, 2]");
  CHECK_HAS(msg, "vocab_size=5");
}

TEST_CASE("model weights: directory without weights") {
  TempDir dir;
  auto msg = error_of([&] { reach::ModelWeights::open_dir(dir.path); }, ErrorCode::io);
  CHECK_HAS(msg, dir.path.string());
  CHECK_HAS(msg, "model.safetensors");
  msg = error_of([&] { reach::ModelWeights::open_dir(dir / "absent"); }, ErrorCode::io);
  CHECK_HAS(msg, "absent");
}

namespace {
void write_index(const fs::path& p, const std::string& weight_map) {
  std::ofstream(p) << R"({"metadata":{"total_size":0},"weight_map":)" << weight_map << "}";
}
}  // namespace

TEST_CASE("model weights: sharded OK") {
  TempDir dir;
  std::vector<float> a = {1, 2}, b = {3, 4, 5};
  reach::write_safetensors(dir / "model-00001-of-00002.safetensors", {{"a", DType::F32, {2}, bytes_of(a)}});
  reach::write_safetensors(dir / "model-00002-of-00002.safetensors",
                           {{"b", DType::F32, {3}, bytes_of(b)}, {"extra", DType::F32, {0}, {}}});
  write_index(dir / "model.safetensors.index.json",
              R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"})");
  auto w = reach::ModelWeights::open_dir(dir.path);
  CHECK(w.files().size() == 2);
  CHECK(w.size() == 2);   // only what weight_map lists
  CHECK(to_f32(w.get("a")) == a);
  CHECK(to_f32(w.get("b")) == b);
  CHECK(w.get("b").file.filename() == "model-00002-of-00002.safetensors");
  CHECK(w.total_bytes() == 20);
  // Moving the weights keeps the tensors readable.
  reach::ModelWeights moved = std::move(w);
  CHECK(to_f32(moved.get("b")) == b);
}

TEST_CASE("model weights: sharded index points at a missing shard") {
  TempDir dir;
  reach::write_safetensors(dir / "model-00001-of-00002.safetensors", {{"a", DType::F32, {1}, bytes_of(std::vector<float>{1})}});
  write_index(dir / "model.safetensors.index.json",
              R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"})");
  auto msg = error_of([&] { reach::ModelWeights::open_dir(dir.path); }, ErrorCode::io);
  CHECK_HAS(msg, "model-00002-of-00002.safetensors");
  CHECK_HAS(msg, "'b'");
}

TEST_CASE("model weights: sharded tensor absent from its shard") {
  TempDir dir;
  reach::write_safetensors(dir / "s1.safetensors", {{"a", DType::F32, {1}, bytes_of(std::vector<float>{1})}});
  write_index(dir / "model.safetensors.index.json", R"({"a":"s1.safetensors","zzz":"s1.safetensors"})");
  auto msg = error_of([&] { reach::ModelWeights::open_dir(dir.path); }, ErrorCode::format);
  CHECK_HAS(msg, "zzz");
  CHECK_HAS(msg, "s1.safetensors");
}

TEST_CASE("model weights: sharded index that is malformed or escapes the directory") {
  TempDir dir;
  std::ofstream(dir / "model.safetensors.index.json") << "{not json";
  auto msg = error_of([&] { reach::ModelWeights::open_dir(dir.path); }, ErrorCode::format);
  CHECK_HAS(msg, "model.safetensors.index.json");
  write_index(dir / "model.safetensors.index.json", R"({"a":"../../etc/passwd"})");
  msg = error_of([&] { reach::ModelWeights::open_dir(dir.path); }, ErrorCode::format);
  CHECK_HAS(msg, "'a'");
  std::ofstream(dir / "model.safetensors.index.json") << R"({"metadata":{}})";
  msg = error_of([&] { reach::ModelWeights::open_dir(dir.path); }, ErrorCode::format);
  CHECK_HAS(msg, "weight_map");
}
