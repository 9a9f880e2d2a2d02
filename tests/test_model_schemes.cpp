// End-to-end logits of every position scheme on a tiny model against the
// independent float64 NumPy reference, which reads the same CLI flags.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include "runtime/config/position_schemes.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/data.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;

namespace {

// Short trained context so every scheme is exercised past it.
const char* kModel = "--dtype f32 --hidden 64 --intermediate 128 --layers 2 --heads 4 --kv-heads 2 --vocab 300 "
                     "--max-pos 64 --seed 11";

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

void check_scheme(Model& model, const std::filesystem::path& dir, const std::string& flags, uint32_t n, uint32_t chunk) {
  INFO("scheme flags: " << flags << ", tokens " << n << ", chunk " << chunk);
  auto ids = random_ids(n, 300, n * 7 + uint32_t(flags.size()));
  auto ref = reference_forward(dir, ids, 0, flags);
  SessionOptions o;
  o.context = n;
  o.chunk = chunk;
  o.l_test = n;   // dynamic: the reference's L_test is the number of ids
  auto args = split_words(flags);
  for (size_t i = 0; i < args.size(); ++i) REQUIRE(parse_scheme_flag(args, i, o.overrides));
  std::vector<float> got;
  {
    Session s(model, o);
    s.prefill(ids, &got);
  }
  REQUIRE(got.size() == ref.logits.size());
  for (size_t r = 0; r < n; ++r) {
    float scale = 0, err = 0;
    for (size_t v = 0; v < 300; ++v) {
      scale = std::max(scale, std::fabs(ref.logits[r * 300 + v]));
      err = std::max(err, std::fabs(got[r * 300 + v] - ref.logits[r * 300 + v]));
    }
    INFO("row " << r << ": max|err| " << err << " vs tolerance 1e-3 x " << scale);
    REQUIRE(err <= 1e-3f * scale);
  }
  // Decode after the prompt (all but the last token) equals the last row.
  Session s(model, o);
  s.prefill(std::span<const int32_t>(ids.data(), n - 1));
  s.decode(ids[n - 1]);
  float scale = 0, err = 0;
  for (size_t v = 0; v < 300; ++v) {
    scale = std::max(scale, std::fabs(ref.logits[(n - 1) * 300 + v]));
    err = std::max(err, std::fabs(s.logits()[v] - ref.logits[(n - 1) * 300 + v]));
  }
  INFO("decode step: max|err| " << err);
  REQUIRE(err <= 1e-3f * scale);
}

}  // namespace

TEST_CASE("schemes end to end: frequency rescaling (linear, ntk, dynamic, yarn)") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  check_scheme(*model, dir, "--rope-scaling linear --rope-factor 2", 150, 64);
  check_scheme(*model, dir, "--rope-scaling ntk --rope-factor 4", 150, 37);
  check_scheme(*model, dir, "--rope-scaling dynamic --rope-factor 2", 150, 64);
  check_scheme(*model, dir, "--rope-scaling yarn --rope-factor 4 --original-ctx 64", 200, 64);
}

TEST_CASE("schemes end to end: ReRoPE, Leaky ReRoPE, Self-Extend (dual branch)") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  check_scheme(*model, dir, "--rerope-window 16", 160, 64);
  check_scheme(*model, dir, "--rerope-window 33 --logn 64", 160, 29);
  check_scheme(*model, dir, "--rerope-window 16 --leaky-k 4", 160, 64);
  check_scheme(*model, dir, "--self-extend-group 4 --self-extend-window 16", 160, 50);
}

TEST_CASE("schemes end to end: log-n, KeyNorm / QueryNorm / CosA, window + sinks") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  check_scheme(*model, dir, "--logn 64", 130, 64);
  check_scheme(*model, dir, "--qk-norm key", 100, 64);
  check_scheme(*model, dir, "--qk-norm query", 100, 64);
  check_scheme(*model, dir, "--qk-norm cos", 100, 64);
  check_scheme(*model, dir, "--qk-norm cos --cos-n 64", 100, 64);
  check_scheme(*model, dir, "--attn-window 24 --attn-sinks 4", 130, 40);
}

TEST_CASE("schemes end to end: per-layer HWFA layout from config.json") {
  auto dir = tiny_model(std::string(kModel) +
                        " --reach-attention '{\"logn_train_len\": 64, \"layers\": {\"0\": {\"window\": 16, "
                        "\"logn\": false}, \"1\": {\"rope\": false, \"logn\": true}}}'");
  auto model = load_model(dir);
  check_scheme(*model, dir, "", 150, 64);
}
