#include "server/openai_routes.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>
#include <span>

#include "base/error.hpp"

namespace reach::server {

namespace {

using nlohmann::json;

// How long a worker waits for a Job event before it looks again whether its client is still there.
constexpr int kPollMs = 100;

// Compares without an early exit, so the time taken says nothing about how much of the key matched.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b.empty() ? 0 : b[i % b.size()]);
  return diff == 0;
}

std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

// While the model is loaded again after a lost GPU (Scheduler::loading): 503, with Retry-After.
ApiError model_loading() {
  return {503,
          "the GPU was lost (a driver reset or timeout) and the model is being loaded again on a new device: "
          "retry in a few seconds",
          "server_error", "", "model_loading"};
}

// A job's error event: 503 when the device was lost (the request was fine: the same one may be sent again
// once /health says ok), else 500.
ApiError job_error(const serve::JobEvent& e) {
  // The engine's message (e.error, in the server's log) says what an embedder does next, not a client.
  if (e.device_lost)
    return {503,
            "the GPU was lost while generating (VK_ERROR_DEVICE_LOST: a driver reset, a timeout or its memory "
            "running out); the server is loading the model again: retry in a few seconds",
            "server_error", "", "device_lost"};
  return {500, e.error, "server_error", "", ""};
}

struct Route {
  const char* path;
  const char* method;
  bool open;  // served without the API key (probes and scrapers)
};
constexpr Route kRoutes[] = {{"/health", "GET", true},
                             {"/metrics", "GET", true},
                             {"/v1/models", "GET", false},
                             {"/v1/completions", "POST", false},
                             {"/v1/chat/completions", "POST", false},
                             {"/v1/embeddings", "POST", false}};

}  // namespace

OpenAiRoutes::OpenAiRoutes(const Model& model, serve::Scheduler& scheduler, const ApiOptions& options)
    : vocab_size_(model.config().vocab_size),
      scheduler_(scheduler),
      options_(options),
      tokenizer_(*model.tokenizer()),
      started_(std::time(nullptr)),
      id_salt_(std::random_device{}()) {
  try {
    chat_template_ = ChatTemplate::for_tokenizer(tokenizer_, model.dir().string());
  } catch (const Error& e) {
    // Completions still work; chat requests answer 400.  Why there is none is for the operator (the
    // message may name files), not for clients.
    std::fprintf(stderr, "reach serve: no chat template, /v1/chat/completions answers 400: %s\n", e.what());
  }
}

std::string OpenAiRoutes::new_id(Endpoint ep) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08llx%06llx", ep == Endpoint::chat ? "chatcmpl" : "cmpl",
                (unsigned long long)(id_salt_ & 0xffffffffu), (unsigned long long)next_id_++);
  return buf;
}

bool OpenAiRoutes::authorized(const HttpRequest& req) const {
  const std::string* auth = req.header("authorization");
  if (!auth) return false;
  // "Bearer KEY": the scheme is case-insensitive (RFC 9110 11.1).
  std::string_view v = trim(*auth);
  const size_t sp = v.find_first_of(" \t");
  if (sp == std::string_view::npos || !iequals(v.substr(0, sp), "bearer")) return false;
  return same_secret(std::string(trim(v.substr(sp))), options_.api_key);
}

