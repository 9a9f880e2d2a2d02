// Tables, log-prob dump and SVG of `reach eval`.
#include "cli/eval_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace reach::eval {

namespace {

using ojson = nlohmann::ordered_json;

std::string f(const char* spec, double v) {
  char b[64];
  std::snprintf(b, sizeof b, spec, v);
  return b;
}

// Markdown cells must not contain '|'.
std::string md_cell(std::string s) {
  for (char& c : s)
    if (c == '|') c = '/';
  return s;
}

// JSON has no NaN / inf: emit null for them.
ojson num_or_null(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

}  // namespace

double PplRow::ppl_stderr() const {
  if (score.n < 2) return 0.0;
  const double m = score.nll_sum / double(score.n);
  const double m2 = score.nll2_sum / double(score.n);
  const double var = std::max(0.0, m2 - m * m);
  return score.ppl() * std::sqrt(var / double(score.n - 1));
}

std::string loss_markdown(const std::vector<LossRow>& rows, const std::string& protocol, bool verbose) {
  std::ostringstream o;
  o << "| scheme | ctx | scored | NLL | PPL | top-1 acc |" << (verbose ? " params | s |" : "") << "\n";
  o << "| --- | ---: | ---: | ---: | ---: | ---: |" << (verbose ? " --- | ---: |" : "") << "\n";
  for (const auto& r : rows) {
    o << "| " << md_cell(r.scheme) << " | " << r.ctx << " | " << r.score.n << " | " << f("%.4f", r.score.mean_nll())
      << " | " << f("%.3f", r.score.ppl()) << " | " << f("%.4f", r.score.accuracy()) << " |";
    if (verbose) o << " " << md_cell(r.params) << " | " << f("%.2f", r.seconds) << " |";
    o << "\n";
  }
  (void)protocol;
  return o.str();
}

std::string loss_json(const std::vector<LossRow>& rows, const std::string& protocol) {
  ojson a = ojson::array();
  for (const auto& r : rows) {
    ojson j;
    j["scheme"] = r.scheme;
    j["ctx"] = r.ctx;
    j["nll"] = num_or_null(r.score.mean_nll());
    j["ppl"] = num_or_null(r.score.ppl());
    j["accuracy"] = r.score.accuracy();
    j["n_scored"] = r.score.n;
    j["params"] = r.params;
    j["protocol"] = protocol;
    j["seconds"] = r.seconds;
    a.push_back(j);
  }
  return a.dump(2) + "\n";
}

std::string ppl_markdown(const std::vector<PplRow>& rows, bool verbose) {
  std::ostringstream o;
  o << "| scheme | n_ctx | chunks | scored | PPL | ± | NLL | top-1 acc |" << (verbose ? " params | s |" : "") << "\n";
  o << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" << (verbose ? " --- | ---: |" : "") << "\n";
  for (const auto& r : rows) {
    o << "| " << md_cell(r.scheme) << " | " << r.ctx << " | " << r.n_chunks << " | " << r.score.n << " | "
      << f("%.4f", r.score.ppl()) << " | " << f("%.5f", r.ppl_stderr()) << " | " << f("%.4f", r.score.mean_nll())
      << " | " << f("%.4f", r.score.accuracy()) << " |";
    if (verbose) o << " " << md_cell(r.params) << " | " << f("%.2f", r.seconds) << " |";
    o << "\n";
  }
  return o.str();
}

std::string ppl_json(const std::vector<PplRow>& rows) {
  ojson a = ojson::array();
  for (const auto& r : rows) {
    ojson j;
    j["scheme"] = r.scheme;
    j["ctx"] = r.ctx;
    j["nll"] = num_or_null(r.score.mean_nll());
    j["ppl"] = num_or_null(r.score.ppl());
    j["ppl_stderr"] = num_or_null(r.ppl_stderr());
    j["accuracy"] = r.score.accuracy();
    j["n_scored"] = r.score.n;
    j["n_chunks"] = r.n_chunks;
    j["params"] = r.params;
    j["protocol"] = "ppl";
    j["seconds"] = r.seconds;
    a.push_back(j);
  }
  return a.dump(2) + "\n";
}

std::string passkey_markdown(const std::vector<PasskeyCell>& cells, bool verbose) {
  // Keep first-seen order of schemes, contexts and depths.
  std::vector<std::string> schemes;
  std::vector<int64_t> ctxs;
  std::vector<double> depths;
  for (const auto& c : cells) {
    if (std::find(schemes.begin(), schemes.end(), c.scheme) == schemes.end()) schemes.push_back(c.scheme);
    if (std::find(ctxs.begin(), ctxs.end(), c.ctx) == ctxs.end()) ctxs.push_back(c.ctx);
    if (std::find(depths.begin(), depths.end(), c.depth) == depths.end()) depths.push_back(c.depth);
  }
  std::ostringstream o;
  for (size_t si = 0; si < schemes.size(); ++si) {
    const std::string& s = schemes[si];
    if (si) o << "\n";
    o << "passkey accuracy, scheme " << s << " (rows: insertion depth, columns: context)\n\n";
    o << "| depth |";
    for (int64_t L : ctxs) o << " " << L << " |";
    o << "\n| ---: |";
    for (size_t i = 0; i < ctxs.size(); ++i) o << " ---: |";
    o << "\n";
    auto find = [&](int64_t L, double d) -> const PasskeyCell* {
      for (const auto& c : cells)
        if (c.scheme == s && c.ctx == L && c.depth == d) return &c;
      return nullptr;
    };
    for (double d : depths) {
      o << "| " << f("%g", d) << " |";
      for (int64_t L : ctxs) {
        const PasskeyCell* c = find(L, d);
        o << " " << (c ? f("%.2f", c->accuracy()) : std::string("-")) << " |";
      }
      o << "\n";
    }
    o << "| mean |";
    for (int64_t L : ctxs) {
      size_t t = 0, k = 0;
      for (const auto& c : cells)
        if (c.scheme == s && c.ctx == L) t += c.trials, k += c.successes;
      o << " " << (t ? f("%.2f", double(k) / double(t)) : std::string("-")) << " |";
    }
    o << "\n";
    if (verbose) {
      o << "\n";
      for (int64_t L : ctxs)
        for (const auto& c : cells)
          if (c.scheme == s && c.ctx == L) {
            o << "  ctx " << L << ": " << c.params << " (prompts up to " << c.prompt_tokens << " tokens)\n";
            break;
          }
    }
  }
  return o.str();
}

std::string passkey_json(const std::vector<PasskeyCell>& cells) {
  ojson a = ojson::array();
  for (const auto& c : cells) {
    ojson j;
    j["scheme"] = c.scheme;
    j["ctx"] = c.ctx;
    j["depth"] = c.depth;
    j["accuracy"] = c.accuracy();
    j["trials"] = c.trials;
    j["successes"] = c.successes;
    j["prompt_tokens"] = c.prompt_tokens;
    j["params"] = c.params;
    j["protocol"] = "passkey";
    a.push_back(j);
  }
  return a.dump(2) + "\n";
}

std::string logprob_block(const std::string& scheme, int64_t ctx, const std::vector<size_t>& positions,
                          const std::vector<int32_t>& targets, const std::vector<double>& logprobs) {
  std::string o = "# scheme=" + scheme + " ctx=" + std::to_string(ctx) + "\n";
  const size_t n = std::min({positions.size(), targets.size(), logprobs.size()});
  char b[96];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%zu\t%d\t%.9g\n", positions[i], targets[i], logprobs[i]);
    o += b;
  }
  return o;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

// "Nice" ticks covering [lo, hi]: 1, 2 or 5 × 10^k steps.
std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) {
    const double pad = std::max(std::abs(lo) * 0.05, 0.05);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  // From the last tick <= lo to the first tick >= hi (so every point lies inside).
  std::vector<double> t;
  const double k0 = std::floor(lo / step + 1e-9);
  for (int i = 0; i < 64; ++i) {
    const double v = (k0 + i) * step;
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    if (v >= hi - step * 1e-9 && t.size() >= 2) break;
  }
  return t;
}

