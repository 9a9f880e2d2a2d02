#pragma once
// The routes of `reach serve`, the OpenAI API over the serving engine (runtime/serve): the HttpHandler
// the HTTP server hands every request to.  Authentication, the quick answers the I/O thread gives
// (/health, /v1/models, /metrics, errors), and the generation requests a worker thread serves
// (parse the JSON, tokenize, map it to a serve::Request, submit the Job, relay its events as one JSON
// body or as server-sent events).  It owns the request counters of /metrics.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/model/model.hpp"
#include "runtime/serve/scheduler.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"
#include "server/http_handler.hpp"
#include "server/http_metrics.hpp"
#include "server/openai_api.hpp"
#include "server/openai_embeddings.hpp"

namespace reach::server {

struct ApiOptions {
  std::string api_key;    // non-empty: every route but /health and /metrics needs "Authorization: Bearer KEY"
  std::string model_id;   // the name /v1/models lists and requests must use (or omit)
};

class OpenAiRoutes : public HttpHandler {
 public:
  // The model is read here only: the routes outlive it when the scheduler loads it again.
  OpenAiRoutes(const Model& model, serve::Scheduler& scheduler, const ApiOptions& options);

  // The answer to a request that needs no generation (or is refused before one); nullopt: a
  // generation request, for respond() on a worker.
  std::optional<HttpResponse> quick(const HttpRequest& req) override;
  // A worker thread: answers a generation request through `ex`.  Returns when the answer is sent, the
  // client is gone or the server stops.
  void respond(Exchange& ex) override;
  // Counted by route and status for /metrics.
  void answered(std::string_view path, int status) override { metrics_.count_request(path, status); }
  // Serves POST /v1/embeddings (reach serve --embeddings, or an embedding model); without: 404.
  void set_embeddings(EmbeddingsRoute* embeddings) { embeddings_ = embeddings; }

 private:
  // The engine's request for an API request: the prompt's ids and end tokens, limits, sampling.
  // tool_syntax: set where the reply is parsed for tool calls (the request's tools are active).
  std::shared_ptr<serve::Job> make_job(const GenerationRequest& r, std::optional<serve::ToolSyntax>& tool_syntax);
  std::string new_id(Endpoint ep);
  bool authorized(const HttpRequest& req) const;

  // The model's vocabulary size, kept: after a lost device the scheduler loads the model again, and the
  // Model the routes were made with is gone (the tokenizer below is a copy, the same for the new one).
  int64_t vocab_size_ = 0;
  serve::Scheduler& scheduler_;
  ApiOptions options_;
  Metrics metrics_;
  Tokenizer tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  int64_t started_ = 0;
  std::atomic<uint64_t> next_id_{1};
  uint64_t id_salt_ = 0;
  EmbeddingsRoute* embeddings_ = nullptr;
};

}  // namespace reach::server
