// Embeddings (runtime/session/embedding.hpp, runtime/config/pooling.hpp): the final-normed hidden states
// of a tiny Qwen3-Embedding-shaped model (tests/data/embedding, tools/embedding_fixture.py) against
// transformers' float64 forward, its last-token embeddings against the float64 ones and
// sentence-transformers', mean and CLS pooling of the same states, inputs in several chunks and one
// after another, and the pooling read from sentence-transformers' files.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "runtime/session/embedding.hpp"
#include "tests/support/files.hpp"
#include "tests/support/gguf_writer.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using nlohmann::json;
using reach::test::read_text;
using reach::test::source_root;
using reach::test::TempDir;

namespace {

const std::filesystem::path kFixture = source_root() / "tests/data/embedding";

const json& reference() {
  static const json j = json::parse(read_text(kFixture / "reference.json"));
  return j;
}

double cosine(const std::vector<float>& a, const json& b) {
  REQUIRE(a.size() == b.size());
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double y = b[i].get<double>();
    ab += a[i] * y, aa += double(a[i]) * a[i], bb += y * y;
  }
  return ab / std::sqrt(aa * bb);
}

double norm(const std::vector<float>& a) {
  double s = 0;
  for (float x : a) s += double(x) * x;
  return std::sqrt(s);
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("embedding: the fixture's pooling is read from its sentence-transformers modules") {
  const PoolingSpec p = pooling_of_folder(kFixture);
  CHECK(p.pooling == Pooling::last);
  CHECK(p.normalize);
  TempDir dir("pooling");
  CHECK(pooling_of_folder(dir.path).pooling == Pooling::none);   // no modules.json: not an embedding model
  // The pre-v6 form: sentence_transformers.models.* and one boolean per mode; no Normalize module.
  write(dir / "modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  write(dir / "1_Pooling/config.json", R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": false,
    "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false, "pooling_mode_lasttoken": false})");
  PoolingSpec mean = pooling_of_folder(dir.path);
  CHECK(mean.pooling == Pooling::mean);
  CHECK_FALSE(mean.normalize);
  write(dir / "1_Pooling/config.json", R"({"pooling_mode": "cls"})");
  CHECK(pooling_of_folder(dir.path).pooling == Pooling::cls);
  write(dir / "1_Pooling/config.json", R"({"pooling_mode_max_tokens": true})");
  CHECK_THROWS_WITH_AS(pooling_of_folder(dir.path), doctest::Contains("pooling_mode_max_tokens"), Error);
  write(dir / "1_Pooling/config.json", R"({"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true})");
  CHECK_THROWS_WITH_AS(pooling_of_folder(dir.path), doctest::Contains("2 pooling modes"), Error);
  write(dir / "modules.json", "[1, 2");
  CHECK_THROWS_WITH_AS(pooling_of_folder(dir.path), doctest::Contains("modules.json"), Error);
  CHECK(pooling_from_name("last") == Pooling::last);
  CHECK_THROWS_AS(pooling_from_name("max"), Error);
}

TEST_CASE("embedding: a GGUF's pooling_type (llama.cpp's numbering), normalized") {
  TempDir dir("pooling_gguf");
  auto pooling = [&](std::optional<int32_t> type) {
    test::GgufBuilder b;
    b.kv_string("general.architecture", "qwen3");
    if (type) b.kv_i32("qwen3.pooling_type", *type);
    b.write(dir / "m.gguf");
    return pooling_of_gguf(GgufFile::open(dir / "m.gguf"));
  };
  CHECK(pooling(std::nullopt).pooling == Pooling::none);
  CHECK(pooling(0).pooling == Pooling::none);
  CHECK(pooling(1).pooling == Pooling::mean);
  CHECK(pooling(2).pooling == Pooling::cls);
  const PoolingSpec last = pooling(3);
  CHECK(last.pooling == Pooling::last);
  CHECK(last.normalize);
  CHECK_THROWS_WITH_AS(pooling(4), doctest::Contains("qwen3.pooling_type = 4"), Error);   // rank
}

