#pragma once
// The serving engine's counters: what the Scheduler has done since it started (server/http_metrics
// renders them for GET /metrics, /health reports the slots).
#include <cstddef>
#include <cstdint>

namespace reach::serve {

struct SchedulerStats {
  size_t slots = 0, busy = 0, queued = 0;
  // Totals since the server started (GET /metrics): tokens through prefill and decode, the device time
  // each took, and the prompts that reused a prefix a slot already held (and how many tokens that skipped).
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  uint64_t prefix_hits = 0, prefix_tokens_reused = 0;
  // Times the model was loaded again on a new device after the GPU was lost (Scheduler, "A lost device").
  uint64_t device_reloads = 0;
  // A paged KV pool (SessionOptions::kv_pool; all 0 without one): its blocks by state now, the full blocks
  // prompts mapped from it and the tokens they covered, and the jobs that waited for blocks.
  uint64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0;
  uint64_t kv_prefix_hit_blocks = 0, kv_prefix_hit_tokens = 0, kv_waits = 0;
};

}  // namespace reach::serve
