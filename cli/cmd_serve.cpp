// `reach serve`: an OpenAI-compatible HTTP server (server/).
#include <cfloat>
#include <cstdio>
#include <filesystem>
#include <string>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "base/platform/process.hpp"
#include "base/platform/signals.hpp"
#include "cli/options.hpp"
#include "cli/serve_shutdown.hpp"
#include "runtime/serve/scheduler.hpp"
#include "runtime/serve/slot_pool.hpp"
#include "runtime/session/embedding.hpp"
#include "runtime/session/session.hpp"
#include "server/http_server.hpp"
#include "server/openai_routes.hpp"

namespace reach::cli {

namespace {

void serve_usage() {
  std::printf(
      "usage: reach serve -m MODEL [options]\n"
      "OpenAI-compatible API: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions\n"
      "(streamed with \"stream\": true), and GET /metrics (Prometheus text).  Requests are served by --parallel\n"
      "slots, each with its own context.  Request bodies may be gzip or deflate encoded.\n"
      "  -m, --model DIR     model folder (config.json, *.safetensors, tokenizer.json), a .gguf file, or a\n"
      "                      folder holding one .gguf\n"
      "  --host ADDR         address to listen on (default 127.0.0.1: this machine only)\n"
      "  --port N            port (default 8080; 0 = any free port, printed)\n"
      "  --parallel N        sequences generated at once (default 1)\n"
      "  --queue N           requests that may wait for a slot; beyond, 503 (default 16)\n"
      "  --ctx N             context per slot, prompt + reply (default min(model's, 4096))\n"
      "  --chunk N           prefill chunk length (default %u)\n"
      "  --api-key KEY       require 'Authorization: Bearer KEY' on every route but /health and /metrics\n"
      "  --alias NAME        model name in /v1/models and requests (default the file or folder name)\n"
      "  --max-body BYTES    largest request body, after decoding (default 1048576); larger: 413\n"
      "  --threads N         generation requests handled at once (default 4 x parallel + 8); 64 more may\n"
      "                      wait for a thread, beyond: 503.  Connections cost no thread while they send.\n"
      "  --drain-timeout S   on SIGTERM, seconds the requests in flight get to finish (default 30); new ones\n"
      "                      get 503 meanwhile.  Past it, those left end with an error.  A second SIGTERM,\n"
      "                      or SIGINT, stops at once\n"
      "  --device N|NAME     Vulkan device (see `reach info`)\n"
      "  --embeddings        serve POST /v1/embeddings (always on for an embedding model: sentence-\n"
      "                      transformers pooling modules, a GGUF pooling_type, or a bare *Model class)\n"
      "  --no-prefix-cache   prefill every prompt whole (by default a prompt maps the cached blocks of\n"
      "                      earlier prompts with the same first tokens, or without a pool starts from the\n"
      "                      slot's cache; a request can say \"cache_prompt\": false)\n"
      "  --kv-size N|SIZE    the paged KV cache the slots share: N tokens (or SIZE bytes: 512MiB, 2GiB), in\n"
      "                      blocks of 16.  By default it holds --parallel whole contexts, the memory a\n"
      "                      cache per slot would take; for a model with sliding-window layers each slot\n"
      "                      keeps its own cache instead (a window's ring is smaller) unless --kv-size is\n"
      "                      given.  A request holds the blocks of its prompt and max_tokens, waits in the\n"
      "                      queue while they are not free, and maps the blocks of earlier prompts with the\n"
      "                      same leading tokens (any slot's) instead of computing them.  Blocks behind the\n"
      "                      window go back when every layer is windowed; else windowed layers keep every\n"
      "                      position\n"
      "  --no-kv-pool        a whole-context KV cache per slot instead of the shared pool\n"
      "%s%s",
      kDefaultPrefillChunk, (quantize_flag_help(22) + full_kv_flag_help(22) + kv_cache_flag_help(22)).c_str(), scheme_flags_help().c_str());
}

std::string default_model_id(const std::string& path) {
  std::filesystem::path p = platform::path_from_utf8(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();   // "models/x/"
  std::string name = platform::path_to_utf8(p.filename());
  if (p.extension() == ".gguf") name = platform::path_to_utf8(p.stem());
  return name.empty() ? "reach" : name;
}

}  // namespace

int cmd_serve(const Args& args) {
  std::string model_dir, device, alias;
  int64_t parallel = 1, queue = 16, ctx = 0, chunk = kDefaultPrefillChunk, threads = 0;
  uint32_t kv_tokens = 0;   // --kv-size: the pool in tokens, or in bytes
  uint64_t kv_bytes = 0;
  server::HttpOptions ho;
  server::ApiOptions ao;
  SessionOptions so;   // every slot's options
  so.cache_type_k = so.cache_type_v = kFrontEndKvType;
  std::optional<WType> quantize;
  bool prefix_cache = true, embeddings_on = false, no_pool = false;
  double drain_timeout = 30;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { serve_usage(); return 0; }
    else if (a == "-m" || a == "--model") model_dir = value_of(args, i);
    else if (a == "--host") ho.host = value_of(args, i);
    else if (a == "--port") ho.port = int(int_of(args, i, 0, 65535));
    else if (a == "--parallel" || a == "-np") parallel = int_of(args, i, 1, 256);
    else if (a == "--queue") queue = int_of(args, i, 0, 1 << 16);
    else if (a == "--ctx") ctx = int_of(args, i, 2, 1 << 24);
    else if (a == "--chunk") chunk = int_of(args, i, 1, 1 << 16);
    else if (a == "--api-key") ao.api_key = value_of(args, i);
    else if (a == "--alias") alias = value_of(args, i);
    else if (a == "--max-body") ho.max_body = size_t(int_of(args, i, 1024, int64_t(1) << 32));
    else if (a == "--threads") threads = int_of(args, i, 1, 1024);
    else if (a == "--drain-timeout") drain_timeout = float_of(args, i, 0, 86400, "seconds from 0 to 86400");
    else if (a == "--device") device = value_of(args, i);
    else if (a == "--quantize") quantize = quantize_of(args, i);
    else if (a == "--full-kv") so.full_kv = true;
    else if (parse_kv_cache_flag(args, i, so.cache_type_k, so.cache_type_v)) continue;
    else if (a == "--no-prefix-cache") prefix_cache = false;
    else if (a == "--kv-size") parse_kv_size(args, i, kv_tokens, kv_bytes);
    else if (a == "--no-kv-pool") no_pool = true;
    else if (a == "--embeddings") embeddings_on = true;
    else if (parse_scheme_flag(args, i, so.overrides)) continue;
    else throw Error(ErrorCode::invalid_argument, "unknown option '" + a + "' (see reach serve --help)");
  }
  if (no_pool && (kv_tokens || kv_bytes))
    throw Error(ErrorCode::invalid_argument, "--no-kv-pool and --kv-size contradict each other: give one of them");
  if (ao.api_key.empty() && std::getenv("REACH_API_KEY")) ao.api_key = std::getenv("REACH_API_KEY");
  ao.model_id = alias.empty() ? default_model_id(model_dir) : alias;
  ho.threads = size_t(threads ? threads : 4 * parallel + 8);

