#pragma once
// One decode step for several sequences at once (continuous batching).
//
// The linear layers, norms and the lm_head run once over M rows (one row per
// sequence, M = the sessions stepped); each row's attention runs over its own
// Session's KV cache with that session's StepParams (position) and decode
// scratch.  Where every row's session shares its attention with the first's
// (Session::shares_attention: one KV pool, scheme and capacity), one dispatch
// per layer attends for all rows, each reading its own step record (position,
// block table) and scratch from the batch's copies (the fused step, or without it
// one kv_store and one split-K decode for all rows); else one per row.  After step(), every session's logits() and position() are what
// decode(id) alone would have given, up to float rounding while M > 1 goes
// through the GEMM kernel rather than the one-row matvec.
//
// A program is recorded per ordered list of sessions and replayed while the
// list stays the same; a few are cached (least recently used dropped first),
// keyed by Session::serial() so a destroyed session's programs never run.
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "engine/command.hpp"
#include "engine/memory.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/forward.hpp"
#include "runtime/session/session.hpp"
#include "runtime/session/submit_parts.hpp"

namespace reach {

class DecodeBatch {
 public:
  // Up to max_rows sequences per step, all of `model`.
  DecodeBatch(Model& model, uint32_t max_rows);
  DecodeBatch(const DecodeBatch&) = delete;
  DecodeBatch& operator=(const DecodeBatch&) = delete;

  // Appends ids[i] to sessions[i] in one step.  Throws invalid_argument (no
  // session changed) for: an empty list, more than max_rows sessions, a
  // length mismatch, a null or repeated session, one of another model or
  // with a decode_async step in flight, a bad id; context_overflow for a full
  // session.
  void step(std::span<Session* const> sessions, std::span<const int32_t> ids);

  // What step() checks before it touches anything (the same errors).
  void check(std::span<Session* const> sessions, std::span<const int32_t> ids) const;

  uint32_t max_rows() const { return max_rows_; }
  // Submissions the last step was cut into (runtime/session/submit_plan.hpp); 0 before the first.
  uint32_t last_submissions() const { return last_ ? uint32_t(last_->size()) : 0; }
  // The layers' dispatches the last step recorded (all rows, all layers); 0 before the first.
  uint32_t last_layer_dispatches() const { return last_ ? last_->counts().layer_dispatches : 0; }
  // GPU time per dispatch of the last step, where the first session's options ask for a profile.
  std::vector<KernelTiming> last_timings() const { return last_ ? last_->timings() : std::vector<KernelTiming>{}; }
  Model& model() const { return model_; }

 private:
  struct Program {
    std::vector<uint64_t> key;   // the sessions' serials, in row order
    std::unique_ptr<SubmitParts> parts;
    bool shared = false;         // one attention dispatch per layer for all rows (steps_, attn_scratch_)
  };
  Program& program(std::span<Session* const> sessions);
  ForwardCounts record(CommandList& cmd, const std::vector<Session*>& sessions, ForwardSteps steps, bool shared);
  // Whether the rows can share attention dispatches; makes steps_ and attn_scratch_ large enough for them
  // (a larger need drops the programs recorded over the old buffers).
  bool share_attention(std::span<Session* const> sessions);
  // Each step's estimated cost with every row at its session's position (at_capacity: at its capacity).
  std::vector<double> step_costs(std::span<Session* const> sessions, bool at_capacity) const;
  enum class Slot { q, out, k, v };
  Act slot(Slot which, uint32_t row, uint32_t cols) const;   // a row's aligned copy in row_slots_

  Model& model_;
  uint32_t max_rows_ = 0;
  ForwardScratch fwd_;   // token ids, activations and logits of max_rows rows
  std::vector<float> logits_;
  // > 0 where a row of q / k,v does not end at a binding offset: the bytes of one row's aligned slot.
  uint64_t q_slot_ = 0, kv_slot_ = 0;
  Buffer row_slots_;   // q_slot_ > 0: the rows' attention inputs and outputs at aligned offsets
  // Shared attention: max_rows step records (copied from the sessions before each step) and decode
  // scratches (zeroed once: the fused step leaves its counters zeroed), a stride apart.
  Buffer steps_, attn_scratch_;
  uint64_t step_stride_ = 0, scratch_stride_ = 0;
  std::list<Program> programs_;   // most recently used first
  // ns per cost unit the programs measured last (a new program starts from it); 0: none yet.
  double scale_ = 0;
  const SubmitParts* last_ = nullptr;
};

}  // namespace reach
