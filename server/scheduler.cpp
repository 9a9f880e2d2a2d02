#include "server/scheduler.hpp"

#include <algorithm>
#include <chrono>

#include "base/error.hpp"

namespace reach::server {

void Job::push(JobEvent e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

std::optional<JobEvent> Job::pop(int timeout_ms) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty(); }))
    return std::nullopt;
  JobEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

Scheduler::Scheduler(Model& model, const SessionOptions& options, size_t parallel, size_t max_queue)
    : model_(model), max_queue_(max_queue) {
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
    for (Slot& slot : slots_) {
      if (slot.job) continue;
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(mu_);
        while (!queue_.empty() && !job) {
          job = std::move(queue_.front());
          queue_.pop_front();
          if (job->cancelled) job.reset();
        }
        if (!job) break;
        ++busy_;
      }
      admit(slot, std::move(job));
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

void Scheduler::admit(Slot& slot, std::shared_ptr<Job> job) {
  slot.job = std::move(job);
  slot.sampled = 0;
  slot.next.reset();
  try {
    slot.gen->restart(slot.job->sampling, slot.job->stop_ids);   // position 0, a new sampler and decoder
    slot.gen->set_constraint(slot.job->json);
    slot.stop = std::make_unique<StopText>(slot.job->stop);
    slot.prefilled = 0;
    slot.gen->session().check_prefill(slot.job->ids);   // the whole prompt fits, every id is valid
  } catch (const std::exception& e) {
    fail(slot, std::string("prefill failed: ") + e.what());
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
      session.prefill(std::span<const int32_t>(ids.data() + slot.prefilled, n));
      slot.prefilled += n;
    } catch (const std::exception& e) {
      fail(slot, std::string("prefill failed: ") + e.what());
    }
    return;
  }
}

void Scheduler::sample_and_emit(Slot& slot) {
  Job& job = *slot.job;
  try {
    const GeneratedToken tok = slot.gen->next();
    ++slot.sampled;
    if (tok.stop) {
      finish(slot, FinishReason::stop, slot.gen->flush());
      return;
    }
    const std::string text = slot.stop->push(tok.text);
    if (!text.empty()) job.push({text});
    if (slot.stop->stopped()) { finish(slot, FinishReason::stop, ""); return; }
    if (slot.sampled >= job.max_tokens) { finish(slot, FinishReason::length, slot.gen->flush()); return; }
    slot.next = tok.id;
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
    // One sequence: its own decode program (the one-row matvec), exactly what `reach run` computes.
    if (sessions.size() == 1) sessions[0]->decode(ids[0]);
    else batch_->step(sessions, ids);
  } catch (const std::exception& e) {
    // A step that failed may have left any row half-written: every job in it ends.
    for (Slot* slot : active) fail(*slot, std::string("decode failed: ") + e.what());
  }
}

void Scheduler::finish(Slot& slot, FinishReason reason, const std::string& tail) {
  Job& job = *slot.job;
  JobEvent e;
  e.text = slot.stop->push(tail);
  if (slot.stop->stopped()) reason = FinishReason::stop;
  else e.text += slot.stop->flush();
  e.done = true;
  e.finish = reason;
  // Tokens sampled, the end token included when one ended the reply (the OpenAI API counts it too).
  e.usage = {int64_t(job.ids.size()), slot.sampled};
  release(slot, std::move(e));
}

void Scheduler::fail(Slot& slot, const std::string& message) {
  release(slot, {"", true, FinishReason::stop, {int64_t(slot.job->ids.size()), slot.sampled}, message});
}

void Scheduler::release(Slot& slot, JobEvent last) {
  // The slot is free before the client hears the end: a client that sends its next request at once
  // must find the slot free, not a spurious 503.
  std::shared_ptr<Job> job = std::move(slot.job);
  {
    std::lock_guard lock(mu_);
    --busy_;
  }
  job->push(std::move(last));
}

}  // namespace reach::server
