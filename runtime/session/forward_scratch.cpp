#include <algorithm>

#include "base/checked.hpp"
#include "runtime/session/forward.hpp"

namespace reach {

namespace {

struct Dims {
  uint64_t H, qd, kvd, I, V;
};

Dims dims(const ModelConfig& c) {
  const uint64_t d = uint64_t(c.head_dim);
  // The MLP buffers hold a dense layer's or one expert's gate and up.
  return {uint64_t(c.hidden_size), uint64_t(c.n_heads) * d, uint64_t(c.n_kv_heads) * d,
          uint64_t(std::max(c.intermediate_size, c.expert_intermediate_size)), uint64_t(c.vocab_size)};
}

}  // namespace

uint64_t ForwardScratch::moe_ids_stride(const ModelConfig& c, uint64_t rows) {
  return (rows * uint64_t(c.experts_per_token) + 63) / 64 * 64;
}

uint64_t ForwardScratch::activation_bytes(const ModelConfig& c, uint64_t rows) {
  const Dims m = dims(c);
  // x, h (max(hidden, q dims) wide), q, o, k, v, mlp gate (one row more: a fused decode step keeps a
  // row's [gate | up] there), mlp up.
  const uint64_t dense = saturating_add(
      saturating_mul({rows, 4, m.H + std::max(m.H, m.qd) + 2 * (m.qd + m.kvd + m.I)}), saturating_mul({m.I, 4}));
  if (!c.is_moe()) return dense;
  // Router logits, routing weights (dense and top-k), one expert's output, every layer's ids; the chosen
  // slots' [gate | up] and outputs (decode rows).
  const uint64_t E = uint64_t(c.n_experts), k = uint64_t(c.experts_per_token);
  const uint64_t r = std::min<uint64_t>(rows, kMoeDecodeRows), F = uint64_t(c.expert_intermediate_size);
  const uint64_t slot_bytes = saturating_add(saturating_mul({r, k, 4, 2 * F + m.H}), 256);
  return saturating_add(
      saturating_add(dense, saturating_mul({4, saturating_add(saturating_mul({rows, 2 * E + k + m.H}),
                                                              saturating_mul({uint64_t(c.n_layers),
                                                                              moe_ids_stride(c, rows)}))})),
      saturating_add(saturating_add(slot_bytes, E * 36),
                     rows > kMoeDecodeRows ? saturating_mul({E, kMoeGroupRows, 4, 2 * (m.H + F) + 1}) : 0));
}

uint64_t ForwardScratch::logits_bytes(const ModelConfig& c, uint64_t rows) {
  return saturating_mul({rows, dims(c).V, 4});
}

ForwardScratch ForwardScratch::allocate(Allocator& A, const ModelConfig& c, uint64_t n, const std::string& prefix) {
  const Dims m = dims(c);
  ForwardScratch s;
  s.ids = A.allocate(Arena::staging, n * 4, prefix + "token ids");
  s.x = A.allocate(Arena::scratch, n * m.H * 4, prefix + "x");
  s.h = A.allocate(Arena::scratch, n * std::max(m.H, m.qd) * 4, prefix + "h");
  s.q = A.allocate(Arena::scratch, n * m.qd * 4, prefix + "q");
  s.k = A.allocate(Arena::scratch, n * m.kvd * 4, prefix + "k");
  s.v = A.allocate(Arena::scratch, n * m.kvd * 4, prefix + "v");
  s.o = A.allocate(Arena::scratch, n * m.qd * 4, prefix + "attention out");
  s.g = A.allocate(Arena::scratch, (n + 1) * m.I * 4, prefix + "mlp gate");
  s.u = A.allocate(Arena::scratch, n * m.I * 4, prefix + "mlp up");
  s.logits = A.allocate(Arena::readback, n * m.V * 4, prefix + "logits");
  if (c.is_moe()) {
    const uint64_t E = uint64_t(c.n_experts), k = uint64_t(c.experts_per_token);
    s.moe_logits = A.allocate(Arena::scratch, n * E * 4, prefix + "router logits");
    s.moe_dense = A.allocate(Arena::scratch, n * E * 4, prefix + "routing weights");
    s.moe_weights = A.allocate(Arena::scratch, n * k * 4, prefix + "top-k weights");
    s.moe_out = A.allocate(Arena::scratch, n * m.H * 4, prefix + "expert out");
    s.moe_ids = A.allocate(Arena::scratch, uint64_t(c.n_layers) * moe_ids_stride(c, n) * 4, prefix + "expert ids");
    const uint64_t r = std::min<uint64_t>(n, kMoeDecodeRows), F = uint64_t(c.expert_intermediate_size);
    // [gate | up] rows, or a gate block then an up block at moe_up_offset (its alignment: 256 bytes more).
    s.moe_eg = A.allocate(Arena::scratch, moe_up_offset(r * k, F) + r * k * F * 4, prefix + "chosen experts' gate and up");
    s.moe_eout = A.allocate(Arena::scratch, r * k * m.H * 4, prefix + "chosen experts' out");
    s.moe_args = A.allocate(Arena::scratch, E * 3 * 12, prefix + "experts' group counts");
    s.moe_grids = A.allocate(Arena::staging, (kMoeDecodeRows + 1) * 256, prefix + "experts' recorded group counts");
    if (n > kMoeDecodeRows) {
      const uint64_t G = kMoeGroupRows;
      s.moe_xg = A.allocate(Arena::scratch, E * G * m.H * 4, prefix + "experts' gathered rows");
      s.moe_gg = A.allocate(Arena::scratch, E * G * F * 4, prefix + "experts' gathered gate");
      s.moe_gu = A.allocate(Arena::scratch, E * G * F * 4, prefix + "experts' gathered up");
      s.moe_gout = A.allocate(Arena::scratch, E * G * m.H * 4, prefix + "experts' gathered out");
      s.moe_slots = A.allocate(Arena::scratch, G * E * 4, prefix + "rows' expert slots");
    }
  }
  return s;
}

}  // namespace reach
