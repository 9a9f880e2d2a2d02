#pragma once
// The harness of the kernel suites (tests/test_kernels_*.cpp), after llama.cpp's
// test-backend-ops: a case names its op and its parameters as a printable
// string, runs the kernel on the shared device and a plain C++ reference on the
// same inputs, and states its tolerance and why.  A failure prints what a rerun
// needs: the test binary and case, op, parameters, seed, tolerance, and the
// first mismatching elements.
//
//   check_kernel({.op = "silu_mul", .params = str("n=", n), .seed = seed,
//                 .tol = Tolerance::close(1e-5, 1e-30, "exp <= 23 ULP, division 2.5 ULP, ..."),
//                 .device = [&] { ...; return Values::of(g.download_f32(by, n)); },
//                 .reference = [&] { ...; return Values::of(ref); }});
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernels.hpp"

namespace reach::test {

// How a case's output is compared with its reference.
struct Tolerance {
  enum class Kind { exact, close, nmse };
  Kind kind = Kind::exact;
  double rel = 0, abs = 0;   // close: |got - want| <= rel * |want| + abs for every element (NaN fails)
  double max_nmse = 0;       // nmse: sum (got - want)^2 / sum want^2 <= max_nmse
  std::string why;           // the derivation, printed with every failure

  // Bit for bit (Values holding bit patterns), or equal numbers.
  static Tolerance exact(std::string why);
  static Tolerance close(double rel, double abs, std::string why);
  static Tolerance max_abs(double abs, std::string why) { return close(0, abs, std::move(why)); }
  static Tolerance nmse(double max, std::string why);
  std::string describe() const;
};

// One output of a kernel or of its reference: numbers (f32 results widened to
// double, or the reference's doubles), or raw bit patterns for exact checks
// (NaN payloads and signed zeros included).
struct Values {
  std::vector<double> num;
  std::vector<uint32_t> bits;
  unsigned bit_width = 0;   // 0: numbers; 16 or 32: bit patterns of that width

  static Values of(const std::vector<float>& v);
  static Values of(std::vector<double> v);
  static Values bits_of(const std::vector<float>& v);
  static Values bits_of(const std::vector<uint16_t>& v);
  size_t size() const { return bit_width ? bits.size() : num.size(); }
};

struct KernelCheck {
  std::string op;       // the kernel, e.g. "rmsnorm"
  std::string params;   // shapes, dtypes, variant, offsets: what besides the seed picks the inputs and the kernel
  uint32_t seed = 0;    // seed of the random inputs
  Tolerance tol;
  std::function<Values()> device;      // records and runs the kernel, returns what it wrote
  std::function<Values()> reference;   // plain C++ on the same inputs
  // Leading / trailing elements that must equal the reference exactly whatever
  // `tol` says: sentinels around the region the kernel may write.
  size_t guard_front = 0, guard_back = 0;
  // Optional: names element i in the case's terms (row and column, token id, input bits).
  std::function<std::string(size_t)> where;

  std::string describe() const;   // "op=... params seed=..."
};

struct CheckStats {
  bool ok = false;
  size_t count = 0, bad = 0;
  double max_abs = 0;   // over all elements (numbers only)
  double max_rel = 0;   // over elements whose reference is a normal f32 (denormals may be flushed)
  double nmse = 0;
};

// Runs c.device(), then c.reference(), compares them under c.tol and records one
// doctest check for the case (the full report on failure).  Returns the statistics.
CheckStats check_kernel(const KernelCheck& c);

// Sizes around a tile edge: 1, tile-1, tile, tile+1 and `extra` (non-multiples
// of the subgroup, large sizes), sorted, without 0 or repeats.
std::vector<uint32_t> sizes_around(uint32_t tile, std::initializer_list<uint32_t> extra = {});

// The shared device's kernel configuration, and kernels made with one changed.
KernelConfig base_config();
Kernels kernels_with(const KernelConfig& cfg);
// The reduction workgroup forced to `reduce_wg` (0: the device's default) and
// the binding span to `max_binding` (0: the device's).
Kernels kernels_with(uint32_t reduce_wg, uint64_t max_binding = 0);
// Reduction workgroup sizes the one-row-per-workgroup kernels (rmsnorm, softmax,
// embed) may be given: 8/32/64/256 as a GPU may use, 1 and 12 for a partial
// subgroup (12 = one full and one partial subgroup of 8 on lavapipe), and the
// device's default.
std::vector<uint32_t> reduce_workgroup_sizes();

// ---- Sampled sweeps -------------------------------------------------------
// A sweep over the cross product of a few parameter lists (dims[i] values in
// list i) runs, by default, a seeded random sample of it: every value of every
// list at least once (a random covering, so each variant and each edge size is
// met), the tuples listed in `always`, and `extra` further random tuples.
//   REACH_TEST_EXHAUSTIVE=1  runs the whole cross product, as before sampling;
//   REACH_TEST_SEED=N        replays the sample of an earlier run (the seed is
//                            printed once per process, and with every failure).
// Without REACH_TEST_SEED the seed is random, so repeated runs cover more of the
// product.  Each sweep's sample depends only on the seed and the sweep's name,
// so `-tc=CASE` with the same seed replays the same cases.  Callers keep the
// inputs of a tuple a function of the tuple (e.g. its index in the full
// product), so a sampled case checks exactly what the exhaustive run checks.
bool test_exhaustive();
uint64_t test_seed();
// "REACH_TEST_SEED=N" (or "REACH_TEST_EXHAUSTIVE=1"): what a rerun puts before the binary.
std::string sample_env();

struct SweepPick {
  std::vector<size_t> at;   // one index per dimension
  size_t flat = 0;          // the tuple's position in the full product (row-major), e.g. for input seeds
  size_t operator[](size_t i) const { return at[i]; }
};
std::vector<SweepPick> sample_sweep(const std::string& name, const std::vector<size_t>& dims, size_t extra = 0,
                                    const std::vector<std::vector<size_t>>& always = {});

// Runs f(pick) for each picked tuple, with the sweep, the tuple and the replay
// command attached to any failure inside (doctest INFO).
template <class F>
void for_sample(const std::string& name, const std::vector<size_t>& dims, size_t extra, F&& f,
                const std::vector<std::vector<size_t>>& always = {}) {
  const std::vector<SweepPick> picks = sample_sweep(name, dims, extra, always);
  for (const SweepPick& p : picks) {
    std::string at;
    for (size_t i = 0; i < p.at.size(); ++i) at += (i ? "," : "") + std::to_string(p.at[i]);
    INFO("sweep '" << name << "' tuple (" << at << ") of " << picks.size() << " sampled; replay: " << sample_env());
    f(p);
  }
}

// Concatenates its arguments as an ostream would print them: str("shape=[", r, ",", c, "]").
template <class... A>
std::string str(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}

}  // namespace reach::test
