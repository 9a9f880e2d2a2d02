// The GGUF writer (runtime/gguf_write.hpp) and `reach quantize`
// (runtime/quantize_model.hpp, cli/cmd_quantize.cpp): files read back by
// reach's GgufFile and by gguf.GGUFReader (tests/python/quant_ref.py dump).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/error.hpp"
#include "runtime/gguf.hpp"
#include "runtime/gguf_config.hpp"
#include "runtime/gguf_write.hpp"
#include "runtime/model_config.hpp"
#include "runtime/quantize.hpp"
#include "runtime/quantize_model.hpp"
#include "runtime/safetensors.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/model_fixture.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace reach;
using reach::test::error_of;
using reach::test::source_root;
using reach::test::TempDir;

namespace {

std::vector<uint8_t> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> file_f32(const fs::path& p) {
  const std::vector<uint8_t> b = file_bytes(p);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// gguf.GGUFReader's view of `gguf` in `out` (meta.json, i.bin, i.f32); false after a SKIP message.
bool py_dump(const fs::path& gguf, const fs::path& out, const std::string& extra = "") {
  fs::create_directories(out);
  const std::string cmd = "python3 " + (source_root() / "tests/python/quant_ref.py").string() + " dump " +
                          gguf.string() + " " + out.string() + extra;
  const int rc = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(rc));
  if (WEXITSTATUS(rc) == 3) {
    MESSAGE("SKIP: python3 cannot import gguf/numpy (tools/get_smollm2.sh installs them)");
    return false;
  }
  REQUIRE_MESSAGE(WEXITSTATUS(rc) == 0, "command failed: " << cmd);
  return true;
}

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = std::byte(rng() & 0xff);
  return v;
}

