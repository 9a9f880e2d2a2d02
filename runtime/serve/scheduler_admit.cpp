// The Scheduler's admission step: a queued job goes to the free slot whose cache shares the longest
// reusable prefix with its prompt (scheduler.hpp, "Prefix reuse"), which rewinds there.
#include "runtime/serve/scheduler.hpp"

#include <algorithm>

namespace reach::serve {

uint32_t Scheduler::reusable_prefix(const Slot& slot, const Job& job) const {
  if (!prefix_cache_ || !job.cache_prompt || job.ids.empty()) return 0;
  const auto& a = slot.cached;
  const auto& b = job.ids;
  size_t k = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
  // At least one prompt token is prefilled again: its logits are the first sample's.
  k = std::min(k, b.size() - 1);
  // Below the floor a ring cache has overwritten keys those positions still need; 0 is always allowed.
  if (k < slot.gen->session().rewind_floor()) k = 0;
  return uint32_t(k);
}

Scheduler::Slot* Scheduler::pick_slot(const Job& job, uint32_t& keep) {
  Slot* best = nullptr;
  keep = 0;
  for (Slot& slot : slots_) {
    if (slot.job) continue;
    const uint32_t k = reusable_prefix(slot, job);
    // Ties go to the slot holding less, so that longer cached prompts stay for the jobs that share them.
    if (!best || k > keep || (k == keep && slot.cached.size() < best->cached.size())) {
      best = &slot;
      keep = k;
    }
  }
  return best;
}

void Scheduler::admit(std::shared_ptr<Job> job) {
  uint32_t keep = 0;
  Slot* picked = pick_slot(*job, keep);   // there is one: busy_ counted this job within the slots
  Slot& slot = *picked;
  slot.job = std::move(job);
  slot.sampled = 0;
  slot.next.reset();
  try {
    // Position `keep`, a new sampler and decoder.
    slot.gen->restart(slot.job->sampling, slot.job->stop_ids, keep);
    slot.cached.resize(keep);
    slot.prefilled = keep;
    slot.gen->set_logprobs(slot.job->logprobs);
    slot.gen->set_constraint(slot.job->json);
    slot.reply = std::make_unique<ReplyAssembly>(slot.job->stop,
                                                 slot.job->channels ? slot.gen->model().tokenizer() : nullptr,
                                                 slot.job->reply_prefix, slot.job->tool_calls);
    // The rest of the prompt fits, every id is valid.
    slot.gen->session().check_prefill(std::span<const int32_t>(slot.job->ids).subspan(keep));
  } catch (const std::exception& e) {
    fail_step(slot, "prefill failed", e);
    return;
  }
  if (keep > 0) {
    std::lock_guard lock(mu_);
    ++totals_.prefix_hits;
    totals_.prefix_tokens_reused += keep;
  }
}

}  // namespace reach::serve
