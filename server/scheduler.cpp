#include "server/scheduler.hpp"

#include <algorithm>
#include <chrono>

#include "base/error.hpp"

namespace reach::server {

namespace {
// Code points in UTF-8 text: the bytes that do not continue a character.
size_t utf8_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
}  // namespace

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
  slot.logprobs.clear();
  slot.text_chars = 0;
  slot.emitted_chars = 0;
  try {
    // Position `keep`, a new sampler and decoder.
    slot.gen->restart(slot.job->sampling, slot.job->stop_ids, keep);
    slot.cached.resize(keep);
    slot.prefilled = keep;
    slot.gen->set_logprobs(slot.job->logprobs);
    slot.gen->set_constraint(slot.job->json);
    slot.reply = std::make_unique<ReplyText>(slot.job->stop,
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
    ++slot.sampled;
    if (tok.stop) {   // an end token is not part of the reply: no logprob entry either
      finish(slot, FinishReason::stop, slot.gen->flush());
      return;
    }
    if (tok.logprob) {
      // Where the token's text starts in the reply: the characters decoded before it (a token that ends
      // no character yet starts at the one it helps complete).
      tok.logprob->text_offset = slot.text_chars;
      slot.logprobs.push_back(std::move(*tok.logprob));
    }
    slot.text_chars += utf8_chars(tok.text);
    ReplyPiece piece = slot.reply->push(tok.id, tok.text);
    slot.emitted_chars += utf8_chars(piece.content);
    JobEvent e;
    e.text = std::move(piece.content);
    e.reasoning = std::move(piece.reasoning);
    e.logprobs = take_logprobs(slot, false);
    if (!e.text.empty() || !e.reasoning.empty() || !e.logprobs.empty()) job.push(std::move(e));
    if (slot.reply->stopped()) { finish(slot, FinishReason::stop, ""); return; }
    if (slot.sampled >= job.max_tokens) { finish(slot, FinishReason::length, slot.gen->flush()); return; }
    slot.next = tok.id;
  } catch (const std::exception& e) {
    fail(slot, std::string("sampling failed: ") + e.what());
  }
}

std::vector<TokenLogprob> Scheduler::take_logprobs(Slot& slot, bool all) {
  std::vector<TokenLogprob> out;
  size_t n = 0;
  while (n < slot.logprobs.size() && (all || slot.logprobs[n].text_offset < slot.emitted_chars)) ++n;
  out.assign(std::make_move_iterator(slot.logprobs.begin()), std::make_move_iterator(slot.logprobs.begin() + ptrdiff_t(n)));
  slot.logprobs.erase(slot.logprobs.begin(), slot.logprobs.begin() + ptrdiff_t(n));
  if (all) slot.logprobs.clear();
  return out;
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
  Job& job = *slot.job;
  JobEvent e;
  ReplyPiece piece = slot.reply->finish(tail);
  if (slot.reply->stopped()) reason = FinishReason::stop;
  e.text = std::move(piece.content);
  e.reasoning = std::move(piece.reasoning);
  e.done = true;
  e.finish = reason;
  slot.emitted_chars += utf8_chars(e.text);
  // A stop string cut the reply: the tokens past the cut are left out, as their text is.
  e.logprobs = take_logprobs(slot, !slot.reply->stopped());
  // Tokens sampled, the end token included when one ended the reply (the OpenAI API counts it too).
  e.usage = {int64_t(job.ids.size()), slot.sampled};
  release(slot, std::move(e));
}

void Scheduler::fail(Slot& slot, const std::string& message) {
  slot.cached.clear();   // the cache may hold a half-written step: the next job starts at 0
  slot.logprobs.clear();
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

}  // namespace reach::server
