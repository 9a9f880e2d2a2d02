#pragma once
// The HTTP side of `reach serve`: routes, authentication, limits, and the translation between OpenAI
// requests and scheduler Jobs.  Handler threads (cpp-httplib's pool) never touch the device: they
// encode prompts (the tokenizer is thread-safe), submit Jobs and relay their events.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model/model.hpp"
#include "runtime/text/chat_template.hpp"
#include "server/scheduler.hpp"

namespace reach::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: any free port (printed)
  std::string api_key;         // non-empty: every /v1 route needs "Authorization: Bearer KEY"
  std::string model_id;        // the name /v1/models lists and requests must use (or omit)
  size_t max_body = 1 << 20;   // bytes; larger bodies get 413
  size_t threads = 16;         // connections served at once; more wait for a thread
};

class HttpServer {
 public:
  HttpServer(Model& model, Scheduler& scheduler, const HttpOptions& options);
  ~HttpServer();
  // Binds; returns the port (useful with port 0).  Throws Error(io) when the address is taken.
  int bind();
  void listen();   // blocks until stop()
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reach::server
