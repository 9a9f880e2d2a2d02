#include "tests/support/model_fixture.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"

namespace reach::test {

namespace fs = std::filesystem;

std::unique_ptr<Model> load_model(const fs::path& dir) {
  Gpu& g = gpu();
  LoadOptions lo;
  return Model::load(*g.device, *g.allocator, dir, lo);
}

fs::path tiny_model(const std::string& args) {
  static std::map<std::string, fs::path> made;
  if (auto it = made.find(args); it != made.end()) return it->second;
  // A Windows build under Wine cannot start the machine's Python: tools/wine_check.sh makes the
  // default tiny model with it beforehand and names the folder here.
  if (const char* pre = std::getenv("REACH_TEST_TINY_MODEL"); pre && *pre && args.empty()) return made[args] = pre;
  fs::path dir = temp_dir("model" + std::to_string(made.size()));
  run_command(reach::test::python() + " " + (source_root() / "tools/make_tiny_model.py").string() + " " + dir.string() + " " +
              args);
  made[args] = dir;
  return dir;
}

Reference reference_forward(const fs::path& model, const std::vector<int32_t>& ids, int n_generate,
                            const std::string& extra_args) {
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  static int counter = 0;
  const fs::path out = temp_dir("ref") / ("logits" + std::to_string(counter++) + ".bin");
  std::string cmd = reach::test::python() + " " + (source_root() / "tools/reference_forward.py").string() + " " +
                    model.string() + " --ids " + list + " --json --logits-out " + out.string() + " " + extra_args;
  if (n_generate) cmd += " --generate " + std::to_string(n_generate);
  const std::string text = run_command(cmd);
  const auto j = nlohmann::json::parse(text.substr(text.find('{')));
  Reference r;
  r.rows = j.at("rows").get<size_t>();
  r.vocab = j.at("vocab").get<size_t>();
  if (j.contains("generated")) r.generated = j.at("generated").get<std::vector<int32_t>>();
  if (j.contains("generated_margins")) r.margins = j.at("generated_margins").get<std::vector<double>>();
  r.logits.resize(r.rows * r.vocab);
  std::ifstream f(out, std::ios::binary);
  f.read(reinterpret_cast<char*>(r.logits.data()), std::streamsize(r.logits.size() * 4));
  REQUIRE_MESSAGE(f.gcount() == std::streamsize(r.logits.size() * 4), "short logits file " << out);
  return r;
}

double max_err_rel(std::span<const float> got, std::span<const float> want) {
  float scale = 0;
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, double(std::fabs(got[i] - want[i])));
  }
  return err / std::max(scale, 1e-30f);
}

}  // namespace reach::test