std::optional<HttpResponse> OpenAiRoutes::quick(const HttpRequest& req) {
  const Route* route = nullptr;
  for (const Route& r : kRoutes)
    if (req.path == r.path) route = &r;
  if (!options_.api_key.empty() && !(route && route->open) && !authorized(req))
    return error_response(
        {401, req.header("authorization") ? "the API key is not valid" : "no API key: send 'Authorization: Bearer KEY'",
         "authentication_error", "", "invalid_api_key"});
  if (!route)
    return error_response(
        {404, "no route " + req.method + " " + req.path.substr(0, 256), "invalid_request_error", "", "not_found"});
  if (req.method != route->method) {
    HttpResponse r = error_response({405, std::string("use ") + route->method + " for " + route->path,
                                     "invalid_request_error", "", "method_not_allowed"});
    r.headers.emplace_back("Allow", route->method);
    return r;
  }
  if (req.path == "/health") {
    if (scheduler_.loading()) {
      // After a lost GPU, until the model is loaded again on a new device (probes take the instance out).
      HttpResponse r = json_response({{"status", "loading"}}, 503);
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    const serve::SchedulerStats s = scheduler_.stats();
    return json_response({{"status", "ok"}, {"slots", s.slots}, {"slots_busy", s.busy}, {"queued", s.queued}});
  }
  if (req.path == "/metrics") {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.render(scheduler_.stats());
    return r;
  }
  if (req.path == "/v1/models") return json_response(models_json(options_.model_id, started_));
  if (req.path == "/v1/embeddings" && !embeddings_)
    return error_response({404, "this server does not serve embeddings: start it with reach serve --embeddings",
                           "invalid_request_error", "", "not_found"});
  return std::nullopt;
}

// The prompt's token ids and end tokens, as `reach run` builds them (encode_chat).
std::shared_ptr<serve::Job> OpenAiRoutes::make_job(const GenerationRequest& r,
                                                   std::optional<serve::ToolSyntax>& tool_syntax) {
  auto job = std::make_shared<serve::Job>();
  if (r.endpoint == Endpoint::chat) {
    if (!chat_template_)
      throw ApiError{400, "this model has no chat template (use /v1/completions)", "invalid_request_error", "messages",
                     ""};
    if (chat_template_->has_channels()) {
      // A harmony reply opens with its analysis channel: a grammar over the whole reply would forbid the
      // channel headers, and the logprobs' text offsets would count text the client never gets.
      if (r.json)
        throw ApiError{400,
                       "response_format is not supported with this model's chat format (harmony: the reply "
                       "starts with its analysis channel); ask for JSON in the messages instead",
                       "invalid_request_error", "response_format", ""};
      if (r.logprobs >= 0)
        throw ApiError{400, "logprobs are not supported with this model's chat format (harmony's channels)",
                       "invalid_request_error", "logprobs", ""};
      job->channels = true;
    }
    std::span<const ChatTool> tools;
    std::string reply_prefix;
    if (r.tools.active()) {
      tool_syntax = serve::ToolSyntax::for_template(*chat_template_);
      if (!tool_syntax)
        throw ApiError{400,
                       std::string("tools are not supported with this model's chat template (") +
                           chat_template_->family_name() +
                           "): reach renders and parses tool calls for Qwen 2.5's, Qwen3's, Llama 3.1's, "
                           "Mistral v3's, SmolLM3's, Phi-4-mini's and gpt-oss's templates",
                       "invalid_request_error", "tools", ""};
      if (r.json)
        throw ApiError{400, "response_format cannot be combined with tools: a JSON reply leaves no room for calls",
                       "invalid_request_error", "response_format", ""};
      tools = r.tools.tools;
      job->tool_calls = true;
      const serve::ToolPlan plan = tool_plan(r.tools, *tool_syntax, tokenizer_);
      reply_prefix = plan.reply_prefix;
      job->json = plan.constraint;
      if (tool_syntax->harmony) job->reply_prefix = reply_prefix;   // the reply continues the call's header
    }
    try {
      ChatTemplate t = *chat_template_;
      if (t.takes_reasoning_effort()) t.set_reasoning_effort(r.reasoning_effort);
      ChatPrompt c = encode_chat(tokenizer_, t, r.messages, tools, reply_prefix);
      job->ids = std::move(c.ids);
      job->stop_ids = std::move(c.stop_ids);
    } catch (const Error& e) {
      throw ApiError{400, e.what(), "invalid_request_error", "messages", ""};
    }
  } else if (r.prompt_is_ids) {
    const int64_t vocab = vocab_size_;
    for (int32_t id : r.prompt_ids)
      if (id >= vocab)
        throw ApiError{400,
                       "token id " + std::to_string(id) + " is not below the vocabulary size " + std::to_string(vocab),
                       "invalid_request_error", "prompt", ""};
    job->ids = r.prompt_ids;
  } else {
    job->ids = tokenizer_.encode(r.prompt, true);
  }
  if (job->ids.empty()) throw ApiError{400, "the prompt encodes to no tokens", "invalid_request_error", "prompt", ""};
  const int64_t ctx = scheduler_.context(), n = int64_t(job->ids.size());
  if (n >= ctx)
    throw ApiError{400,
                   "the prompt is " + std::to_string(n) + " tokens; the context holds " + std::to_string(ctx) +
                       " (start the server with a larger --ctx, or shorten the prompt)",
                   "invalid_request_error", r.endpoint == Endpoint::chat ? "messages" : "prompt",
                   "context_length_exceeded"};
  // Capped by the context: the reply ends with finish_reason "length" there.
  job->max_tokens = std::min(r.max_tokens.value_or(ctx - n), ctx - n);
  job->stop = r.stop;
  job->sampling = r.sampling;
  job->logprobs = r.logprobs;
  job->cache_prompt = r.cache_prompt;
  if (r.json) job->json = std::make_shared<JsonConstraint>(r.json, TokenTrie::for_tokenizer(tokenizer_));
  if (!r.seeded) job->sampling.seed = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  return job;
}

void OpenAiRoutes::respond(Exchange& ex) {
  if (ex.request().path == "/v1/embeddings") {
    if (scheduler_.loading()) return ex.reply(error_response(model_loading()));
    return ex.reply(embeddings_->answer(ex.request().body));
  }
  const Endpoint ep = ex.request().path == "/v1/chat/completions" ? Endpoint::chat : Endpoint::completions;
  std::shared_ptr<serve::Job> job;
  GenerationRequest r;
  std::optional<serve::ToolSyntax> tool_syntax;
  try {
    r = parse_generation_request(ex.request().body, ep);
    if (!r.model.empty() && r.model != options_.model_id)
      throw ApiError{404, "the model '" + r.model + "' does not exist: this server has '" + options_.model_id + "'",
                     "invalid_request_error", "model", "model_not_found"};
    validate_sampler_params(r.sampling);
    job = make_job(r, tool_syntax);
  } catch (const ApiError& e) {
    return ex.reply(error_response(e));
  } catch (const Error& e) {
    return ex.reply(error_response({400, e.what(), "invalid_request_error", "", ""}));
  }
  if (!scheduler_.submit(job)) {
    if (scheduler_.loading()) return ex.reply(error_response(model_loading()));
    return ex.reply(error_response({503,
                                    "all slots are busy and the queue is full: retry later (or start the server "
                                    "with a larger --parallel or --queue)",
                                    "server_busy", "", "server_busy"}));
  }
  ex.on_gone([job] { job->cancelled = true; });
  const std::string id = new_id(ep);
  const int64_t created = std::time(nullptr);
  const std::string& model_id = options_.model_id;
  const bool want_logprobs = r.logprobs >= 0;
  // Tool calls parsed out of the reply text, whole or streamed alike.
  std::optional<serve::ToolCallStream> tool_stream;
  // harmony's calls come apart from its text (JobEvent::calls), each with its opening tag.
  const bool harmony_calls = tool_syntax && tool_syntax->harmony;
  if (tool_syntax)
    tool_stream.emplace(*tool_syntax, r.tools.forced() && !harmony_calls, r.tools.parallel ? SIZE_MAX : 1);
  const std::string call_prefix = "call_" + id.substr(id.find('-') + 1) + "_";
  std::vector<std::string> short_ids;  // Mistral's: 9 letters and digits, drawn once per call
  auto call_id = [&](size_t index) {
    if (!tool_syntax || !tool_syntax->short_ids) return call_prefix + std::to_string(index);
    static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::random_device rd;
    while (short_ids.size() <= index) {
      std::string s(9, 'a');
      for (char& c : s) c = kAlnum[rd() % 62];
      short_ids.push_back(s);
    }
    return short_ids[index];
  };

  if (!r.stream) {
    std::string text, reasoning, call_text;
    std::vector<TokenLogprob> logprobs;
    while (!ex.gone()) {
      std::optional<serve::JobEvent> e = job->pop(kPollMs);
      if (!e) continue;
      text += e->text;
      reasoning += e->reasoning;
      call_text += e->calls;
      logprobs.insert(logprobs.end(), e->logprobs.begin(), e->logprobs.end());
      if (!e->done) continue;
      if (!e->error.empty()) return ex.reply(error_response(job_error(*e)));
      std::vector<ToolCallOut> calls;
      if (tool_stream) {
        std::string content = harmony_calls ? text : "";
        for (const serve::ToolPiece& piece : {tool_stream->push(harmony_calls ? call_text : text), tool_stream->finish()}) {
          content += piece.content;
          for (const auto& c : piece.calls) {
            if (c.index >= calls.size()) calls.push_back({call_id(c.index), c.name, ""});
            calls[c.index].arguments += c.arguments;
          }
        }
        text = std::move(content);
      }
      return ex.reply(json_response(completion_json(ep, id, created, model_id, text, e->finish, e->usage,
                                                    want_logprobs ? &logprobs : nullptr,
                                                    job->channels ? &reasoning : nullptr, calls)));
    }
    return;
  }
  ex.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  if (ep == Endpoint::chat) ex.send_chunk(sse(chunk_json(ep, id, created, model_id, "", std::nullopt, true)));
  while (!ex.gone()) {
    std::optional<serve::JobEvent> e = job->pop(kPollMs);
    if (!e) continue;  // queued, or a long prefill
    if (!e->error.empty()) {
      ex.send_chunk(sse(error_json(job_error(*e))) + "data: [DONE]\n\n");
      return ex.end_stream();
    }
    const std::vector<TokenLogprob>* lp = want_logprobs ? &e->logprobs : nullptr;
    // Reasoning first: within one event it was written before the answer.
    if (!e->reasoning.empty())
      ex.send_chunk(sse(chunk_json(ep, id, created, model_id, "", std::nullopt, false, nullptr, e->reasoning)));
    std::string text = e->text;
    std::vector<ToolCallDelta> deltas;
    if (tool_stream) {
      serve::ToolPiece piece = tool_stream->push(harmony_calls ? e->calls : e->text);
      if (e->done) {
        serve::ToolPiece last = tool_stream->finish();
        piece.content += last.content;
        piece.calls.insert(piece.calls.end(), last.calls.begin(), last.calls.end());
      }
      text = harmony_calls ? text + piece.content : std::move(piece.content);
      for (const auto& c : piece.calls)
        deltas.push_back({c.index, c.name.empty() ? "" : call_id(c.index), c.name, c.arguments});
    }
    if (!text.empty() || !e->logprobs.empty())
      ex.send_chunk(sse(chunk_json(ep, id, created, model_id, text, std::nullopt, false, lp)));
    if (!deltas.empty()) ex.send_chunk(sse(tool_chunk_json(id, created, model_id, deltas)));
    if (!e->done) continue;
    json last = chunk_json(ep, id, created, model_id, "", e->finish, false);
    last["choices"][0]["finish_reason"] = finish_name(e->finish, tool_stream && tool_stream->calls() > 0);
    std::string tail = sse(last);
    if (r.include_usage) tail += sse(usage_chunk_json(ep, id, created, model_id, e->usage));
    ex.send_chunk(tail + "data: [DONE]\n\n");
    return ex.end_stream();
  }
}

}  // namespace reach::server
