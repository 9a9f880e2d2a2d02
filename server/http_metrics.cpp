#include "server/http_metrics.hpp"

#include <cstdio>

namespace reach::server {

namespace {

std::string_view endpoint_label(std::string_view path) {
  for (std::string_view route : {"/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions"})
    if (path == route) return route;
  return "other";
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const char* name, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " %.17g\n", v);
  out += name;
  out += buf;
}

}  // namespace

void Metrics::count_request(std::string_view path, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{std::string(endpoint_label(path)), status}];
}

std::string Metrics::render(const serve::SchedulerStats& s) const {
  std::string out;
  family(out, "reach_http_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, n] : requests_)
      out += "reach_http_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
             "\"} " + std::to_string(n) + "\n";
  }
  family(out, "reach_prompt_tokens_total", "counter", "Prompt tokens run through prefill.");
  sample(out, "reach_prompt_tokens_total", double(s.prompt_tokens));
  family(out, "reach_generated_tokens_total", "counter", "Tokens sampled, end tokens included.");
  sample(out, "reach_generated_tokens_total", double(s.generated_tokens));
  // Rates over the device time spent in each phase since the start (not over wall time, which
  // includes idle stretches).
  family(out, "reach_prefill_tokens_per_second", "gauge",
         "Prefill tokens per second of prefill time, since the start.");
  sample(out, "reach_prefill_tokens_per_second",
         s.prefill_seconds > 0 ? double(s.prompt_tokens) / s.prefill_seconds : 0);
  family(out, "reach_decode_tokens_per_second", "gauge",
         "Generated tokens per second of decode time, since the start.");
  sample(out, "reach_decode_tokens_per_second",
         s.decode_seconds > 0 ? double(s.generated_tokens) / s.decode_seconds : 0);
  family(out, "reach_queue_depth", "gauge", "Requests waiting for a slot.");
  sample(out, "reach_queue_depth", double(s.queued));
  family(out, "reach_slots_busy", "gauge", "Slots generating or prefilling.");
  sample(out, "reach_slots_busy", double(s.busy));
  family(out, "reach_slots", "gauge", "Slots (sequences generated at once).");
  sample(out, "reach_slots", double(s.slots));
  family(out, "reach_prefix_cache_hits_total", "counter", "Prompts that reused a prefix a slot already held.");
  sample(out, "reach_prefix_cache_hits_total", double(s.prefix_hits));
  family(out, "reach_prefix_cache_reused_tokens_total", "counter", "Prompt tokens the prefix cache let prefill skip.");
  sample(out, "reach_prefix_cache_reused_tokens_total", double(s.prefix_tokens_reused));
  if (s.kv_blocks_total) {   // a paged KV pool (reach serve --kv-size)
    family(out, "reach_kv_blocks", "gauge", "Blocks of the paged KV pool.");
    sample(out, "reach_kv_blocks", double(s.kv_blocks_total));
    family(out, "reach_kv_blocks_used", "gauge", "KV blocks held by running requests.");
    sample(out, "reach_kv_blocks_used", double(s.kv_blocks_used));
    family(out, "reach_kv_blocks_cached", "gauge", "KV blocks no request holds, kept for later prompts' prefixes.");
    sample(out, "reach_kv_blocks_cached", double(s.kv_blocks_cached));
    family(out, "reach_kv_prefix_hit_blocks_total", "counter", "KV blocks prompts mapped from the pool.");
    sample(out, "reach_kv_prefix_hit_blocks_total", double(s.kv_prefix_hit_blocks));
    family(out, "reach_kv_prefix_hit_tokens_total", "counter", "Prompt tokens those blocks held.");
    sample(out, "reach_kv_prefix_hit_tokens_total", double(s.kv_prefix_hit_tokens));
    family(out, "reach_kv_admissions_deferred_total", "counter", "Times a request waited for KV blocks.");
    sample(out, "reach_kv_admissions_deferred_total", double(s.kv_waits));
  }
  family(out, "reach_device_reloads_total", "counter", "Times the model was loaded again after the GPU was lost.");
  sample(out, "reach_device_reloads_total", double(s.device_reloads));
  return out;
}

}  // namespace reach::server