TEST_CASE("embedding: hidden states and last-token embeddings match transformers' float64 forward") {
  auto model = test::load_model(kFixture);
  CHECK(is_embedding_model(*model));
  const PoolingSpec spec = model_pooling(*model);
  REQUIRE(spec.pooling == Pooling::last);
  Embedder e(*model, spec);
  REQUIRE(e.dims() == reference()["dims"].get<size_t>());
  for (const json& in : reference()["inputs"]) {
    const std::string text = in["text"].get<std::string>();
    CAPTURE(text);
    const std::vector<int32_t> ids = in["ids"].get<std::vector<int32_t>>();
    CHECK(model->tokenizer()->encode(text, true) == ids);   // the server embeds text through reach's tokenizer
    const std::vector<float> v = e.embed(ids);
    const double c = cosine(v, in["embedding"]);
    CHECK(c >= 0.9999);
    CHECK(std::abs(norm(v) - 1.0) < 1e-5);
    // Every token's hidden state, and the other poolings of the same states.
    const json& h = in["hidden"];
    REQUIRE(e.last_hidden().size() == h.size() * e.dims());
    double worst = 0;
    for (size_t t = 0; t < h.size(); ++t)
      for (size_t i = 0; i < e.dims(); ++i)
        worst = std::max(worst, std::abs(e.last_hidden()[t * e.dims() + i] - h[t][i].get<double>()));
    MESSAGE(text << ": 1 - cosine to the float64 embedding " << 1 - c << ", largest hidden-state error " << worst);
    CHECK(worst < 1e-4);   // O(1) values (RMS-normed), f32 arithmetic over the same f16 weights: ~2e-6 measured
    CHECK(cosine(pool_hidden(e.last_hidden(), ids.size(), e.dims(), {Pooling::mean, true}), in["mean_normalized"]) >= 0.9999);
    CHECK(cosine(pool_hidden(e.last_hidden(), ids.size(), e.dims(), {Pooling::cls, true}), in["cls_normalized"]) >= 0.9999);
  }
}

TEST_CASE("embedding: inputs one after another, or in several prefill chunks, give the same vectors") {
  auto model = test::load_model(kFixture);
  const PoolingSpec spec = model_pooling(*model);
  Embedder batch(*model, spec), chunked(*model, spec, 0, 8);
  std::vector<std::vector<float>> all;
  for (const json& in : reference()["inputs"]) all.push_back(batch.embed(in["ids"].get<std::vector<int32_t>>()));
  size_t i = 0;
  for (const json& in : reference()["inputs"]) {
    const std::vector<int32_t> ids = in["ids"].get<std::vector<int32_t>>();
    Embedder alone(*model, spec);
    CHECK(alone.embed(ids) == all[i]);   // nothing of an earlier input stays
    const std::vector<float> c = chunked.embed(ids);
    CHECK(cosine(c, in["embedding"]) >= 0.9999);   // a chunk attends to the earlier chunks' keys
    ++i;
  }
}

TEST_CASE("embedding: pooling and the inputs it refuses") {
  const std::vector<float> rows = {3, 4, 0, 0, 0, 2};   // 3 tokens of 2
  CHECK(pool_hidden(rows, 3, 2, {Pooling::mean, false}) == std::vector<float>{1, 2});
  CHECK(pool_hidden(rows, 3, 2, {Pooling::cls, true}) == std::vector<float>{0.6f, 0.8f});
  CHECK(pool_hidden(rows, 3, 2, {Pooling::last, true}) == std::vector<float>{0, 1});
  CHECK_THROWS_AS(pool_hidden(rows, 0, 2, {Pooling::mean, false}), Error);
  auto model = test::load_model(kFixture);
  Embedder e(*model, model_pooling(*model), 16);
  CHECK_THROWS_AS(e.embed(std::vector<int32_t>{}), Error);
  CHECK_THROWS_AS(e.embed(std::vector<int32_t>{1, 384}), Error);
  CHECK_THROWS_AS(e.embed(std::vector<int32_t>(17, 5)), Error);
  CHECK(e.embed(std::vector<int32_t>(16, 5)).size() == e.dims());   // still usable
}

TEST_CASE("embedding: a bare base model without a head loads even where its config says untied") {
  // Qwen3-Embedding-8B's kind: tie_word_embeddings false, and sentence-transformers saves no lm_head.
  TempDir dir("untied");
  std::filesystem::copy(kFixture, dir.path, std::filesystem::copy_options::recursive);
  json cfg = json::parse(read_text(dir / "config.json"));
  cfg["tie_word_embeddings"] = false;
  std::ofstream(dir / "config.json") << cfg.dump();
  auto model = test::load_model(dir.path);
  Embedder e(*model, model_pooling(*model));
  const json& in = reference()["inputs"][0];
  CHECK(cosine(e.embed(in["ids"].get<std::vector<int32_t>>()), in["embedding"]) >= 0.9999);
}
