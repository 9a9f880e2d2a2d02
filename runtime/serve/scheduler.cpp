// The Scheduler's thread and its queue: submit, the loop that runs each turn's steps (scheduler_admit.cpp,
// scheduler_steps.cpp), and the end of a job (finish, fail, release).
#include "runtime/serve/scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/error.hpp"
#include "runtime/session/kv_pool.hpp"

namespace reach::serve {

Scheduler::Scheduler(Model& model, const SessionOptions& options, size_t parallel, size_t max_queue,
                     bool prefix_cache, Reload reload)
    : model_(&model), options_(options), reload_(std::move(reload)), max_queue_(max_queue),
      prefix_cache_(prefix_cache) {
  slots_.resize(std::max<size_t>(parallel, 1));
  if (options_.kv_pool) pool_options_ = options_.kv_pool->options();
  make_sessions();
  context_ = slots_[0].gen->session().capacity();
  thread_ = std::thread([this] { loop(); });
}

void Scheduler::make_sessions() {
  // A pool lives on its model's device: a model loaded again gets a new one of the same size.
  if (pool_options_ && !options_.kv_pool) options_.kv_pool = std::make_shared<KvPool>(*model_, *pool_options_);
  GenerationOptions go;
  go.session = options_;
  for (Slot& s : slots_) {
    s.gen = std::make_unique<Generation>(*model_, go);
    s.cached.clear();
  }
  batch_ = std::make_unique<DecodeBatch>(*model_, uint32_t(slots_.size()));
}

bool Scheduler::loading() const {
  std::lock_guard lock(mu_);
  return loading_;
}

uint64_t Scheduler::reloads() const {
  std::lock_guard lock(mu_);
  return totals_.device_reloads;
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
    if (stopping_ || loading_) return false;
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
      if (!admit(std::move(job))) break;   // the KV pool is full: the job waits, first in the queue
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
    publish_pool_counters();
    if (lost_ && !recover()) break;
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

bool Scheduler::recover() {
  const std::string message = lost_message_;
  JobEvent lost{"", true, FinishReason::stop, {}, message, true};
  {
    std::lock_guard lock(mu_);
    loading_ = true;
    // Queued jobs end now: their clients hear at once, rather than after the reload.
    for (auto& job : queue_) job->push(lost);
    queue_.clear();
  }
  for (Slot& slot : slots_)
    if (slot.job) {
      slot.cached.clear();
      release(slot, {"", true, FinishReason::stop, {int64_t(slot.job->ids.size()), slot.sampled}, message, true});
    }
  // The sessions' buffers and programs belong to the lost device: freed before it is (the pool last).
  batch_.reset();
  for (Slot& slot : slots_) {
    slot.gen.reset();
    slot.reply.reset();
    slot.cached.clear();
  }
  options_.kv_pool.reset();
  lost_ = false;
  if (!reload_) {
    stop("the GPU was lost and this server cannot load the model again: " + message);
    return false;
  }
  std::fprintf(stderr, "reach serve: %s\nreach serve: loading the model again on a new device\n", message.c_str());
  for (int attempt = 1;; ++attempt) {
    try {
      model_ = &reload_();
      make_sessions();
      break;
    } catch (const std::exception& e) {
      batch_.reset();
      for (Slot& slot : slots_) slot.gen.reset();
      options_.kv_pool.reset();
      std::fprintf(stderr, "reach serve: loading the model again failed (attempt %d): %s; retrying in 5 s\n", attempt,
                   e.what());
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, std::chrono::seconds(5), [&] { return stopping_; })) return false;
    }
  }
  std::fprintf(stderr, "reach serve: the model is loaded again; serving\n");
  std::fflush(stderr);
  std::lock_guard lock(mu_);
  loading_ = false;
  ++totals_.device_reloads;
  return true;
}

void Scheduler::fail_step(Slot& slot, const char* what, const std::exception& e) {
  const auto* err = dynamic_cast<const Error*>(&e);
  if (err && err->code() == ErrorCode::device_lost) {
    // recover() ends this job with the others, as a lost device and not as the request's failure.
    if (!lost_) lost_message_ = e.what();
    lost_ = true;
    return;
  }
  fail(slot, std::string(what) + ": " + e.what());
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

void Scheduler::publish_pool_counters() {
  if (!options_.kv_pool) return;
  const KvBlockPool& p = options_.kv_pool->blocks();
  std::lock_guard lock(mu_);
  totals_.kv_blocks_total = p.total();
  totals_.kv_blocks_used = p.used();
  totals_.kv_blocks_cached = p.cached();
  totals_.kv_prefix_hit_blocks = p.prefix_hits();
  totals_.kv_prefix_hit_tokens = p.prefix_hit_tokens();
}

void Scheduler::release(Slot& slot, JobEvent last) {
  // With a KV pool the slot keeps no blocks: its full ones stay cached in the pool's prefix index, for
  // any slot's next prompt, and the rest are free for the waiting jobs.
  if (options_.kv_pool && slot.gen) {
    slot.gen->session().rewind(0);
    slot.cached.clear();
  }
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
