#include "tests/support/kernel_check.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <iomanip>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <random>
#include <set>

#include "tests/support/fixtures.hpp"

namespace reach::test {

namespace {

constexpr size_t kListed = 8;   // mismatches listed in a failure report
bool g_sampled = false;         // a sweep of this process was sampled: reruns need its seed

// "0x3f800000 (1)": the pattern, and its value when it is an f32.
std::string bits_text(uint32_t bits, unsigned width) {
  std::ostringstream o;
  o << "0x" << std::hex << std::setw(int(width / 4)) << std::setfill('0') << bits;
  if (width == 32) {
    float f;
    std::memcpy(&f, &bits, 4);
    o << " (" << std::setprecision(9) << f << ")";
  }
  return o.str();
}

// "rerun: BINARY -tc=\"CASE\"" for the running doctest case (commas escaped as doctest's filters want).
std::string rerun_line() {
  const doctest::ContextOptions* opt = doctest::getContextOptions();
  if (!opt || !opt->currentTest) return {};
  std::string name;
  for (const char* p = opt->currentTest->m_name; *p; ++p) {
    if (*p == ',' || *p == '\\') name += '\\';
    name += *p;
  }
  return std::string("rerun: ") + (g_sampled ? sample_env() + " " : "") + opt->binary_name.c_str() + " -tc=\"" + name + "\"\n";
}

}  // namespace

Tolerance Tolerance::exact(std::string why) {
  Tolerance t;
  t.kind = Kind::exact;
  t.why = std::move(why);
  return t;
}

Tolerance Tolerance::close(double rel, double abs, std::string why) {
  Tolerance t;
  t.kind = Kind::close;
  t.rel = rel;
  t.abs = abs;
  t.why = std::move(why);
  return t;
}

Tolerance Tolerance::nmse(double max, std::string why) {
  Tolerance t;
  t.kind = Kind::nmse;
  t.max_nmse = max;
  t.why = std::move(why);
  return t;
}

std::string Tolerance::describe() const {
  switch (kind) {
    case Kind::exact: return "exact";
    case Kind::close: return rel ? str(rel, "*|ref|+", abs) : str("max abs ", abs);
    case Kind::nmse: return str("normalized MSE <= ", max_nmse);
  }
  return {};
}

Values Values::of(const std::vector<float>& v) { return Values{std::vector<double>(v.begin(), v.end()), {}, 0}; }

Values Values::of(std::vector<double> v) { return Values{std::move(v), {}, 0}; }

Values Values::bits_of(const std::vector<float>& v) {
  Values r;
  r.bit_width = 32;
  r.bits.resize(v.size());
  std::memcpy(r.bits.data(), v.data(), v.size() * 4);
  return r;
}

Values Values::bits_of(const std::vector<uint16_t>& v) {
  Values r;
  r.bit_width = 16;
  r.bits.assign(v.begin(), v.end());
  return r;
}

std::string KernelCheck::describe() const { return "op=" + op + " " + params + " seed=" + std::to_string(seed); }

CheckStats check_kernel(const KernelCheck& c) {
  CheckStats s;
  const std::string head = rerun_line() + "case: " + c.describe() + "\ntolerance: " + c.tol.describe() + " (" +
                           c.tol.why + ")";
  Values got, want;
  try {
    got = c.device();
    want = c.reference();
  } catch (const std::exception& e) {
    FAIL_CHECK(head << "\nthrew: " << e.what());
    return s;
  }
  s.count = want.size();
  auto name = [&](size_t i) { return c.where ? c.where(i) : "[" + std::to_string(i) + "]"; };
  std::ostringstream list;   // the first mismatches
  std::string problem;
  if (got.size() != want.size() || got.bit_width != want.bit_width) {
    problem = str("the device gave ", got.size(), " values (bit width ", got.bit_width, "), the reference ",
                  want.size(), " (bit width ", want.bit_width, ")");
  } else if (c.tol.kind != Tolerance::Kind::exact && want.bit_width) {
    problem = "bit patterns can only be compared exactly";
  } else if (want.bit_width) {
    for (size_t i = 0; i < s.count; ++i)
      if (got.bits[i] != want.bits[i] && s.bad++ < kListed)
        list << "\n  " << name(i) << ": got " << bits_text(got.bits[i], want.bit_width) << " want "
             << bits_text(want.bits[i], want.bit_width);
  } else {
    double sq_err = 0, sq_ref = 0, largest = -1;
    size_t largest_at = 0;
    for (size_t i = 0; i < s.count; ++i) {
      const double g = got.num[i], w = want.num[i];
      const double e = std::isnan(g - w) ? INFINITY : std::fabs(g - w);   // NaN, or inf - inf: infinitely wrong
      const double allowed = c.tol.rel * std::fabs(w) + c.tol.abs;
      const bool guard = i < c.guard_front || i + c.guard_back >= s.count;
      bool ok;
      if (guard || c.tol.kind == Tolerance::Kind::exact) ok = g == w;
      else if (c.tol.kind == Tolerance::Kind::close) ok = e <= allowed;
      else ok = std::isfinite(g);   // nmse: judged on the sums below
      if (!guard) {
        sq_err += e * e;
        sq_ref += w * w;
        s.max_abs = std::max(s.max_abs, e);
        if (std::fabs(w) >= std::numeric_limits<float>::min()) s.max_rel = std::max(s.max_rel, e / std::fabs(w));
        if (e > largest) largest = e, largest_at = i;
      }
      if (!ok && s.bad++ < kListed) {
        list << "\n  " << name(i) << ": got " << std::setprecision(9) << g << " want " << w << " |err| " << e;
        if (guard) list << " (outside the output: must keep its value)";
        else if (c.tol.kind == Tolerance::Kind::close) list << " allowed " << allowed;
      }
    }
    s.nmse = sq_ref > 0 ? sq_err / sq_ref : sq_err;
    if (c.tol.kind == Tolerance::Kind::nmse && !(s.nmse <= c.tol.max_nmse)) {
      problem = str("normalized MSE ", s.nmse, " > ", c.tol.max_nmse);
      if (largest >= 0)
        list << "\n  largest error at " << name(largest_at) << ": got " << std::setprecision(9) << got.num[largest_at]
             << " want " << want.num[largest_at];
    }
  }
  s.ok = problem.empty() && s.bad == 0;
  if (s.bad > kListed) list << "\n  ... " << (s.bad - kListed) << " more";
  std::ostringstream summary;
  summary << s.bad << " of " << s.count << " elements differ";
  if (!want.bit_width)
    summary << "; max abs error " << s.max_abs << ", max rel error " << s.max_rel << ", normalized MSE " << s.nmse;
  CHECK_MESSAGE(s.ok, head << "\n" << (problem.empty() ? "" : problem + "\n") << summary.str() << list.str());
  return s;
}

std::vector<uint32_t> sizes_around(uint32_t tile, std::initializer_list<uint32_t> extra) {
  std::vector<uint32_t> v = {1, tile - 1, tile, tile + 1};
  v.insert(v.end(), extra.begin(), extra.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  v.erase(std::remove(v.begin(), v.end(), 0u), v.end());
  return v;
}

KernelConfig base_config() { return KernelConfig::from(gpu().device->caps(), gpu().device->settings().kernels); }

Kernels kernels_with(const KernelConfig& cfg) { return Kernels(*gpu().device, cfg); }

Kernels kernels_with(uint32_t reduce_wg, uint64_t max_binding) {
  KernelConfig cfg = base_config();
  if (reduce_wg) cfg.reduce_wg = reduce_wg;
  if (max_binding) cfg.max_binding = max_binding;
  return kernels_with(cfg);
}

std::vector<uint32_t> reduce_workgroup_sizes() {
  std::vector<uint32_t> v{1, 8, 12, 32, 64, 256};
  const uint32_t d = base_config().reduce_wg;
  if (std::find(v.begin(), v.end(), d) == v.end()) v.push_back(d);
  return v;
}

namespace {

std::string binary_name() {
  const doctest::ContextOptions* opt = doctest::getContextOptions();
  return opt ? opt->binary_name.c_str() : "TEST_BINARY";
}

// splitmix64: the sweep's stream from (seed, name).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

bool test_exhaustive() {
  static const bool on = [] {
    const char* e = std::getenv("REACH_TEST_EXHAUSTIVE");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* e = std::getenv("REACH_TEST_SEED");
    uint64_t s;
    if (e && *e) s = std::strtoull(e, nullptr, 0);
    else s = (uint64_t(std::random_device{}()) << 20 ^ std::random_device{}()) % 1000000000ull;
    return s;
  }();
  static std::once_flag printed;
  std::call_once(printed, [] {
    const std::string bin = binary_name();
    if (test_exhaustive())
      std::printf("[sweeps] REACH_TEST_EXHAUSTIVE=1: every case of every sweep\n");
    else
      std::printf("[sweeps] sampled with REACH_TEST_SEED=%llu; replay: REACH_TEST_SEED=%llu %s; "
                  "every case: REACH_TEST_EXHAUSTIVE=1 %s\n",
                  (unsigned long long)seed, (unsigned long long)seed, bin.c_str(), bin.c_str());
    std::fflush(stdout);
  });
  return seed;
}

std::string sample_env() {
  if (test_exhaustive()) return "REACH_TEST_EXHAUSTIVE=1";
  return "REACH_TEST_SEED=" + std::to_string(test_seed());
}

std::vector<SweepPick> sample_sweep(const std::string& name, const std::vector<size_t>& dims, size_t extra,
                                    const std::vector<std::vector<size_t>>& always) {
  size_t total = 1;
  for (size_t d : dims) total *= d;
  auto pick_of = [&](size_t flat) {
    SweepPick p;
    p.flat = flat;
    p.at.resize(dims.size());
    for (size_t i = dims.size(); i-- > 0;) {
      p.at[i] = flat % dims[i];
      flat /= dims[i];
    }
    return p;
  };
  auto flat_of = [&](const std::vector<size_t>& at) {
    size_t f = 0;
    for (size_t i = 0; i < dims.size(); ++i) f = f * dims[i] + at[i];
    return f;
  };
  std::vector<SweepPick> out;
  if (total == 0) return out;
  const uint64_t seed = test_seed();
  g_sampled = true;
  if (test_exhaustive()) {
    for (size_t f = 0; f < total; ++f) out.push_back(pick_of(f));
    return out;
  }
  uint64_t h = 1469598103934665603ull;   // FNV-1a of the name
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  std::mt19937_64 rng(mix(seed ^ mix(h)));
  std::set<size_t> chosen;
  for (const auto& a : always)
    if (a.size() == dims.size()) chosen.insert(flat_of(a));
  // Covering: row r takes value perm_i[r % dims[i]] of list i; max(dims) rows meet every value.
  size_t rows = 0;
  for (size_t d : dims) rows = std::max(rows, d);
  std::vector<std::vector<size_t>> perm(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i].resize(dims[i]);
    for (size_t v = 0; v < dims[i]; ++v) perm[i][v] = v;
    std::shuffle(perm[i].begin(), perm[i].end(), rng);
  }
  for (size_t r = 0; r < rows; ++r) {
    std::vector<size_t> at(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) at[i] = perm[i][r % dims[i]];
    chosen.insert(flat_of(at));
  }
  for (size_t e = 0; e < extra && chosen.size() < total; ++e) {
    size_t f;
    do f = size_t(rng() % total);
    while (chosen.count(f));
    chosen.insert(f);
  }
  for (size_t f : chosen) out.push_back(pick_of(f));   // in the order of the full sweep
  return out;
}

}  // namespace reach::test