  // SIGTERM and SIGINT go to one thread (ServeShutdown, made before the objects its actions use, so that
  // it outlives them); every other thread (the HTTP threads, the scheduler) inherits the blocked mask.
  // A client gone mid-write must be an error return, not SIGPIPE.
  ServeShutdown shutdown;
  platform::ignore_broken_pipe();
  // Each connection is a descriptor; the usual soft limit of 1024 would refuse connections before the
  // server's own cap does.
  platform::raise_open_file_limit();

  Engine e = open_engine(model_dir, device, true, quantize);
  so.context = uint32_t(ctx);
  so.chunk = uint32_t(chunk);
  // so.l_test stays 0: dynamic position scaling takes each slot's whole context as its test length, since
  // the server cannot know a request's length when the slot is made.
  // After a lost GPU (serve::Scheduler, "A lost device"): the old model, allocator and device go, in that
  // order, and the model is loaded as at the start on a device made anew.
  // POST /v1/embeddings: an Embedder (a session of its own beside the slots) for --embeddings or a model that
  // says it is an embedding model.
  std::unique_ptr<server::EmbeddingsRoute> embeddings;
  auto make_embedder = [&] { return std::make_unique<Embedder>(*e.model, model_pooling(*e.model), uint32_t(ctx)); };
  if (embeddings_on || is_embedding_model(*e.model))
    embeddings = std::make_unique<server::EmbeddingsRoute>(make_embedder(), *e.model->tokenizer(), ao.model_id);
  auto reload = [&]() -> Model& {
    if (embeddings) embeddings->reset(nullptr);
    e.model.reset();
    e.allocator.reset();
    e.device.reset();
    e = open_engine(model_dir, device, true, quantize);
    if (embeddings) embeddings->reset(make_embedder());
    return *e.model;
  };
  std::string own_caches_why;
  if (!no_pool && !kv_tokens && !kv_bytes)   // the default: the slots' contexts, shared
    so.kv_pool = serve::make_slot_pool(*e.model, so, size_t(parallel), own_caches_why);
  if (kv_tokens || kv_bytes) {
    KvPoolOptions po = Session::pool_options(*e.model, so);
    po.tokens = kv_tokens;
    po.bytes = kv_bytes;
    so.kv_pool = std::make_shared<KvPool>(*e.model, po);
  }
  serve::Scheduler scheduler(*e.model, so, size_t(parallel), size_t(queue), prefix_cache, reload);
  // The scheduler holds the pool alone: after a lost device it frees the pool before the device goes.
  const std::string pool_line = so.kv_pool ? so.kv_pool->describe() : "";
  so.kv_pool.reset();
  server::OpenAiRoutes routes(*e.model, scheduler, ao);
  if (embeddings) {
    routes.set_embeddings(embeddings.get());
    const PoolingSpec p = model_pooling(*e.model);
    std::fprintf(stderr, "reach serve: /v1/embeddings: %lld dimensions, %s pooling%s\n",
                 (long long)e.model->config().hidden_size, pooling_name(p.pooling), p.normalize ? ", normalized" : "");
  }
  server::HttpServer http(routes, ho);
  const int port = http.bind();
  std::fprintf(stderr, "reach serve: model '%s', %lld slot(s) of %u tokens (KV cache K %s V %s), load %.2f s\n",
               ao.model_id.c_str(), (long long)parallel, scheduler.context(), kv_type_name(so.cache_type_k),
               kv_type_name(so.cache_type_v), e.load_seconds);
  if (!pool_line.empty()) std::fprintf(stderr, "reach serve: %s, shared by the slots\n", pool_line.c_str());
  if (!own_caches_why.empty()) std::fprintf(stderr, "reach serve: a KV cache per slot: %s\n", own_caches_why.c_str());
  std::fprintf(stderr, "reach serve: listening on http://%s:%d\n", ho.host.c_str(), port);
  std::fflush(stderr);

  shutdown.start({[&] { http.drain(); }, [&] { return http.in_flight(); },
                  [&](const std::string& reason) { scheduler.stop(reason); }, [&] { http.stop(); }},
                 drain_timeout);
  // Returns once drained or stopped (or on a failure of its own, which leaves the signal thread waiting).
  http.listen();
  shutdown.served();
  scheduler.stop();
  return 0;
}

}  // namespace reach::cli
