#include "runtime/serve/scheduler.hpp"

#include <algorithm>
#include <chrono>

#include "base/error.hpp"

namespace reach::serve {

Scheduler::Scheduler(Model& model, const SessionOptions& options, size_t parallel, size_t max_queue,
                     bool prefix_cache)
    : model_(model), max_queue_(max_queue), prefix_cache_(prefix_cache) {
  slots_.resize(std::max<size_t>(parallel, 1));
  GenerationOptions go;
  go.session = options;
  for (Slot& s : slots_) s.gen = std::make_unique<Generation>(model, go);
  batch_ = std::make_unique<DecodeBatch>(model, uint32_t(slots_.size()));
  context_ = slots_[0].gen->session().capacity();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    const size_t free_slots = slots_.size() - busy_;
    if (queue_.size() >= free_slots + max_queue_) return false;
    queue_.push_back(job);
  }
  cv_.notify_all();
  return true;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats s = totals_;
  s.slots = slots_.size();
  s.busy = busy_;
  s.queued = queue_.size();
  return s;
}

void Scheduler::loop() {
  std::vector<Slot*> active;
  for (;;) {
    // Admit queued jobs into free slots.  A job whose client left while queued is dropped.
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(mu_);
        if (busy_ == slots_.size()) break;
        while (!queue_.empty() && !job) {
          job = std::move(queue_.front());
          queue_.pop_front();
          if (job->cancelled) job.reset();
        }
        if (!job) break;
        ++busy_;
      }
      admit(std::move(job));
    }
    for (Slot& slot : slots_)
      if (slot.job && slot.job->cancelled) finish(slot, FinishReason::stop, "");
    prefill_chunk();
    active.clear();
    for (Slot& slot : slots_) {
      if (!slot.job || slot.prefilled < slot.job->ids.size()) continue;
      sample_and_emit(slot);
      if (slot.job) active.push_back(&slot);
    }
    advance(active);
    std::unique_lock lock(mu_);
    if (stopping_) break;
    if (busy_ == 0) cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
  }
  for (Slot& slot : slots_)
    if (slot.job) fail(slot, "the server is shutting down");
  std::lock_guard lock(mu_);
  for (auto& job : queue_) job->push({"", true, FinishReason::stop, {}, "the server is shutting down"});
  queue_.clear();
}

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
                                                 slot.job->channels ? slot.gen->model().tokenizer() : nullptr);
    // The rest of the prompt fits, every id is valid.
    slot.gen->session().check_prefill(std::span<const int32_t>(slot.job->ids).subspan(keep));
  } catch (const std::exception& e) {
    fail(slot, std::string("prefill failed: ") + e.what());
    return;
  }
  if (keep > 0) {
    std::lock_guard lock(mu_);
    ++totals_.prefix_hits;
    totals_.prefix_tokens_reused += keep;
  }
}

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
      fail(slot, std::string("prefill failed: ") + e.what());
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
    if (!e.text.empty() || !e.reasoning.empty() || !e.logprobs.empty()) job.push(std::move(e));
    if (slot.reply->stopped()) { finish(slot, FinishReason::stop, ""); return; }
    if (slot.sampled >= job.max_tokens) { finish(slot, FinishReason::length, slot.gen->flush()); return; }
    slot.next = id;
  } catch (const std::exception& e) {
    fail(slot, std::string("sampling failed: ") + e.what());
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
    for (Slot* slot : active) fail(*slot, std::string("decode failed: ") + e.what());
  }
}

void Scheduler::finish(Slot& slot, FinishReason reason, const std::string& tail) {
  JobEvent e = slot.reply->finish(reason, tail);
  // Tokens sampled, the end token included when one ended the reply (the OpenAI API counts it too).
  e.usage = {int64_t(slot.job->ids.size()), slot.sampled};
  release(slot, std::move(e));
}

void Scheduler::fail(Slot& slot, const std::string& message) {
  slot.cached.clear();   // the cache may hold a half-written step: the next job starts at 0
  release(slot, {"", true, FinishReason::stop, {int64_t(slot.job->ids.size()), slot.sampled}, message});
}

void Scheduler::release(Slot& slot, JobEvent last) {
  // The slot is free before the client hears the end: a client that sends its next request at once
  // must find the slot free, not a spurious 503.
  std::shared_ptr<Job> job = std::move(slot.job);
  {
    std::lock_guard lock(mu_);
    --busy_;
    totals_.generated_tokens += uint64_t(slot.sampled);   // the usage each reply reports
  }
  job->push(std::move(last));
}

}  // namespace reach::serve
