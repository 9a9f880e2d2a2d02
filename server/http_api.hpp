#pragma once
// The routes of `reach serve`: authentication, the quick answers the I/O thread gives itself
// (/health, /v1/models, /metrics, errors), and the generation requests a worker thread serves
// (parse, tokenize, submit the Job, relay its events as one JSON body or as server-sent events).
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/model/model.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"
#include "server/http_exchange.hpp"
#include "server/http_metrics.hpp"
#include "server/http_server.hpp"
#include "server/scheduler.hpp"

namespace reach::server {

class ApiRoutes {
 public:
  ApiRoutes(Model& model, Scheduler& scheduler, const HttpOptions& options, Metrics& metrics);

  // The answer to a request that needs no generation (or is refused before one); nullopt: a
  // generation request, for generate() on a worker.
  std::optional<HttpResponse> quick(const HttpRequest& req);
  // A worker thread: answers a generation request through `ex`.  Returns when the answer is sent, the
  // client is gone or the server stops.
  void generate(Exchange& ex);

 private:
  std::shared_ptr<Job> make_job(const GenerationRequest& r);
  std::string new_id(Endpoint ep);
  bool authorized(const HttpRequest& req) const;

  Model& model_;
  Scheduler& scheduler_;
  HttpOptions options_;
  Metrics& metrics_;
  Tokenizer tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  int64_t started_ = 0;
  std::atomic<uint64_t> next_id_{1};
  uint64_t id_salt_ = 0;
};

}  // namespace reach::server
