#pragma once
// The forward pass over n rows as one recorded sequence of kernels, shared by
// Session (one sequence, n tokens) and DecodeBatch (n sequences, one token
// each).  Everything but attention runs over all n rows at once; attention is
// handed to the caller, which binds its own KV cache(s), step params and
// scratch for the rows.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "engine/command.hpp"
#include "engine/memory.hpp"
#include "kernels/attention.hpp"
#include "kernels/kernels.hpp"
#include "runtime/config/position_schemes.hpp"
#include "runtime/model/model.hpp"

namespace reach {

// Activation buffers of at least n rows each (h holds max(hidden, q dims)).
struct ForwardBuffers {
  const Buffer *ids, *x, *h, *q, *k, *v, *o, *g, *u, *logits;
  // Mixture of experts (null for a dense model): router logits and routing weights [n, E] (dense), the
  // top-k weights [n, k], one expert's output [n, H], and the chosen expert ids of every layer
  // ([layer][moe_ids_stride] int32, readable after a step for checks).
  const Buffer *moe_logits = nullptr, *moe_dense = nullptr, *moe_weights = nullptr, *moe_out = nullptr,
               *moe_ids = nullptr;
  // Decode rows (n <= ForwardScratch::kMoeDecodeRows at a time): the chosen slots' [gate | up]
  // [rows * k][2 * ffn] and outputs [rows * k][hidden]; for the grouped prefill the indirect group counts per
  // expert and call, and the counts the calls were recorded with (host-written).
  const Buffer *moe_eg = nullptr, *moe_eout = nullptr, *moe_args = nullptr,
               *moe_grids = nullptr;
  // Prefill rows, kMoeGroupRows at a time grouped by expert: each expert's gathered input, gate, up and output
  // [E][kMoeGroupRows][cols], and each row's slots in its experts' blocks (null without prefill rows).
  const Buffer *moe_xg = nullptr, *moe_gg = nullptr, *moe_gu = nullptr, *moe_gout = nullptr, *moe_slots = nullptr;
};

// The buffers behind ForwardBuffers for up to `rows` rows, sized by one rule for
// Session (rows = its prefill chunk) and DecodeBatch (rows = its sequences):
// token ids (staging), activations (scratch), logits (readback).
struct ForwardScratch {
  Buffer ids, x, h, q, k, v, o, g, u, logits;
  Buffer moe_logits, moe_dense, moe_weights, moe_out, moe_ids;   // allocated for a mixture of experts only
  Buffer moe_eg, moe_eout, moe_args, moe_grids;             // and these with decode rows (see below)
  Buffer moe_xg, moe_gg, moe_gu, moe_gout, moe_slots;  // and these with more rows than decode's

  // Prefill rows go through the experts this many at a time, grouped by expert: every expert's matrix
  // products over only the rows that chose it (indirect row groups), gathered into its own block.
  static constexpr uint32_t kMoeGroupRows = 32;

  // Up to this many rows, a MoE layer runs only the chosen (row, expert) slots (moe_matvec); above it
  // (prefill chunks) the rows are grouped by expert (moe_group) and each expert's GEMMs see its rows.
  static constexpr uint32_t kMoeDecodeRows = 8;

  // Byte offset of the up block in moe_eg when gate and up are two blocks of `slots` rows x ffn (binding-aligned).
  static uint64_t moe_up_offset(uint64_t slots, uint64_t ffn) { return (slots * ffn * 4 + 255) / 256 * 256; }

  // int32 entries between two layers' expert ids in moe_ids: rows x top-k, rounded up to 64 (aligned ranges).
  static uint64_t moe_ids_stride(const ModelConfig& c, uint64_t rows);

  // Arena::scratch bytes of the activations x, h, q, k, v, o, g, u for `rows` rows.
  static uint64_t activation_bytes(const ModelConfig& c, uint64_t rows);
  // Arena::readback bytes of the logits of `rows` rows.
  static uint64_t logits_bytes(const ModelConfig& c, uint64_t rows);
  // Allocates every buffer (check the byte counts above with Allocator::require
  // first); `label_prefix` goes before each buffer's label.
  static ForwardScratch allocate(Allocator& allocator, const ModelConfig& c, uint64_t rows,
                                 const std::string& label_prefix);

  ForwardBuffers buffers() const {
    ForwardBuffers b{&ids, &x, &h, &q, &k, &v, &o, &g, &u, &logits};
    if (moe_ids) b.moe_logits = &moe_logits, b.moe_dense = &moe_dense, b.moe_weights = &moe_weights,
                 b.moe_out = &moe_out, b.moe_ids = &moe_ids;
    if (moe_args) b.moe_eg = &moe_eg, b.moe_eout = &moe_eout, b.moe_args = &moe_args,
                  b.moe_grids = &moe_grids;
    if (moe_slots) b.moe_xg = &moe_xg, b.moe_gg = &moe_gg, b.moe_gu = &moe_gu, b.moe_gout = &moe_gout,
                   b.moe_slots = &moe_slots;
    return b;
  }
};

struct ForwardAttention {
  // Writes layer l's new keys / values (rows of k and v) into the cache(s); q: the same rows' queries
  // (a prefill calibrates its keys' storage from them: Attention::kv_calibrate).
  std::function<void(CommandList&, size_t l, const Act& q, const Act& k, const Act& v)> store;
  // out rows = attention of the q rows over the cache(s); after store and a barrier.
  std::function<void(CommandList&, size_t l, const Act& q, const Act& o)> attend;
  // Optional (decode rows): whether layer l takes store_attend, and the step
  // itself: store and attend in one dispatch (Attention::decode_fused), called
  // instead of store, barrier, attend.  qk: the layer's per-head q/k RMSNorms,
  // which the step then applies itself (no norm pass before it); nullptr: none.
  std::function<bool(size_t l)> can_store_attend;
  std::function<void(CommandList&, size_t l, const Act& q, const Act& k, const Act& v, const Act& o,
                     const QkRmsNorm* qk)>
      store_attend;
};

// Records embed -> layers -> final norm -> lm_head.  logits_rows: the last
// rows whose logits are written (1 for a prompt chunk, n for all logits or a
// batch of sequences).
// What the layers recorded, over all of them (the embedding and the head are outside).
struct ForwardCounts {
  uint32_t layer_dispatches = 0, layer_barriers = 0;
};
// The steps of a forward are the embedding (0), the layers (1 .. L) and the head (L + 1); a command list may
// record a contiguous run [first, end) of them (bounded submissions: runtime/session/submit_plan.hpp).
struct ForwardSteps {
  size_t first = 0, end = SIZE_MAX;   // the default: every step
};
// What the head writes into b.logits: the lm_head's logits [logits_rows, vocab], or the final-normed
// hidden states [n, hidden] of every row (embeddings: logits_rows must be n, and the buffer's vocab-wide
// rows hold the hidden-wide ones, so vocab >= hidden).
enum class ForwardHead : uint8_t { logits, hidden };
// fused: rows up to the mat-vec limit (decode, batched decode) run the fused layer steps.
// activations: KernelConfig::set_activations (int8 records the unfused layer: the fused mat-vecs are f32 only).
// steps: the ones recorded into cmd; the same kernels in the same order as the whole pass, so a pass cut
// into several lists computes the same bits.
ForwardCounts record_forward(CommandList& cmd, const Model& model, const ModelConfig& c, const ForwardBuffers& b,
                             uint32_t n, uint32_t logits_rows, const ForwardAttention& attention, bool fused,
                             QuantActivations activations = QuantActivations::device, ForwardSteps steps = {},
                             ForwardHead head = ForwardHead::logits);

}  // namespace reach
