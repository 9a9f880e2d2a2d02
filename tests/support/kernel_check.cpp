#include "tests/support/kernel_check.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <iomanip>
#include <cstring>
#include <limits>

#include "tests/support/fixtures.hpp"

namespace reach::test {

namespace {

constexpr size_t kListed = 8;   // mismatches listed in a failure report

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
  return std::string("rerun: ") + opt->binary_name.c_str() + " -tc=\"" + name + "\"\n";
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

KernelConfig base_config() { return KernelConfig::from(gpu().device->caps()); }

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

}  // namespace reach::test
