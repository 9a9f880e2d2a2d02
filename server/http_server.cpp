#include "server/http_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <random>

#include "base/error.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach::server {

namespace {

using nlohmann::json;

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump_json(error_json(e)), "application/json");
}

void send_json(httplib::Response& res, const json& j) { res.set_content(dump_json(j), "application/json"); }

// Compares without an early exit, so the time taken says nothing about how much of the key matched.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b.empty() ? 0 : b[i % b.size()]);
  return diff == 0;
}

std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

}  // namespace

struct HttpServer::Impl {
  Model& model;
  Scheduler& scheduler;
  HttpOptions options;
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat_template;
  std::string chat_template_error;
  httplib::Server http;
  int64_t started = std::time(nullptr);
  std::atomic<uint64_t> next_id{1};
  uint64_t id_salt = std::random_device{}();

  Impl(Model& m, Scheduler& s, const HttpOptions& o) : model(m), scheduler(s), options(o), tokenizer(*m.tokenizer()) {
    try {
      chat_template = ChatTemplate::for_tokenizer(tokenizer, model.dir().string());
    } catch (const Error& e) {
      chat_template_error = e.what();   // completions still work; chat answers 400 with this
    }
    routes();
  }

  std::string new_id(Endpoint ep) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s-%08llx%06llx", ep == Endpoint::chat ? "chatcmpl" : "cmpl",
                  (unsigned long long)(id_salt & 0xffffffffu), (unsigned long long)next_id++);
    return buf;
  }

  void routes() {
    const size_t threads = options.threads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(options.max_body);
    // Idle keep-alive connections hold a pool thread: let them go soon.
    http.set_keep_alive_timeout(2);
    // A connection that sends nothing holds a pool thread, and stop() waits for it: a request (headers
    // and body) must arrive within 5 s; loopback and LAN clients send theirs at once.
    http.set_read_timeout(5);
    http.set_write_timeout(30);

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      const std::string prefix = "Bearer ";
      const bool ok = auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
                      same_secret(auth.substr(prefix.size()), options.api_key);
      if (ok) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, {401, auth.empty() ? "no API key: send 'Authorization: Bearer KEY'"
                                         : "the API key is not valid",
                       "authentication_error", "", "invalid_api_key"});
      return httplib::Server::HandlerResponse::Handled;
    });
    // Answers httplib made itself (unknown route, body too large, bad request line) get a JSON body.
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                   httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      ApiError e{res.status, "", "invalid_request_error", "", ""};
      if (res.status == 404) { e.message = "no route " + req.method + " " + req.path; e.code = "not_found"; }
      else if (res.status == 413) { e.message = "the request body is too large"; e.code = "payload_too_large"; }
      else e.message = "bad request (HTTP " + std::to_string(res.status) + ")";
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      send_error(res, {500, "internal error", "server_error", "", ""});
    });

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const SchedulerStats s = scheduler.stats();
      send_json(res, {{"status", "ok"}, {"slots", s.slots}, {"slots_busy", s.busy}, {"queued", s.queued}});
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, models_json(options.model_id, started));
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(req, res, Endpoint::completions);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(req, res, Endpoint::chat);
    });
  }

  // The prompt's token ids and end tokens, as `reach run` builds them (encode_chat).
  std::shared_ptr<Job> make_job(const GenerationRequest& r) {
    auto job = std::make_shared<Job>();
    if (r.endpoint == Endpoint::chat) {
      if (!chat_template) throw ApiError{400, "this model has no chat template: " + chat_template_error +
                                                  " (use /v1/completions)", "invalid_request_error", "messages", ""};
      try {
        ChatPrompt c = encode_chat(tokenizer, *chat_template, r.messages);
        job->ids = std::move(c.ids);
        job->stop_ids = std::move(c.stop_ids);
      } catch (const Error& e) {
        throw ApiError{400, e.what(), "invalid_request_error", "messages", ""};
      }
    } else if (r.prompt_is_ids) {
      const int64_t vocab = model.config().vocab_size;
      for (int32_t id : r.prompt_ids)
        if (id >= vocab)
          throw ApiError{400, "token id " + std::to_string(id) + " is not below the vocabulary size " +
                                  std::to_string(vocab), "invalid_request_error", "prompt", ""};
      job->ids = r.prompt_ids;
    } else {
      job->ids = tokenizer.encode(r.prompt, true);
    }
    if (job->ids.empty()) throw ApiError{400, "the prompt encodes to no tokens", "invalid_request_error", "prompt", ""};
    const int64_t ctx = scheduler.context(), n = int64_t(job->ids.size());
    if (n >= ctx)
      throw ApiError{400, "the prompt is " + std::to_string(n) + " tokens; the context holds " + std::to_string(ctx) +
                              " (start the server with a larger --ctx, or shorten the prompt)",
                     "invalid_request_error", r.endpoint == Endpoint::chat ? "messages" : "prompt",
                     "context_length_exceeded"};
    // Capped by the context: the reply ends with finish_reason "length" there.
    job->max_tokens = std::min(r.max_tokens.value_or(ctx - n), ctx - n);
    job->stop = r.stop;
    job->sampling = r.sampling;
    if (r.json) job->json = std::make_shared<JsonConstraint>(r.json, TokenTrie::for_tokenizer(tokenizer));
    if (!r.seeded) job->sampling.seed = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
    return job;
  }

  void generate(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
    std::shared_ptr<Job> job;
    GenerationRequest r;
    try {
      r = parse_generation_request(req.body, ep);
      if (!r.model.empty() && r.model != options.model_id)
        throw ApiError{404, "the model '" + r.model + "' does not exist: this server has '" + options.model_id + "'",
                       "invalid_request_error", "model", "model_not_found"};
      validate_sampler_params(r.sampling);
      job = make_job(r);
    } catch (const ApiError& e) {
      return send_error(res, e);
    } catch (const Error& e) {
      return send_error(res, {400, e.what(), "invalid_request_error", "", ""});
    }
    if (!scheduler.submit(job)) {
      res.set_header("Retry-After", "1");
      return send_error(res, {503, "all slots are busy and the queue is full: retry later (or start the server "
                                   "with a larger --parallel or --queue)", "server_busy", "", "server_busy"});
    }
    const std::string id = new_id(ep);
    const int64_t created = std::time(nullptr);
    const std::string model_id = options.model_id;
    if (!r.stream) {
      std::string text;
      for (;;) {
        std::optional<JobEvent> e = job->pop(1000);
        if (!e) continue;
        text += e->text;
        if (!e->done) continue;
        if (!e->error.empty()) return send_error(res, {500, e->error, "server_error", "", ""});
        return send_json(res, completion_json(ep, id, created, model_id, text, e->finish, e->usage));
      }
    }
    res.set_header("Cache-Control", "no-cache");
    const bool include_usage = r.include_usage;
    auto first = std::make_shared<bool>(true);
    res.set_chunked_content_provider(
        "text/event-stream",
        [job, ep, id, created, model_id, include_usage, first](size_t, httplib::DataSink& sink) {
          auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          if (*first && ep == Endpoint::chat) {
            *first = false;
            if (!write(sse(chunk_json(ep, id, created, model_id, "", std::nullopt, true)))) return false;
          }
          std::optional<JobEvent> e = job->pop(200);
          // Nothing yet (queued, or a long prefill): go on while the client is there.
          if (!e) return sink.is_writable();
          if (!e->error.empty()) {
            write(sse(error_json({500, e->error, "server_error", "", ""})));
            write("data: [DONE]\n\n");
            sink.done();
            return true;
          }
          if (!e->done) return write(sse(chunk_json(ep, id, created, model_id, e->text, std::nullopt, false)));
          if (!e->text.empty() && !write(sse(chunk_json(ep, id, created, model_id, e->text, std::nullopt, false))))
            return false;
          if (!write(sse(chunk_json(ep, id, created, model_id, "", e->finish, false)))) return false;
          if (include_usage && !write(sse(usage_chunk_json(ep, id, created, model_id, e->usage)))) return false;
          if (!write("data: [DONE]\n\n")) return false;
          sink.done();
          return true;
        },
        // Runs when the response is over, sent or not: a client gone mid-stream frees its slot.
        [job](bool) { job->cancelled = true; });
  }
};

HttpServer::HttpServer(Model& model, Scheduler& scheduler, const HttpOptions& options)
    : impl_(std::make_unique<Impl>(model, scheduler, options)) {}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const std::string where = impl_->options.host + ":" + std::to_string(impl_->options.port);
  if (impl_->options.port == 0) {
    const int port = impl_->http.bind_to_any_port(impl_->options.host);
    if (port <= 0) throw Error(ErrorCode::io, "cannot listen on " + where + ": check --host");
    return port;
  }
  if (!impl_->http.bind_to_port(impl_->options.host, impl_->options.port))
    throw Error(ErrorCode::io, "cannot listen on " + where + ": the port is taken or the host is not an address of "
                               "this machine (choose another --port or --host)");
  return impl_->options.port;
}

void HttpServer::listen() { impl_->http.listen_after_bind(); }
void HttpServer::stop() { impl_->http.stop(); }

}  // namespace reach::server
