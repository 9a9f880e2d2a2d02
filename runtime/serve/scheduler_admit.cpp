// The Scheduler's admission step: a queued job goes to the free slot whose cache shares the longest
// reusable prefix with its prompt (scheduler.hpp, "Prefix reuse"), which rewinds there; with a KV pool,
// to a free slot that maps the pool's cached blocks of the prompt and holds the job's blocks.
#include "runtime/serve/scheduler.hpp"

#include <algorithm>

#include "base/error.hpp"

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

void Scheduler::admit_paged(Slot& slot) {
  Session& s = slot.gen->session();
  const Job& job = *slot.job;
  const uint32_t mapped = prefix_cache_ && job.cache_prompt ? s.map_prefix(job.ids) : 0;
  const uint64_t rows = uint64_t(job.ids.size()) + uint64_t(std::max<int64_t>(job.max_tokens, 1));
  try {
    s.reserve_kv(uint32_t(std::min<uint64_t>(rows, s.capacity())));
  } catch (const Error& e) {
    s.rewind(0);   // the mapped blocks go back
    throw;
  }
  slot.cached.assign(job.ids.begin(), job.ids.begin() + mapped);
  slot.prefilled = mapped;
}

bool Scheduler::admit(std::shared_ptr<Job> job) {
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
    if (options_.kv_pool) {
      try {
        admit_paged(slot);
      } catch (const Error& e) {
        bool alone = false;
        {
          std::lock_guard lock(mu_);
          alone = busy_ == 1;   // this job only: every other block is free or cached, so it can never fit
          if (!alone && e.code() == ErrorCode::kv_pool_full) {   // wait for blocks, first in the queue
            queue_.push_front(std::move(slot.job));
            --busy_;
            ++totals_.kv_waits;
          }
        }
        if (!slot.job) return false;
        throw;
      }
      keep = uint32_t(slot.prefilled);
    }
    // The rest of the prompt fits, every id is valid.
    slot.gen->session().check_prefill(std::span<const int32_t>(slot.job->ids).subspan(keep));
  } catch (const std::exception& e) {
    fail_step(slot, "prefill failed", e);
    return true;
  }
  if (keep > 0) {
    std::lock_guard lock(mu_);
    ++totals_.prefix_hits;
    totals_.prefix_tokens_reused += keep;
  }
  return true;
}

}  // namespace reach::serve