std::vector<std::byte> as_bytes(const std::vector<uint16_t>& v) {
  std::vector<std::byte> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

bool no_temp_files(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

}  // namespace

TEST_CASE("gguf writer: every metadata type and tensor type, read by GgufFile and gguf.GGUFReader alike") {
  TempDir dir("gguf_write");
  GgufWriter w;
  w.put_string("general.architecture", "llama");
  w.put_u32("general.alignment", 64);
  w.put_u32("a.u32", 1);
  w.put_string("a.str", "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  w.put_string("a.empty", "");
  w.put_i32("a.i32", -2000000000);
  w.put_f32("a.f32", 0.1f);
  w.put_bool("a.true", true);
  w.put_bool("a.false", false);
  w.put_string_array("a.strs", {"x", "", "\xc4\xa0the", std::string(300, 'y')});
  w.put_i32_array("a.i32s", {3, -1, 2147483647});
  w.put_f32_array("a.f32s", {0.5f, -2.f, 1e-7f});
  w.put_i32_array("a.none", {});
  w.put_u32("a.u32", 4000000000u);   // again: keeps its place, takes the new value

  struct T {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<T> ts;
  std::vector<float> f32 = {1.5f, -2.f, 3.25f, 0.f, 1e-30f, 7.f, -8.f, 9.f, 10.f, 11.f, 12.f, 13.f, 14.f, 15.f, 16.f};
  std::vector<std::byte> fb(f32.size() * 4);
  std::memcpy(fb.data(), f32.data(), fb.size());
  ts.push_back({"f32", GgmlType::f32, {3, 5}, fb});
  ts.push_back({"f16", GgmlType::f16, {7}, as_bytes({0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3555, 0x1234})});
  ts.push_back({"bf16", GgmlType::bf16, {2, 1, 2, 2}, as_bytes({0x3f80, 0xc000, 0x4049, 0x0000, 1, 2, 3, 4})});
  std::vector<float> m(3 * 64);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(float(i));
  for (auto [t, rows, cols] : {std::tuple{WType::q8_0, 3u, 64u}, std::tuple{WType::q4_0, 3u, 64u},
                               std::tuple{WType::q4_k, 1u, 256u}}) {
    std::vector<float> src(size_t(rows) * cols);
    for (size_t i = 0; i < src.size(); ++i) src[i] = std::cos(float(i) * 0.37f);
    std::vector<std::byte> q(rows * wtype_row_bytes(t, cols));
    quantize_matrix(t, src.data(), rows, cols, q.data());
    ts.push_back({std::string("blk.0.") + wtype_name(t) + ".weight", ggml_type_of(t), {rows, cols}, q});
  }
  uint32_t seed = 1;
  for (auto [t, shape] : {std::pair{GgmlType::q4_1, std::vector<int64_t>{2, 96}},
                          std::pair{GgmlType::q5_0, std::vector<int64_t>{2, 3, 32}},
                          std::pair{GgmlType::q5_1, std::vector<int64_t>{64}},
                          std::pair{GgmlType::q5_k, std::vector<int64_t>{512}},
                          std::pair{GgmlType::q6_k, std::vector<int64_t>{3, 1, 256}}}) {
    ts.push_back({std::string("raw.") + ggml_type_traits(t).name, t, shape,
                  random_bytes(GgufWriter::tensor_bytes(t, shape), seed++)});
  }
  for (const T& t : ts) w.add_tensor(t.name, t.type, t.shape, t.bytes);
  const std::vector<std::byte> produced = random_bytes(32 * 18, 99);
  w.add_tensor("produced", GgmlType::q4_0, {1, 1024}, [&](std::byte* out) {
    std::memcpy(out, produced.data(), produced.size());
  });
  ts.push_back({"produced", GgmlType::q4_0, {1, 1024}, produced});

  const fs::path p = dir / "all.gguf";
  uint64_t last = 0, total = 0;
  w.write(p, [&](uint64_t d, uint64_t t) { last = d, total = t; return true; });
  CHECK(last == total);
  CHECK(total == w.data_bytes());
  CHECK(no_temp_files(dir.path));

  GgufFile f = GgufFile::open(p);
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  const std::vector<std::string> keys = {"general.architecture", "general.alignment", "a.u32", "a.str", "a.empty",
                                         "a.i32", "a.f32", "a.true", "a.false", "a.strs", "a.i32s", "a.f32s",
                                         "a.none"};
  CHECK(f.keys() == keys);
  CHECK(f.get_u32("a.u32") == 4000000000u);
  CHECK(f.get_string("a.str") == "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  CHECK(f.get_string("a.empty").empty());
  CHECK(f.get_i64("a.i32") == -2000000000);
  CHECK(f.find("a.i32")->type == GgufType::i32);
  CHECK(f.get_f64("a.f32") == double(0.1f));
  CHECK(f.get_bool("a.true"));
  CHECK_FALSE(f.get_bool("a.false"));
  const auto strs = f.get_string_array("a.strs");
  REQUIRE(strs.size() == 4);
  CHECK(strs[2] == "\xc4\xa0the");
  CHECK(strs[3] == std::string(300, 'y'));
  CHECK(f.get_int_array("a.i32s") == std::vector<int64_t>{3, -1, 2147483647});
  CHECK(f.get_f32_array("a.f32s") == std::vector<float>{0.5f, -2.f, 1e-7f});
  CHECK(f.array_size("a.none") == 0);
  REQUIRE(f.tensors().size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    INFO("tensor " << ts[i].name);
    CHECK(t.name == ts[i].name);
    CHECK(t.type == ts[i].type);
    CHECK(t.shape() == ts[i].shape);
    CHECK(t.offset % 64 == 0);
    REQUIRE(t.nbytes == ts[i].bytes.size());
    CHECK(std::memcmp(t.data, ts[i].bytes.data(), t.nbytes) == 0);
  }

  if (!py_dump(p, dir / "py")) return;
  const json meta = json::parse(reach::test::read_text(dir / "py" / "meta.json"));
  CHECK(meta["version"] == 3);
  CHECK(meta["alignment"] == 64);
  CHECK(meta["kv"].size() == keys.size());
  const json& kv = meta["kv"];
  CHECK(kv["a.u32"]["types"] == json{"UINT32"});
  CHECK(kv["a.u32"]["value"] == 4000000000u);
  CHECK(kv["a.str"]["value"] == "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  CHECK(kv["a.empty"]["value"] == "");
  CHECK(kv["a.i32"]["types"] == json{"INT32"});
  CHECK(kv["a.i32"]["value"] == -2000000000);
  CHECK(kv["a.f32"]["types"] == json{"FLOAT32"});
  CHECK(kv["a.f32"]["value"].get<double>() == double(0.1f));
  CHECK(kv["a.true"]["types"] == json{"BOOL"});
  CHECK(kv["a.true"]["value"] == true);
  CHECK(kv["a.false"]["value"] == false);
  CHECK(kv["a.strs"]["types"] == json{"ARRAY", "STRING"});
  CHECK(kv["a.strs"]["value"] == json{"x", "", "\xc4\xa0the", std::string(300, 'y')});
  CHECK(kv["a.i32s"]["types"] == json{"ARRAY", "INT32"});
  CHECK(kv["a.i32s"]["value"] == json{3, -1, 2147483647});
  CHECK(kv["a.f32s"]["types"] == json{"ARRAY", "FLOAT32"});
  CHECK(kv["a.f32s"]["value"] == json{double(0.5f), double(-2.f), double(1e-7f)});
  CHECK(kv["a.none"]["value"] == json::array());
  CHECK(kv["general.alignment"]["value"] == 64);
  REQUIRE(meta["tensors"].size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const json& e = meta["tensors"][i];
    INFO("tensor " << ts[i].name);
    CHECK(e["name"] == ts[i].name);
    CHECK(e["type"] == uint32_t(ts[i].type));
    CHECK(e["ne"].get<std::vector<int64_t>>() == f.tensors()[i].ne);
    const std::vector<uint8_t> b = file_bytes(dir / "py" / (std::to_string(i) + ".bin"));
    REQUIRE(b.size() == ts[i].bytes.size());
    CHECK(std::memcmp(b.data(), ts[i].bytes.data(), b.size()) == 0);
  }
}

TEST_CASE("gguf writer: bad tensors, unwritable paths and cancelling are clear errors, leaving no file") {
  TempDir dir("gguf_write_bad");
  GgufWriter w;
  w.put_string("general.architecture", "llama");
  CHECK_HAS(error_of([&] { w.add_tensor(std::string(65, 'n'), GgmlType::f32, {1}, random_bytes(4, 1)); },
                     ErrorCode::invalid_argument), "65 bytes");
  CHECK_HAS(error_of([&] { w.add_tensor("q", GgmlType::q8_0, {2, 48}, random_bytes(102, 1)); },
                     ErrorCode::invalid_argument), "not a multiple of Q8_0");
  CHECK_HAS(error_of([&] { w.add_tensor("z", GgmlType::f32, {0, 3}, std::vector<std::byte>{}); },
                     ErrorCode::invalid_argument), "'z'");
  CHECK_HAS(error_of([&] { w.add_tensor("five", GgmlType::f32, {1, 1, 1, 1, 1}, random_bytes(4, 1)); },
                     ErrorCode::invalid_argument), "5 dimensions");
  CHECK_HAS(error_of([&] { w.add_tensor("short", GgmlType::f16, {4}, random_bytes(6, 1)); },
                     ErrorCode::invalid_argument), "need 8");
  w.add_tensor("t", GgmlType::f32, {2}, random_bytes(8, 2));
  CHECK_HAS(error_of([&] { w.add_tensor("t", GgmlType::f32, {2}, random_bytes(8, 2)); },
                     ErrorCode::invalid_argument), "added twice");
  const fs::path missing = dir / "no_such_folder" / "x.gguf";
  CHECK_HAS(error_of([&] { w.write(missing); }, ErrorCode::io), missing.string());
  const fs::path p = dir / "x.gguf";
  CHECK_HAS(error_of([&] { w.write(p, [](uint64_t, uint64_t) { return false; }); }, ErrorCode::cancelled),
            p.string());
  CHECK_FALSE(fs::exists(p));
  CHECK(no_temp_files(dir.path));
  w.write(p);
  CHECK(GgufFile::open(p).tensors().size() == 1);
}
