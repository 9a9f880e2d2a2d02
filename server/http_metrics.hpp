#pragma once
// GET /metrics (served by openai_routes): the server's counters and the scheduler's totals in the Prometheus text format
// (version 0.0.4).  Requests are counted by route and status; any path that is not a route counts as
// "other", so that clients cannot grow the label set.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/serve/counters.hpp"

namespace reach::server {

class Metrics {
 public:
  void count_request(std::string_view path, int status);
  std::string render(const serve::SchedulerStats& s) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
};

}  // namespace reach::server
