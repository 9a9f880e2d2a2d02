#include "server/http_exchange.hpp"

namespace reach::server {

void Exchange::reply(const HttpResponse& r) {
  metrics_.count_request(request_.path, r.status);
  post_(serialize(r, keep_alive()), true);
}

void Exchange::start_stream(int status, const std::string& content_type, const HeaderList& headers) {
  metrics_.count_request(request_.path, status);
  post_(stream_head(status, content_type, headers, keep_alive(), chunked()), false);
}

void Exchange::send_chunk(std::string_view data) {
  if (!data.empty()) post_(chunked() ? chunk(data) : std::string(data), false);
}

void Exchange::end_stream() { post_(chunked() ? std::string(last_chunk) : std::string(), true); }

void Exchange::watch(std::shared_ptr<Job> job) {
  std::lock_guard lock(mu_);
  job_ = std::move(job);
  if (gone_) job_->cancelled = true;
}

void Exchange::client_left() {
  std::lock_guard lock(mu_);
  gone_ = true;
  if (job_) job_->cancelled = true;
}

}  // namespace reach::server
