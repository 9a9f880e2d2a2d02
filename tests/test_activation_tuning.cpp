// The tuning file of `reach tune` (runtime/session/activation_tuning.hpp): entries round-trip and replace one
// another by key, a broken file is named in the error and never stops a session (which then runs exact), and a
// session asked for the device's default runs each phase as the file says: its logits are then those of a
// session asked for that choice explicitly, and differ from the other choice's.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/platform/process.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/activation_tuning.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"

using namespace reach;
using namespace reach::test;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("reach-tuning-test-" + std::to_string(reach::platform::process_id()));
  fs::create_directories(d);
  return d / name;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// A device whose settings name `file` as its tuning file (as REACH_TUNING_FILE does for the CLI's; "": none),
// and the test model on it, its float weights quantized to `quantize`.
struct TunedModel {
  std::unique_ptr<Device> device;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<Model> model;
  TunedModel(const fs::path& file, WType quantize) {
    DeviceOptions opt;
    opt.settings.tuning_file = file.string();
    opt.validation = validation_wanted();
    opt.on_validation = on_validation_message;
    device = Device::create(opt);
    allocator = std::make_unique<Allocator>(*device);
    LoadOptions lo;
    lo.require_tokenizer = false;
    lo.quantize = quantize;
    model = Model::load(*device, *allocator, source_root() / "tests/data/families/qwen2/hf", lo);
  }
};

}  // namespace

TEST_CASE("tuning file: entries round-trip, a second save keeps the other keys and replaces its own") {
  const fs::path f = temp_file("roundtrip.json");
  fs::remove(f);
  CHECK(!load_tuning(f, "a"));   // no file: nothing tuned
  TunedEntry a;
  a.choice = {QuantActivations::int8, QuantActivations::exact};
  a.prefill = {50.0, 60.0};
  a.decode = {20.0, 18.0};
  a.when = "2026-11-27";
  save_tuning(f, "a", a);
  TunedEntry b;
  b.choice = {QuantActivations::exact, QuantActivations::int8};
  save_tuning(f, "b", b);
  const auto la = load_tuning(f, "a"), lb = load_tuning(f, "b");
  REQUIRE(la);
  REQUIRE(lb);
  CHECK(la->choice.prefill == QuantActivations::int8);
  CHECK(la->choice.decode == QuantActivations::exact);
  CHECK(la->prefill.int8 == 60.0);
  CHECK(la->decode.exact == 20.0);
  CHECK(la->when == "2026-11-27");
  CHECK(lb->choice.decode == QuantActivations::int8);
  a.choice.decode = QuantActivations::int8;
  save_tuning(f, "a", a);
  CHECK(load_tuning(f, "a")->choice.decode == QuantActivations::int8);
  CHECK(load_tuning(f, "b")->choice.prefill == QuantActivations::exact);
  CHECK(!load_tuning(f, "c"));
}

TEST_CASE("tuning file: a broken file is an error naming it, and a session then runs exact") {
  const fs::path f = temp_file("broken.json");
  for (const std::string text : {std::string("{not json"), std::string("[1, 2]"),
                                  std::string(R"({"version": 9, "entries": {}})"),
                                  std::string(R"({"version": 1, "entries": {"k": {"prefill": "int4", "decode": "exact"}}})")}) {
    write(f, text);
    CAPTURE(text);
    try {
      load_tuning(f, "k");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::format);
      CHECK(std::string(e.what()).find(f.string()) != std::string::npos);
      CHECK(std::string(e.what()).find("reach tune") != std::string::npos);
    }
  }
  write(f, "{not json");
  TunedModel t(f, WType::q8_0);
  const Model& model = *t.model;
  std::string source;
  const PhaseActivations p = resolve_activations(model, QuantActivations::device, &source);
  CHECK(p.prefill == QuantActivations::exact);
  CHECK(p.decode == QuantActivations::exact);
  CHECK(source.find(f.string()) != std::string::npos);
  // An explicit choice never reads the file.
  CHECK(resolve_activations(model, QuantActivations::exact).decode == QuantActivations::exact);
}

TEST_CASE("tuning file: a device whose settings name none runs exact and reads no file") {
  TunedModel t("", WType::q8_0);
  std::string source;
  const PhaseActivations p = resolve_activations(*t.model, QuantActivations::device, &source);
  CHECK(p.prefill == QuantActivations::exact);
  CHECK(p.decode == QuantActivations::exact);
  CHECK(source.find("no tuning file") != std::string::npos);
}

TEST_CASE("tuning file: a session asked for the device's default runs each phase as the file says") {
  if (!gpu().device->caps().integer_dot) {
    MESSAGE("the device has no integer dot product: int8 activations cannot run here");
    return;
  }
  const fs::path f = temp_file("session.json");
  fs::remove(f);
  TunedModel tm(f, WType::q4_0);
  const std::unique_ptr<Model>& model = tm.model;
  const int64_t V = model->config().vocab_size;
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(int32_t((i * 37 + 11) % V));
  // Prefill logits (16 tokens) and three decode steps' logits.
  auto run = [&](QuantActivations a) {
    SessionOptions so;
    so.context = 32;
    so.chunk = 8;
    so.activations = a;
    Session s(*model, so);
    s.prefill(std::span(ids).first(16));
    std::vector<std::vector<float>> out{{s.logits().begin(), s.logits().end()}};
    for (size_t t = 16; t < 19; ++t) {
      s.decode(ids[t]);
      out.emplace_back(s.logits().begin(), s.logits().end());
    }
    return std::pair{out, s.activations()};
  };
  const auto [exact, pe] = run(QuantActivations::exact);
  const auto [int8, pi] = run(QuantActivations::int8);
  CHECK(pe.prefill == QuantActivations::exact);
  CHECK(pi.decode == QuantActivations::int8);
  REQUIRE(exact[0] != int8[0]);   // the two choices are distinguishable at all
  REQUIRE(exact[1] != int8[1]);

  TunedEntry t;
  t.choice = {QuantActivations::int8, QuantActivations::exact};
  save_tuning(f, tuning_key(*model), t);
  const auto [tuned, pt] = run(QuantActivations::device);
  CHECK(pt.prefill == QuantActivations::int8);
  CHECK(pt.decode == QuantActivations::exact);
  CHECK(tuned[0] == int8[0]);   // prefill ran int8, bit for bit
  // Decode ran exact over the int8 prefill's cache: its first step differs from the all-int8 run, and the
  // all-exact run's too (its cache was written exact).
  CHECK(tuned[1] != int8[1]);
  CHECK(tuned[1] != exact[1]);

  // A new measurement of the same key replaces the choice.
  t.choice = {QuantActivations::exact, QuantActivations::int8};
  save_tuning(f, tuning_key(*model), t);
  const auto [tuned2, pt2] = run(QuantActivations::device);
  CHECK(pt2.decode == QuantActivations::int8);
  CHECK(tuned2[0] == exact[0]);
}
