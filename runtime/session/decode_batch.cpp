#include "runtime/session/decode_batch.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/transfer.hpp"
#include "runtime/session/forward.hpp"

namespace reach {

namespace {

// Programs kept: a server's slot set changes as requests come and go, but the
// same few lists recur (all slots busy, one free ...).
constexpr size_t kMaxPrograms = 8;

}  // namespace

DecodeBatch::DecodeBatch(Model& model, uint32_t max_rows) : model_(model), max_rows_(max_rows) {
  if (max_rows == 0) throw Error(ErrorCode::invalid_argument, "a decode batch needs at least one row");
  const ModelConfig& c = model.config();
  const uint64_t d = uint64_t(c.head_dim), qd = uint64_t(c.n_heads) * d, kvd = uint64_t(c.n_kv_heads) * d,
                 n = max_rows;
  // Each row's attention binds its q / k / v / out row at an offset. Where rows do not start at binding
  // offsets (minStorageBufferOffsetAlignment above a row's bytes: 256 on Android), each row's attention
  // works on copies in slots that do: q, k, v copied in, out copied back.
  const uint64_t align = std::max<uint64_t>(model.device().caps().min_storage_buffer_offset_alignment, 1);
  if ((qd * 4) % align || (kvd * 4) % align) {
    q_slot_ = (qd * 4 + align - 1) / align * align;
    kv_slot_ = (kvd * 4 + align - 1) / align * align;
  }
  Allocator& A = model.allocator();
  const uint64_t slot_bytes = n * 2 * (q_slot_ + kv_slot_);
  A.require(Arena::scratch, ForwardScratch::activation_bytes(c, n) + slot_bytes,
            "activations for a decode batch of " + std::to_string(n) + " sequences", "use fewer parallel sequences");
  A.require(Arena::readback, ForwardScratch::logits_bytes(c, n),
            "the logits of a decode batch of " + std::to_string(n) + " sequences", "use fewer parallel sequences");
  fwd_ = ForwardScratch::allocate(A, c, n, "batch ");
  if (slot_bytes) row_slots_ = A.allocate(Arena::scratch, slot_bytes, "batch rows' aligned q, k, v and out");
}

Act DecodeBatch::slot(Slot which, uint32_t row, uint32_t cols) const {
  // Slots in order: every row's q, then out, then k, then v.
  const uint64_t n = max_rows_;
  const uint64_t base[] = {0, n * q_slot_, 2 * n * q_slot_, 2 * n * q_slot_ + n * kv_slot_};
  const uint64_t stride = which == Slot::q || which == Slot::out ? q_slot_ : kv_slot_;
  return Act{&row_slots_, base[int(which)] + row * stride, 1, cols};
}

void DecodeBatch::check(std::span<Session* const> sessions, std::span<const int32_t> ids) const {
  if (sessions.empty()) throw Error(ErrorCode::invalid_argument, "a batched decode step needs at least one session");
  if (sessions.size() != ids.size())
    throw Error(ErrorCode::invalid_argument, "a batched decode step got " + std::to_string(sessions.size()) +
                                                 " sessions but " + std::to_string(ids.size()) + " token ids");
  if (sessions.size() > max_rows_)
    throw Error(ErrorCode::invalid_argument, "a batched decode step of " + std::to_string(sessions.size()) +
                                                 " sessions exceeds this batch's " + std::to_string(max_rows_) +
                                                 " rows: step at most that many at once");
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Session* s = sessions[i];
    const std::string which = "session " + std::to_string(i) + " of the batch";
    if (!s) throw Error(ErrorCode::invalid_argument, which + " is null");
    if (&s->model() != &model_)
      throw Error(ErrorCode::invalid_argument, which + " belongs to another model: batch only sessions of one model");
    for (size_t j = 0; j < i; ++j)
      if (sessions[j] == s)
        throw Error(ErrorCode::invalid_argument, which + " is also session " + std::to_string(j) +
                                                     ": each session takes at most one token per step");
    if (s->decode_pending())
      throw Error(ErrorCode::invalid_argument,
                  which + " has a decode_async step in flight: poll_decode / wait_decode until it is done first");
    s->check_decode(ids[i]);
  }
}