std::string ctx_label(double L) {
  const auto v = static_cast<long long>(std::llround(L));
  if (v >= 1024 && v % 1024 == 0) return std::to_string(v / 1024) + "k";
  return std::to_string(v);
}

}  // namespace

std::string plot_svg(const std::vector<PlotSeries>& series, const std::string& title, const std::string& y_label) {
  static const char* const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  const double W = 760, H = 460, ml = 72, mr = 180, mt = 48, mb = 60;
  const double pw = W - ml - mr, ph = H - mt - mb;

  std::set<double> xs;
  double ylo = INFINITY, yhi = -INFINITY;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!(x > 0)) continue;
      xs.insert(x);
      if (std::isfinite(y)) ylo = std::min(ylo, y), yhi = std::max(yhi, y);
    }
  if (!std::isfinite(ylo)) ylo = 0, yhi = 1;
  const std::vector<double> yt = nice_ticks(ylo, yhi, 5);
  const double y0 = yt.front(), y1 = yt.back();
  double lx0 = xs.empty() ? 0 : std::log2(*xs.begin()), lx1 = xs.empty() ? 1 : std::log2(*xs.rbegin());
  if (!(lx1 > lx0)) lx0 -= 0.5, lx1 += 0.5;
  const double xpad = (lx1 - lx0) * 0.05;
  lx0 -= xpad;
  lx1 += xpad;
  auto X = [&](double x) { return ml + (std::log2(x) - lx0) / (lx1 - lx0) * pw; };
  auto Y = [&](double y) { return mt + (1.0 - (y - y0) / (y1 - y0)) * ph; };

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "  <rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"white\"/>\n";
  o << "  <text class=\"title\" x=\"" << ml + pw / 2 << "\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">"
    << xml_escape(title) << "</text>\n";
  // Grid and ticks.
  o << "  <g class=\"axes\" stroke=\"#000\" fill=\"none\">\n";
  o << "    <line x1=\"" << ml << "\" y1=\"" << mt + ph << "\" x2=\"" << ml + pw << "\" y2=\"" << mt + ph << "\"/>\n";
  o << "    <line x1=\"" << ml << "\" y1=\"" << mt << "\" x2=\"" << ml << "\" y2=\"" << mt + ph << "\"/>\n";
  o << "  </g>\n  <g class=\"ticks\" font-size=\"11\">\n";
  for (double x : xs) {
    const double px = X(x);
    o << "    <line x1=\"" << f("%.2f", px) << "\" y1=\"" << mt << "\" x2=\"" << f("%.2f", px) << "\" y2=\"" << mt + ph
      << "\" stroke=\"#ddd\"/>\n";
    o << "    <line x1=\"" << f("%.2f", px) << "\" y1=\"" << mt + ph << "\" x2=\"" << f("%.2f", px) << "\" y2=\""
      << mt + ph + 5 << "\" stroke=\"#000\"/>\n";
    o << "    <text x=\"" << f("%.2f", px) << "\" y=\"" << mt + ph + 18 << "\" text-anchor=\"middle\">" << ctx_label(x)
      << "</text>\n";
  }
  for (double y : yt) {
    const double py = Y(y);
    o << "    <line x1=\"" << ml << "\" y1=\"" << f("%.2f", py) << "\" x2=\"" << ml + pw << "\" y2=\"" << f("%.2f", py)
      << "\" stroke=\"#eee\"/>\n";
    o << "    <line x1=\"" << ml - 5 << "\" y1=\"" << f("%.2f", py) << "\" x2=\"" << ml << "\" y2=\"" << f("%.2f", py)
      << "\" stroke=\"#000\"/>\n";
    o << "    <text x=\"" << ml - 8 << "\" y=\"" << f("%.2f", py + 4) << "\" text-anchor=\"end\">" << f("%g", y)
      << "</text>\n";
  }
  o << "  </g>\n";
  o << "  <text class=\"xlabel\" x=\"" << ml + pw / 2 << "\" y=\"" << H - 16
    << "\" text-anchor=\"middle\">context length (tokens, log2 scale)</text>\n";
  o << "  <text class=\"ylabel\" x=\"18\" y=\"" << mt + ph / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
    << mt + ph / 2 << ")\">" << xml_escape(y_label) << "</text>\n";
  // Series.
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* color = colors[i % (sizeof colors / sizeof *colors)];
    std::vector<std::pair<double, double>> pts;
    for (const auto& [x, y] : s.points)
      if (x > 0 && std::isfinite(y)) pts.emplace_back(X(x), Y(y));
    std::sort(pts.begin(), pts.end());
    o << "  <polyline class=\"series\" data-scheme=\"" << xml_escape(s.name) << "\" fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"2\" points=\"";
    for (size_t k = 0; k < pts.size(); ++k) o << (k ? " " : "") << f("%.2f", pts[k].first) << "," << f("%.2f", pts[k].second);
    o << "\"/>\n";
    for (const auto& [px, py] : pts)
      o << "  <circle class=\"point\" cx=\"" << f("%.2f", px) << "\" cy=\"" << f("%.2f", py) << "\" r=\"3\" fill=\""
        << color << "\"/>\n";
  }
  // Legend.
  o << "  <g class=\"legend\">\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = colors[i % (sizeof colors / sizeof *colors)];
    const double ly = mt + 10 + 20.0 * double(i);
    const double lx = ml + pw + 16;
    o << "    <line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 24 << "\" y2=\"" << ly << "\" stroke=\""
      << color << "\" stroke-width=\"2\"/>\n";
    o << "    <text x=\"" << lx + 30 << "\" y=\"" << ly + 4 << "\">" << xml_escape(series[i].name) << "</text>\n";
  }
  o << "  </g>\n</svg>\n";
  return o.str();
}

}  // namespace reach::eval
