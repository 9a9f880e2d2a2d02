#pragma once
// Bounded submissions: the cost model and the cuts.  A forward pass is a sequence of steps (the embedding,
// each layer, the head); a program records contiguous runs of them into command lists submitted back to
// back, so that no one submission keeps the GPU busy long enough for a watchdog to reset it (Windows' TDR
// after 2 s, weak iGPUs and mobile drivers sooner).  Costs are estimated here; what one cost unit takes on
// the device is measured (SubmitParts) and the cuts follow it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/attention_spec.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/model/model.hpp"

namespace reach {

struct Settings;

struct SubmitBound {
  double target_ms = 500;   // GPU time a submission aims to stay under; 0: no time bound
  uint32_t max_steps = 0;   // at most this many steps per submission; 0: no cap
  bool bounded() const { return target_ms > 0 || max_steps > 0; }
};
// The bound REACH_SUBMIT_MS / REACH_SUBMIT_LAYERS set.
SubmitBound submit_bound_from(const Settings& s);

// One cost unit is a ns on a slow reference device (a weak iGPU): weight bytes at kRefBytesPerNs, arithmetic
// at kRefFlopsPerNs.  Starting from it (scale 1) cuts conservatively until the device has been timed.
inline constexpr double kRefBytesPerNs = 2;    // 2 GB/s
inline constexpr double kRefFlopsPerNs = 4;    // 4 GFLOP/s: below a CPU device of two cores
// A part is planned to fill this share of the target: room for the run-to-run spread.
inline constexpr double kSubmitFill = 0.7;

// Estimated cost of each step of a forward: [embedding, layer 0 .. layer L-1, head].  A layer reads its
// weight matrices once and does 2 FLOPs per weight per row (a sparse layer: its router and the experts the
// rows may pick), and attention 4 · heads · head_dim FLOPs per key a row sees (twice for dual-branch
// schemes); row_keys[i]: the keys row i sees before its window (position + 1); layers: each layer's spec
// (its window).  logits_rows: the rows the head computes.
std::vector<double> forward_step_costs(const Model& model, const ModelConfig& c, std::span<const AttentionSpec> layers,
                                       std::span<const uint32_t> row_keys, uint32_t logits_rows);

// The first step of each part, ascending from 0: as many consecutive steps per part as fit
// `budget` cost units (at least one: a step is never cut), at most max_steps (0: any).
std::vector<size_t> plan_cuts(std::span<const double> costs, double budget, uint32_t max_steps);

// The ns per cost unit after a run whose slowest part took `observed` ns per unit: up at once (a part ran
// longer than planned), down by at most 8x a run (one fast run does not undo a slow one).
double adapt_scale(double scale, double observed);

}  // namespace reach
