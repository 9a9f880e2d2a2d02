#pragma once
// `reach bench --parallel 1,2,4,8`: decode throughput of several sequences
// stepped together (runtime/session/decode_batch.hpp), as `reach serve` runs them.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/model.hpp"
#include "runtime/session/session.hpp"

namespace reach::cli {

struct ParallelBench {
  std::vector<uint32_t> streams;   // e.g. 1, 2, 4, 8
  uint32_t n_prompt = 0;           // each stream's prompt (prefilled before the timed decode)
  uint32_t n_gen = 0;              // tokens each stream generates per repetition
  int64_t reps = 1;
  std::string format = "md";       // md or csv
};

// Prints one row per stream count: aggregate decode tokens/s, per stream, per-token latency and one
// request's time (its prefill, while the other streams wait, plus n_gen batched steps).
void bench_parallel(Model& model, const SessionOptions& options, const ParallelBench& b,
                    const std::string& device_name);

}  // namespace reach::cli