bool DecodeBatch::share_attention(std::span<Session* const> sessions) {
  if (sessions.size() < 2) return false;
  for (Session* s : sessions.subspan(1))
    if (!sessions[0]->shares_attention(*s)) return false;
  const uint64_t step = (sessions[0]->step_record().size() + 15) / 16 * 16;
  const uint64_t scratch = (sessions[0]->decode_scratch_bytes() + 15) / 16 * 16;
  if (step <= step_stride_ && scratch <= scratch_stride_) return true;
  // Larger records than the buffers hold: new buffers, and no program may still bind the old ones.
  programs_.clear();
  last_ = nullptr;
  Allocator& A = model_.allocator();
  const uint64_t n = max_rows_, step_stride = std::max(step, step_stride_),
                 scratch_stride = std::max(scratch, scratch_stride_);
  A.require(Arena::scratch, n * scratch_stride, "the decode scratch of a batch of " + std::to_string(n) + " sequences",
            "use fewer parallel sequences");
  steps_ = A.allocate(Arena::staging, n * step_stride, "batch rows' step params and block tables");
  attn_scratch_ = A.allocate(Arena::scratch, n * scratch_stride, "batch rows' decode scratch");
  const std::vector<uint8_t> zeros(size_t(n * scratch_stride), 0);
  Transfer(A).upload(attn_scratch_, 0, zeros.data(), zeros.size());
  step_stride_ = step_stride;
  scratch_stride_ = scratch_stride;
  return true;
}

DecodeBatch::Program& DecodeBatch::program(std::span<Session* const> sessions) {
  std::vector<uint64_t> key;
  for (Session* s : sessions) key.push_back(s->serial());
  const bool shared = share_attention(sessions);   // may drop every program (new buffers)
  for (auto it = programs_.begin(); it != programs_.end(); ++it)
    if (it->key == key) {
      programs_.splice(programs_.begin(), programs_, it);
      return programs_.front();
    }
  if (programs_.size() >= kMaxPrograms) {
    if (last_ == programs_.back().parts.get()) last_ = nullptr;
    programs_.pop_back();
  }
  // The recorder outlives this call (a changed cut records again): it keeps the rows' sessions, which
  // live while the key names them.
  std::vector<Session*> rows(sessions.begin(), sessions.end());
  Program p{key,
            std::make_unique<SubmitParts>(
                model_.device(), sessions[0]->options().profile, sessions[0]->submit_bound(),
                [this, rows, shared](CommandList& cmd, ForwardSteps steps) { return record(cmd, rows, steps, shared); },
                step_costs(sessions, true), scale_ > 0 ? scale_ : 1, scale_ > 0),
            shared};
  programs_.push_front(std::move(p));
  return programs_.front();
}

std::vector<double> DecodeBatch::step_costs(std::span<Session* const> sessions, bool at_capacity) const {
  std::vector<uint32_t> keys;
  for (Session* s : sessions) keys.push_back(at_capacity ? s->capacity() : s->position() + 1);
  return forward_step_costs(model_, sessions[0]->config(), sessions[0]->schemes().layers, keys,
                            uint32_t(sessions.size()));
}

