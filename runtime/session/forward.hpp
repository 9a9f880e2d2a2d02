#pragma once
// The forward pass over n rows as one recorded sequence of kernels, shared by
// Session (one sequence, n tokens) and DecodeBatch (n sequences, one token
// each).  Everything but attention runs over all n rows at once; attention is
// handed to the caller, which binds its own KV cache(s), step params and
// scratch for the rows.
#include <cstdint>
#include <functional>

#include "engine/command.hpp"
#include "kernels/kernels.hpp"
#include "runtime/model/model.hpp"
#include "runtime/config/position_schemes.hpp"

namespace reach {

// Activation buffers of at least n rows each (h holds max(hidden, q dims)).
struct ForwardBuffers {
  const Buffer *ids, *x, *h, *q, *k, *v, *o, *g, *u, *logits;
};

struct ForwardAttention {
  // Writes layer l's new keys / values (rows of k and v) into the cache(s).
  std::function<void(CommandList&, size_t l, const Act& k, const Act& v)> store;
  // out rows = attention of the q rows over the cache(s); after store and a barrier.
  std::function<void(CommandList&, size_t l, const Act& q, const Act& o)> attend;
};

// Records embed -> layers -> final norm -> lm_head.  logits_rows: the last
// rows whose logits are written (1 for a prompt chunk, n for all logits or a
// batch of sequences).
void record_forward(CommandList& cmd, const Model& model, const ModelConfig& c, const ForwardBuffers& b,
                    uint32_t n, uint32_t logits_rows, const ForwardAttention& attention);

}  // namespace reach
