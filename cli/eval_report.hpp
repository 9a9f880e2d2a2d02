#pragma once
// Output of `reach eval`: markdown / JSON tables, the log-prob dump and the
// SVG plot.  Pure string builders (no I/O), checked by tests/test_eval.cpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/eval_protocols.hpp"

namespace reach::eval {

// One (scheme, context) cell of the last-segment / repeat protocols.
struct LossRow {
  std::string scheme;
  int64_t ctx = 0;
  std::string params;    // the concrete scheme flags used (SchemeRun::params)
  Score score;
  double seconds = 0;
};

// One scheme of `--mode ppl`.
struct PplRow {
  std::string scheme;
  int64_t ctx = 0;
  std::string params;
  size_t n_chunks = 0;
  Score score;
  double seconds = 0;
  double ppl_stderr() const;   // llama-perplexity's estimate: ppl · sqrt(var(nll) / (n − 1))
};

// One (scheme, context, depth) cell of `--passkey`.
struct PasskeyCell {
  std::string scheme;
  int64_t ctx = 0;
  double depth = 0;
  std::string params;
  size_t trials = 0, successes = 0;
  size_t prompt_tokens = 0;   // the longest prompt of the cell
  double accuracy() const { return trials ? double(successes) / double(trials) : 0.0; }
};

// `protocol` is "last-segment" or "repeat"; verbose adds the params column.
std::string loss_markdown(const std::vector<LossRow>& rows, const std::string& protocol, bool verbose);
// JSON array of {scheme, ctx, nll, ppl, accuracy, n_scored, params, protocol, seconds}.
std::string loss_json(const std::vector<LossRow>& rows, const std::string& protocol);

std::string ppl_markdown(const std::vector<PplRow>& rows, bool verbose);
std::string ppl_json(const std::vector<PplRow>& rows);

// One markdown table per scheme: rows = depth, columns = context.
std::string passkey_markdown(const std::vector<PasskeyCell>& cells, bool verbose);
std::string passkey_json(const std::vector<PasskeyCell>& cells);

// "# scheme=S ctx=L" then one "position\ttarget_id\tlogprob" line per scored
// prediction.  positions[i] is the index of targets[i] in the evaluated sequence.
std::string logprob_block(const std::string& scheme, int64_t ctx, const std::vector<size_t>& positions,
                          const std::vector<int32_t>& targets, const std::vector<double>& logprobs);

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;   // (context length, y); non-finite y are skipped
};
// A standalone SVG: log2 x axis (context length), linear y axis, one
// <polyline class="series" data-scheme="NAME"> per series, tick labels, a
// title and a legend.
std::string plot_svg(const std::vector<PlotSeries>& series, const std::string& title, const std::string& y_label);

// XML text escaping (&, <, >, ", ').
std::string xml_escape(const std::string& s);

}  // namespace reach::eval
