#include "server/http_exchange.hpp"

#include <utility>

namespace reach::server {

void Exchange::reply(const HttpResponse& r) {
  answered_(request_.path, r.status);
  post_(serialize(r, keep_alive()), true);
}

void Exchange::start_stream(int status, const std::string& content_type, const HeaderList& headers) {
  answered_(request_.path, status);
  post_(stream_head(status, content_type, headers, keep_alive(), chunked()), false);
}

void Exchange::send_chunk(std::string_view data) {
  if (!data.empty()) post_(chunked() ? chunk(data) : std::string(data), false);
}

void Exchange::end_stream() { post_(chunked() ? std::string(last_chunk) : std::string(), true); }

void Exchange::on_gone(std::function<void()> cancel) {
  std::lock_guard lock(mu_);
  cancel_ = std::move(cancel);
  if (gone_ && cancel_) std::exchange(cancel_, nullptr)();
}

void Exchange::client_left() {
  std::lock_guard lock(mu_);
  gone_ = true;
  if (cancel_) std::exchange(cancel_, nullptr)();
}

}  // namespace reach::server
