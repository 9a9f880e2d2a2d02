#pragma once
// The continuous-batching scheduler: owns N slots, each with its own reach Session, and is the only
// thread that touches the device.  Other threads (the server's request threads) submit Jobs (token ids,
// sampling, limits: request.hpp) and read each Job's event queue.  Each iteration of the scheduler thread (continuous batching):
//   1. admits queued jobs into free slots (no device work yet);
//   2. prefills one chunk of one admitted prompt, so that a long prompt never stalls running streams
//      for more than a chunk;
//   3. samples each decoding slot's next token from its logits and emits text (host work, per slot);
//   4. advances every decoding slot by that token in one DecodeBatch step (the linear layers run once
//      over all active rows, attention per sequence over its own KV cache).
// A finished, failed or cancelled job frees its slot at once; the next iteration can admit into it.
//
// A lost device (Error device_lost from any step: a driver reset, a timeout, memory running out) ends
// every job, running or queued, with an error event marked device_lost.  With a `reload` the scheduler
// then frees its sessions, calls reload (on its own thread) for a model on a new device, retrying every
// few seconds while that fails, and makes its sessions again; loading() is true meanwhile and submit()
// refuses jobs.  Without one it stops, as stop() with the lost device as the reason.
//
// Prefix reuse: a slot remembers the ids its KV cache holds (the last prompt and the reply tokens
// decoded after it).  A job goes to the free slot whose cache shares the longest prefix with its prompt;
// the session rewinds to that length and only the rest is prefilled.  Sound for every position scheme:
// a cached key or value at position p depends on the tokens up to p, p itself and the session's resolved
// schemes, which are fixed when the slot is made (l_test = the slot's context, so dynamic NTK's and
// LongRoPE's tables do not follow the prompt length; log n, CosA and Self-Extend's grouping depend on the
// query's position, applied at attention time, not stored).  Sliding-window ring caches limit how far
// back a session can rewind (Session::rewind_floor): a shorter match than that reuses nothing.
//
// A paged KV pool (SessionOptions::kv_pool, `reach serve --kv-size`) replaces the per-slot reuse: the
// slots' sessions share one pool, a finished job's full blocks stay in the pool's prefix index (cached,
// evicted least recently used first), and an admitted prompt maps the cached blocks of its leading
// tokens whichever slot computed them.  The scheme rules above still hold: the index is salted with the
// session's resolved schemes.  Admission holds the blocks of the whole job (prompt + max_tokens, within
// the context), so a running job never finds the pool full; a job the pool cannot hold yet waits in the
// queue, first in first out, and one that cannot fit even an empty pool fails, saying so.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/serve/counters.hpp"
#include "runtime/serve/reply_assembly.hpp"
#include "runtime/serve/request.hpp"
#include "runtime/session/decode_batch.hpp"
#include "runtime/session/generation.hpp"

namespace reach::serve {

class Scheduler {
 public:
  // `parallel` sessions of `options`, created now (a model or context too large fails here, not on a
  // request).  max_queue: jobs that may wait for a slot; submit() refuses beyond it.
  // prefix_cache false: every prompt is prefilled from position 0 (for comparison).
  // reload: frees the model it was given last (and its device) and returns a new one, as loaded at the
  // start; called after a lost device, once the sessions on the old model are gone.  It may throw.
  using Reload = std::function<Model&()>;
  Scheduler(Model& model, const SessionOptions& options, size_t parallel, size_t max_queue,
            bool prefix_cache = true, Reload reload = {});
  ~Scheduler();   // stop() and join

  // false when every slot is busy and max_queue jobs are already waiting, or while loading().
  bool submit(const std::shared_ptr<Job>& job);
  // True from a lost device until the model is loaded again (reload) and the sessions are made.
  bool loading() const;
  // Times the model was loaded again after a lost device.
  uint64_t reloads() const;
  // Ends every job, running or queued, with an error event carrying `reason` (after the step in progress),
  // refuses new ones, and ends the scheduler thread.
  void stop(const std::string& reason = "the server is shutting down");
  SchedulerStats stats() const;
  uint32_t context() const { return context_; }

 private:
  struct Slot {
    std::unique_ptr<Generation> gen;   // its session lives as long as the slot; restarted per job
    std::shared_ptr<Job> job;      // null: free
    std::unique_ptr<ReplyAssembly> reply;   // the job's text, logprob entries and finish reason
    int64_t sampled = 0;
    size_t prefilled = 0;          // prompt tokens in the cache; < ids.size(): still prefilling
    std::optional<int32_t> next;   // the token advance() feeds, set by sample_and_emit
    // The ids the session's KV cache holds, position by position (size == session position); cleared
    // when a failed step leaves the cache in doubt.  Outlives the job: the next prompt may share a prefix.
    std::vector<int32_t> cached;
  };

  void loop();
  // Into the slot pick_slot chooses; false: the KV pool cannot hold the job yet (the caller queues it again).
  bool admit(std::shared_ptr<Job> job);
  void admit_paged(Slot& slot);   // a paged admission: the pool's prefix, the job's blocks
  void publish_pool_counters();   // the pool's counters into totals_ (scheduler thread)
  // The free slot to admit `ids` into (the longest reusable prefix), and the positions it can keep.
  Slot* pick_slot(const Job& job, uint32_t& keep);
  uint32_t reusable_prefix(const Slot& slot, const Job& job) const;
  void prefill_chunk();
  void sample_and_emit(Slot& slot);
  void advance(std::vector<Slot*>& active);
  void finish(Slot& slot, FinishReason reason, const std::string& tail);
  void fail(Slot& slot, const std::string& message);
  void release(Slot& slot, JobEvent last);
  // A step's failure: the job ends with `what: message`; a lost device also sets lost_.
  void fail_step(Slot& slot, const char* what, const std::exception& e);
  void make_sessions();
  // After a lost device: ends every job, frees the sessions, reloads (retrying) and makes them again.
  // false when the scheduler stops meanwhile, or has no reload.
  bool recover();

  Model* model_;
  SessionOptions options_;
  // The KV pool's options (SessionOptions::kv_pool): after a lost device the old pool goes before its
  // device, and make_sessions makes one like it on the new model.
  std::optional<KvPoolOptions> pool_options_;
  Reload reload_;
  bool lost_ = false;            // a step saw the device lost (scheduler thread only)
  std::string lost_message_;
  uint32_t context_ = 0;
  size_t max_queue_ = 0;
  std::vector<Slot> slots_;
  std::unique_ptr<DecodeBatch> batch_;
  size_t prefill_turn_ = 0;   // round-robin over prefilling slots
  bool prefix_cache_ = true;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t busy_ = 0;      // slots with a job, under mu_ (for submit's limit and stats)
  SchedulerStats totals_;   // the running totals, under mu_ (slots, busy and queued are filled in by stats())
  bool stopping_ = false;
  bool loading_ = false;      // under mu_
  std::string stop_reason_;   // under mu_: the error the jobs left at stop() end with
  std::thread thread_;
};

}  // namespace reach::serve
