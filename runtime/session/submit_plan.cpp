#include "runtime/session/submit_plan.hpp"

#include <algorithm>

#include "base/settings.hpp"

namespace reach {

namespace {

// Weight count of a matrix (2 FLOPs each per row) and the bytes it reads.
double weights(const Mat& m) { return double(m.rows) * double(m.cols); }
double cost(double bytes, double flops) { return bytes / kRefBytesPerNs + flops / kRefFlopsPerNs; }

}  // namespace

SubmitBound submit_bound_from(const Settings& s) { return {double(s.submit_ms), s.submit_layers}; }

std::vector<double> forward_step_costs(const Model& model, const ModelConfig& c, std::span<const AttentionSpec> layers,
                                       std::span<const uint32_t> row_keys, uint32_t logits_rows) {
  const double n = double(row_keys.size());
  const double H = double(c.hidden_size);
  std::vector<double> out;
  out.reserve(model.layers().size() + 2);
  // Embedding: a row gathered per token; norms and element-wise passes: a few reads of every activation.
  out.push_back(cost(n * H * 8, n * H));
  const double attn_per_key = 4.0 * double(c.n_heads) * double(c.head_dim);
  for (size_t l = 0; l < model.layers().size(); ++l) {
    const LayerWeights& w = model.layers()[l];
    double bytes = 0, flops = 0;
    for (const Mat* m : {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down, &w.router}) {
      bytes += double(m->bytes());
      flops += 2 * n * weights(*m);
    }
    if (w.moe()) {
      // Each row runs experts_per_token experts; the rows together read at most every expert once.
      const double E = double(w.expert_down.size()), k = double(c.experts_per_token);
      double expert_bytes = 0, expert_weights = 0;
      for (const auto* list : {&w.expert_gate, &w.expert_up, &w.expert_down})
        for (const Mat& m : *list) expert_bytes += double(m.bytes()), expert_weights += weights(m);
      bytes += expert_bytes * std::min(1.0, n * k / std::max(E, 1.0));
      flops += 2 * n * k * expert_weights / std::max(E, 1.0);
    }
    const AttentionSpec& spec = layers[std::min(l, layers.size() - 1)];
    double keys = 0;
    for (uint32_t r : row_keys) keys += spec.window ? std::min<double>(r, double(spec.window) + spec.sinks) : r;
    flops += attn_per_key * keys * (spec.dual() ? 2 : 1);
    bytes += n * (H * 40);   // activations: norms, residual adds, q/k/v/o and the MLP's rows (f32)
    out.push_back(cost(bytes, flops));
  }
  const double head_rows = double(logits_rows);
  out.push_back(cost(double(model.lm_head().bytes()) + n * H * 8, 2 * head_rows * weights(model.lm_head())));
  return out;
}

std::vector<size_t> plan_cuts(std::span<const double> costs, double budget, uint32_t max_steps) {
  std::vector<size_t> cuts;
  double used = 0;
  size_t in_part = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    const bool full = in_part > 0 && ((max_steps && in_part >= max_steps) || used + costs[i] > budget);
    if (i == 0 || full) {
      cuts.push_back(i);
      used = 0;
      in_part = 0;
    }
    used += costs[i];
    ++in_part;
  }
  return cuts;
}

double adapt_scale(double scale, double observed) {
  if (!(observed > 0)) return scale;   // nothing measured (or a clock that did not move)
  return observed >= scale ? observed : std::max(observed, scale / 8);
}

}  // namespace reach
