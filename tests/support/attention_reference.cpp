#include "tests/support/attention_reference.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "tests/support/position_formulas.hpp"

namespace reach::test {

namespace {

// Half-split rotation of x[d] at position p with frequencies inv (pairs j, j+half).
std::vector<double> rotate(const std::vector<double>& x, double p, const std::vector<double>& inv, double af) {
  std::vector<double> y = x;
  const size_t half = inv.size();
  for (size_t j = 0; j < half; ++j) {
    const double a = p * inv[j], c = std::cos(a) * af, s = std::sin(a) * af;
    y[j] = x[j] * c - x[j + half] * s;
    y[j + half] = x[j + half] * c + x[j] * s;
  }
  return y;
}

double norm(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}

}  // namespace

std::string RefScheme::describe() const {
  static const char* names[] = {"rope", "rerope", "leaky_rerope", "self_extend"};
  std::ostringstream o;
  o << names[method] << (inv_freq.empty() ? " nope" : "") << " W=" << window << " k=" << leaky_k << " G=" << group
    << " logn=" << logn_train_len << " norm=" << norm << " cos_n=" << cos_n << " attn_window=" << attn_window
    << " sinks=" << attn_sinks << " alibi=" << alibi_max_bias << " af=" << attention_factor
    << " softcap=" << softcap << " sink_logits=" << (sink_logits.empty() ? "none" : std::to_string(sink_logits.size()));
  return o.str();
}

std::vector<double> attention_reference(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, const std::vector<int64_t>& q_pos,
                                        const std::vector<int64_t>& k_pos, int H, int Hkv, int d,
                                        const RefScheme& s) {
  const size_t nq = q_pos.size(), nk = k_pos.size();
  const int rep = H / Hkv;
  const bool dual = s.method != RefScheme::rope;
  std::vector<double> inv2 = s.inv_freq;
  if (s.method == RefScheme::leaky_rerope)
    for (double& f : inv2) f /= s.leaky_k;
  double scale = s.scale;
  if (scale == 0) scale = s.norm == 0 ? 1.0 / std::sqrt(double(d)) : 1.0;
  std::vector<double> slopes(H, 0.0);
  if (s.alibi_max_bias > 0) {
    int n = 1;
    while (n * 2 <= H) n *= 2;
    const double m0 = std::pow(2.0, -s.alibi_max_bias / n), m1 = std::pow(2.0, -s.alibi_max_bias / 2 / n);
    for (int h = 0; h < H; ++h) slopes[h] = h < n ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n) + 1);
  }
  auto vec = [&](const std::vector<float>& a, size_t row, int heads, int h) {
    std::vector<double> x(d);
    for (int c = 0; c < d; ++c) x[c] = a[(row * heads + h) * d + c];
    return x;
  };
  std::vector<double> out(nq * H * d, 0.0);
  for (int h = 0; h < H; ++h) {
    const int g = h / rep;
    // Branch matrices S1, S2 [nq][nk] (explicit, then select).
    std::vector<double> S1(nq * nk), S2(nq * nk, 0.0);
    std::vector<std::vector<double>> k1(nk), k2(nk);
    for (size_t b = 0; b < nk; ++b) {
      std::vector<double> kk = vec(k, b, Hkv, g);
      if (s.norm == 1 || s.norm == 3) {
        const double n = std::max(norm(kk), 1e-30);
        for (double& e : kk) e /= n;
      }
      const double m = double(k_pos[b]);
      k1[b] = s.inv_freq.empty() ? kk : rotate(kk, m, s.inv_freq, s.attention_factor);
      if (s.method == RefScheme::rerope) k2[b] = kk;
      else if (s.method == RefScheme::leaky_rerope) k2[b] = rotate(kk, m, inv2, s.attention_factor);
      else if (s.method == RefScheme::self_extend)
        k2[b] = rotate(kk, double(k_pos[b] / s.group), s.inv_freq, s.attention_factor);
    }
    for (size_t a = 0; a < nq; ++a) {
      std::vector<double> qq = vec(q, a, H, h);
      const int64_t i = q_pos[a];
      if (s.norm == 2 || s.norm == 3) {
        const double n = std::max(norm(qq), 1e-30);
        for (double& e : qq) e /= n;
      }
      double f = scale;
      f *= logn_factor(i, s.logn_train_len);
      if (s.norm == 3) f *= 4.0 * std::log(s.cos_n > 0 ? s.cos_n : double(i) + 1);
      for (double& e : qq) e *= f;
      const std::vector<double> q1 =
          s.inv_freq.empty() ? qq : rotate(qq, double(i), s.inv_freq, s.attention_factor);
      std::vector<double> q2;
      if (s.method == RefScheme::rerope) q2 = rotate(qq, double(s.window), s.inv_freq, s.attention_factor);
      else if (s.method == RefScheme::leaky_rerope)
        q2 = rotate(qq, double(i) + double(s.window) * (s.leaky_k - 1), inv2, s.attention_factor);
      else if (s.method == RefScheme::self_extend)
        q2 = rotate(qq, double(i / s.group + s.window - s.window / s.group), s.inv_freq, s.attention_factor);
      for (size_t b = 0; b < nk; ++b) {
        double d1 = 0, d2 = 0;
        for (int c = 0; c < d; ++c) d1 += q1[c] * k1[b][c];
        if (dual)
          for (int c = 0; c < d; ++c) d2 += q2[c] * k2[b][c];
        S1[a * nk + b] = d1;
        S2[a * nk + b] = d2;
      }
    }
    // Select, soft cap, bias, mask, softmax, P·V.
    for (size_t a = 0; a < nq; ++a) {
      const int64_t i = q_pos[a];
      std::vector<double> row(nk);
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t b = 0; b < nk; ++b) {
        const int64_t m = k_pos[b], r = i - m;
        double sc = (dual && r >= s.window) ? S2[a * nk + b] : S1[a * nk + b];
        if (s.softcap > 0) sc = s.softcap * std::tanh(sc / s.softcap);
        sc -= slopes[h] * double(r);
        bool vis = r >= 0;
        if (s.attn_window) vis = vis && (r < s.attn_window || m < s.attn_sinks);
        row[b] = vis ? sc : -std::numeric_limits<double>::infinity();
        mx = std::max(mx, row[b]);
      }
      // The sink column: in the max and the denominator, not in P·V.
      const double sink = s.sink_logits.empty() ? -std::numeric_limits<double>::infinity() : s.sink_logits[h];
      mx = std::max(mx, sink);
      if (!std::isfinite(mx)) continue;   // nothing visible: zeros
      double den = std::exp(sink - mx);
      for (size_t b = 0; b < nk; ++b) {
        row[b] = std::exp(row[b] - mx);
        den += row[b];
      }
      for (size_t b = 0; b < nk; ++b) {
        const double p = row[b] / den;
        if (p == 0) continue;
        for (int c = 0; c < d; ++c) out[(a * H + h) * d + c] += p * v[(b * Hkv + g) * d + c];
      }
    }
  }
  return out;
}

}  // namespace reach::test
