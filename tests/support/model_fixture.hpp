#pragma once
// Tiny random models written by tools/make_tiny_model.py and logits from the
// independent NumPy reference tools/reference_forward.py (Debian's python3).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/model/model.hpp"

namespace reach::test {

// Loads the model in `dir` on the shared device (fixtures.hpp), without a progress line.
std::unique_ptr<Model> load_model(const std::filesystem::path& dir);

// Makes (once per process) a tiny model with these make_tiny_model.py args; returns its directory.
std::filesystem::path tiny_model(const std::string& args);

struct Reference {
  std::vector<float> logits;     // [rows, vocab]
  std::vector<int32_t> generated;
  std::vector<double> margins;   // best - second best logit at each generated step
  size_t rows = 0, vocab = 0;
};
// Largest |got - want| over a logits row, relative to the row's largest |want| (how the suites compare
// logits with the reference and with each other).
double max_err_rel(std::span<const float> got, std::span<const float> want);

// Runs the reference on ids (and optionally a greedy chain of n_generate).
Reference reference_forward(const std::filesystem::path& model, const std::vector<int32_t>& ids, int n_generate = 0,
                            const std::string& extra_args = "");

}  // namespace reach::test
