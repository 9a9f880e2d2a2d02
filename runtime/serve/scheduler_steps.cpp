// The Scheduler's device steps, each turn: one prefill chunk of one prompt, a sample (and the reply
// text it adds) for each decoding slot, and one decode step that advances them all.
#include "runtime/serve/scheduler.hpp"

#include <algorithm>
#include <chrono>

namespace reach::serve {

void Scheduler::prefill_chunk() {
  // The next prefilling slot after the last one served: several new prompts share the chunks fairly.
  for (size_t k = 0; k < slots_.size(); ++k) {
    Slot& slot = slots_[(prefill_turn_ + k) % slots_.size()];
    if (!slot.job || slot.prefilled >= slot.job->ids.size()) continue;
    prefill_turn_ = (prefill_turn_ + k + 1) % slots_.size();
    const std::vector<int32_t>& ids = slot.job->ids;
    Session& session = slot.gen->session();
    const size_t n = std::min<size_t>(session.chunk(), ids.size() - slot.prefilled);
    try {
      const auto t0 = std::chrono::steady_clock::now();
      session.prefill(std::span<const int32_t>(ids.data() + slot.prefilled, n));
      slot.cached.insert(slot.cached.end(), ids.begin() + ptrdiff_t(slot.prefilled),
                         ids.begin() + ptrdiff_t(slot.prefilled + n));
      slot.prefilled += n;
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
      std::lock_guard lock(mu_);
      totals_.prompt_tokens += n;
      totals_.prefill_seconds += took.count();
    } catch (const std::exception& e) {
      fail_step(slot, "prefill failed", e);
    }
    return;
  }
}

void Scheduler::sample_and_emit(Slot& slot) {
  Job& job = *slot.job;
  try {
    GeneratedToken tok = slot.gen->next();
    const int32_t id = tok.id;
    ++slot.sampled;
    if (tok.stop) {   // an end token is not part of the reply: no logprob entry either
      finish(slot, FinishReason::stop, slot.gen->flush());
      return;
    }
    JobEvent e = slot.reply->push(std::move(tok));
    if (!e.text.empty() || !e.reasoning.empty() || !e.calls.empty() || !e.logprobs.empty()) job.push(std::move(e));
    if (slot.reply->stopped()) { finish(slot, FinishReason::stop, ""); return; }
    if (slot.sampled >= job.max_tokens) { finish(slot, FinishReason::length, slot.gen->flush()); return; }
    slot.next = id;
  } catch (const std::exception& e) {
    fail_step(slot, "sampling failed", e);
  }
}

void Scheduler::advance(std::vector<Slot*>& active) {
  if (active.empty()) return;
  std::vector<Session*> sessions;
  std::vector<int32_t> ids;
  for (Slot* slot : active) {
    sessions.push_back(&slot->gen->session());
    ids.push_back(*slot->next);
    slot->next.reset();
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    // One sequence: its own decode program (the one-row matvec), exactly what `reach run` computes.
    if (sessions.size() == 1) sessions[0]->decode(ids[0]);
    else batch_->step(sessions, ids);
    for (size_t i = 0; i < active.size(); ++i) active[i]->cached.push_back(ids[i]);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    std::lock_guard lock(mu_);
    totals_.decode_seconds += took.count();
  } catch (const std::exception& e) {
    // A step that failed may have left any row half-written: every job in it ends.
    for (Slot* slot : active) fail_step(*slot, "decode failed", e);
  }
}

}  // namespace reach::serve