ForwardCounts DecodeBatch::record(CommandList& cmd, const std::vector<Session*>& sessions, ForwardSteps steps,
                                  bool shared) {
  const uint32_t n = uint32_t(sessions.size());
  const ForwardBuffers b = fwd_.buffers();
  ForwardAttention attention;
  // Row i belongs to sessions[i]: its new k/v go to that session's cache, its q attends over it.
  auto row = [](const Act& a, uint32_t i) { return Act{a.buffer, a.offset + uint64_t(i) * a.cols * 4, 1, a.cols}; };
  const bool slots = q_slot_ != 0;
  auto copy_row = [](CommandList& cmd, const Act& from, const Act& to) { cmd.copy(from.range(), to.range()); };
  attention.store = [&, row, slots, copy_row](CommandList& cmd, size_t l, const Act&, const Act& k, const Act& v) {
    if (slots) {
      for (uint32_t i = 0; i < n; ++i) {
        copy_row(cmd, row(k, i), slot(Slot::k, i, k.cols));
        copy_row(cmd, row(v, i), slot(Slot::v, i, v.cols));
      }
      cmd.barrier();
    }
    for (uint32_t i = 0; i < n; ++i)
      sessions[i]->record_store_kv(cmd, l, slots ? slot(Slot::k, i, k.cols) : row(k, i),
                                   slots ? slot(Slot::v, i, v.cols) : row(v, i));
  };
  attention.attend = [&, row, slots, copy_row](CommandList& cmd, size_t l, const Act& q, const Act& o) {
    if (slots) {
      for (uint32_t i = 0; i < n; ++i) copy_row(cmd, row(q, i), slot(Slot::q, i, q.cols));
      cmd.barrier();
    }
    for (uint32_t i = 0; i < n; ++i)
      sessions[i]->record_attend(cmd, l, slots ? slot(Slot::q, i, q.cols) : row(q, i),
                                 slots ? slot(Slot::out, i, o.cols) : row(o, i), 1);
    if (slots) {   // record_forward's barrier after attend covers these copies
      cmd.barrier();
      for (uint32_t i = 0; i < n; ++i) copy_row(cmd, slot(Slot::out, i, o.cols), row(o, i));
    }
  };
  if (shared) {
    // One dispatch per layer: the rows' q / k / v / out from row 0 on (bound whole, so no row needs an
    // aligned offset), each row's step record and scratch at its stride.  The fused step where the
    // sessions decode fused and the layer allows it; else one kv_store and one split-K decode for all rows.
    const BufferRange all_steps = steps_.range(0, n * step_stride_), all_scratch = attn_scratch_.range(0, n * scratch_stride_);
    const DecodeRows drows{n, step_stride_, scratch_stride_};
    attention.store = [&, all_steps, drows](CommandList& cmd, size_t l, const Act&, const Act& k, const Act& v) {
      sessions[0]->record_store_kv_rows(cmd, l, k, v, all_steps, drows);
    };
    attention.attend = [&, all_steps, all_scratch, drows](CommandList& cmd, size_t l, const Act& q, const Act& o) {
      sessions[0]->record_attend_rows(cmd, l, q, o, all_steps, all_scratch, drows);
    };
    attention.can_store_attend = [&](size_t l) {
      return sessions[0]->options().fused_decode && sessions[0]->can_store_attend(l);
    };
    attention.store_attend = [&, all_steps, all_scratch, drows](CommandList& cmd, size_t l, const Act& q, const Act& k,
                                                                const Act& v, const Act& o, const QkRmsNorm* qk) {
      sessions[0]->record_store_attend_rows(cmd, l, q, k, v, o, qk, all_steps, all_scratch, drows);
    };
  } else if (sessions[0]->options().fused_decode && !slots) {   // the fused step binds the rows themselves
    attention.can_store_attend = [&](size_t l) {
      for (Session* s : sessions)
        if (!s->can_store_attend(l)) return false;
      return true;
    };
    attention.store_attend = [&](CommandList& cmd, size_t l, const Act& q, const Act& k, const Act& v, const Act& o,
                                 const QkRmsNorm* qk) {
      // Each session's fused step binds only its own cache and scratch: no barrier between them.
      for (uint32_t i = 0; i < n; ++i)
        sessions[i]->record_store_attend(cmd, l, Act{q.buffer, q.offset + uint64_t(i) * q.cols * 4, 1, q.cols},
                                         Act{k.buffer, k.offset + uint64_t(i) * k.cols * 4, 1, k.cols},
                                         Act{v.buffer, v.offset + uint64_t(i) * v.cols * 4, 1, v.cols},
                                         Act{o.buffer, o.offset + uint64_t(i) * o.cols * 4, 1, o.cols}, qk);
    };
  }
  return record_forward(cmd, model_, sessions[0]->config(), b, n, n, attention, sessions[0]->options().fused_decode,
                        sessions[0]->activations().decode, steps);
}

void DecodeBatch::step(std::span<Session* const> sessions, std::span<const int32_t> ids) {
  check(sessions, ids);
  const uint32_t n = uint32_t(sessions.size());
  const uint64_t V = uint64_t(model_.config().vocab_size);
  Program& prog = program(sessions);
  SubmitParts& parts = *prog.parts;
  for (uint32_t i = 0; i < n; ++i) sessions[i]->begin_batch_row(ids[i]);   // each row's StepParams
  if (prog.shared)
    for (uint32_t i = 0; i < n; ++i) {
      const std::span<const uint8_t> rec = sessions[i]->step_record();
      std::memcpy(static_cast<uint8_t*>(steps_.mapped()) + i * step_stride_, rec.data(), rec.size());
    }
  std::copy(ids.begin(), ids.end(), static_cast<int32_t*>(fwd_.ids.mapped()));
  parts.run(parts.timed() ? step_costs(sessions, false) : std::vector<double>{});
  last_ = &parts;
  if (parts.measured()) scale_ = parts.scale();
  logits_.resize(size_t(n * V));
  Transfer T(model_.allocator());
  T.download(fwd_.logits, 0, logits_.data(), n * V * 4);
  for (uint32_t i = 0; i < n; ++i) sessions[i]->finish_batch_row(logits_.data() + i * V);
}

}  // namespace reach
