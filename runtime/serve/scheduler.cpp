// The Scheduler's thread and its queue: submit, the loop that runs each turn's steps (scheduler_admit.cpp,
// scheduler_steps.cpp), and the end of a job (finish, fail, release).
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

void Scheduler::stop(const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) stop_reason_ = reason;   // the first stop says why
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
  std::string reason;
  {
    std::lock_guard lock(mu_);
    reason = stop_reason_;
  }
  for (Slot& slot : slots_)
    if (slot.job) fail(slot, reason);
  std::lock_guard lock(mu_);
  for (auto& job : queue_) job->push({"", true, FinishReason::stop, {}, reason});
  queue_.clear();
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
