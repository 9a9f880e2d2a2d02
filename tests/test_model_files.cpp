// Bad model directories: each gives one clear error naming the file / tensor /
// key at fault, and the process carries on.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "runtime/model/model.hpp"
#include "tests/support/files.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;
namespace fs = std::filesystem;

namespace {

fs::path copy_model(const std::string& name) {
  auto src = tiny_model("--dtype f32 --hidden 32 --intermediate 64 --layers 1 --heads 2 --kv-heads 1 --vocab 270");
  auto dst = temp_dir("bad-" + name);
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

std::string load_error(const fs::path& dir) {
  try {
    load_model(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& f) {
  nlohmann::json j;
  {
    std::ifstream in(dir / "config.json");
    in >> j;
  }
  f(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

}  // namespace

TEST_CASE("model dir: no tokenizer.json") {
  auto dir = copy_model("notok");
  fs::remove(dir / "tokenizer.json");
  auto msg = load_error(dir);
  CHECK(msg.find("tokenizer.json") != std::string::npos);
}

TEST_CASE("model dir: config missing a key") {
  auto dir = copy_model("nokey");
  edit_config(dir, [](nlohmann::json& j) { j.erase("hidden_size"); });
  auto msg = load_error(dir);
  CHECK(msg.find("hidden_size") != std::string::npos);
}

TEST_CASE("model dir: missing tensor names the tensor") {
  auto dir = copy_model("notensor");
  edit_config(dir, [](nlohmann::json& j) { j["num_hidden_layers"] = 2; });
  auto msg = load_error(dir);
  CHECK(msg.find("model.layers.1.") != std::string::npos);
}

TEST_CASE("model dir: wrong shape names the tensor and the config value") {
  auto dir = copy_model("shape");
  edit_config(dir, [](nlohmann::json& j) { j["intermediate_size"] = 96; });
  auto msg = load_error(dir);
  CHECK(msg.find("mlp") != std::string::npos);
  CHECK(msg.find("intermediate_size=96") != std::string::npos);
}

TEST_CASE("model dir: truncated safetensors") {
  auto dir = copy_model("trunc");
  const auto size = fs::file_size(dir / "model.safetensors");
  fs::resize_file(dir / "model.safetensors", size / 2);
  auto msg = load_error(dir);
  CHECK(msg.find("model.safetensors") != std::string::npos);
}

TEST_CASE("model dir: not a directory") {
  auto msg = load_error("/nonexistent/reach-model");
  CHECK(msg.find("/nonexistent/reach-model") != std::string::npos);
}
