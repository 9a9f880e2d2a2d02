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
  return {uint64_t(c.hidden_size), uint64_t(c.n_heads) * d, uint64_t(c.n_kv_heads) * d,
          uint64_t(c.intermediate_size), uint64_t(c.vocab_size)};
}

}  // namespace

uint64_t ForwardScratch::activation_bytes(const ModelConfig& c, uint64_t rows) {
  const Dims m = dims(c);
  // x, h (max(hidden, q dims) wide), q, o, k, v, mlp gate (one row more: a fused decode step keeps a
  // row's [gate | up] there), mlp up.
  return saturating_add(saturating_mul({rows, 4, m.H + std::max(m.H, m.qd) + 2 * (m.qd + m.kvd + m.I)}),
                        saturating_mul({m.I, 4}));
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
  return s;
}

}  // namespace reach
