// `reach run`: stream a completion of a prompt.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/platform/console.hpp"
#include "base/platform/file_names.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "engine/device.hpp"
#include "engine/pipeline.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/json_parse.hpp"
#include "runtime/serve/reply_text.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/session/generation.hpp"
#include "runtime/text/chat_template.hpp"
#include "server/http_error.hpp"
#include "server/tool_request.hpp"

namespace reach::cli {

namespace {

void run_usage() {
  std::printf(
      "usage: reach run -m DIR (-p TEXT | --chat TEXT) [options]\n"
      "  -m, --model DIR     model folder (config.json, *.safetensors, tokenizer.json), a .gguf file, or a\n"
      "                      folder holding one .gguf\n"
      "  -p, --prompt TEXT   prompt text, used as it is\n"
      "  --chat TEXT         a user message, put into the model's chat template (GGUF tokenizer.chat_template,\n"
      "                      tokenizer_config.json chat_template, or the turn tokens of the vocabulary) with the\n"
      "                      assistant's turn opened; generation stops at the end of that turn and only the\n"
      "                      reply is printed\n"
      "  --system TEXT       with --chat: a system message before it\n"
      "  --reasoning-effort E  with --chat: low, medium or high, for templates that take one (gpt-oss's\n"
      "                      harmony; default medium).  A harmony reply is channels: the final one is\n"
      "                      printed, the analysis (the model's reasoning) goes to stderr with -v or\n"
      "                      --reasoning, else is dropped\n"
      "  --reasoning         with --chat: print the reply's analysis channel to stderr (as -v does)\n"
      "  -n N                tokens to generate (default 64)\n"
      "  --stop TEXT         end the reply before TEXT (repeatable; in a harmony reply's final channel)\n"
      "  --temp T            temperature, 0 = greedy (default 0.8)\n"
      "  --top-k K           0 = no cut (default 40)   --top-p P in (0, 1] (default 0.95)   --seed S (default 0)\n"
      "  --ctx N             context (KV cache) length (default prompt + n)\n"
      "  --chunk N           prefill chunk length (default %u)\n"
      "  --json              the reply is a JSON object (constrained sampling; ends once the object is whole)\n"
      "  --json-schema FILE  the reply is a JSON document valid under the JSON schema in FILE (the keywords\n"
      "                      supported are listed in runtime/constrain/json_grammar.hpp); the mask's cost per\n"
      "                      token is printed with the decode speed\n"
      "  --tools FILE        with --chat: the functions the model may call, a JSON array of OpenAI API tools\n"
      "                      ({\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}});\n"
      "                      the reply's text is printed, then its calls as a JSON array on a line of their\n"
      "                      own ([{\"name\", \"arguments\"}], arguments a JSON object's text)\n"
      "  --tool-choice C     with --tools: auto (default), none, required, or a tool's name (that call is\n"
      "                      made, its arguments constrained to the tool's parameters schema)\n"
      "  --ids               print the prompt's and the generated token ids to stderr\n"
      "  -v, --verbose       print the model and the position scheme in effect\n"
      "  --device N|NAME     Vulkan device (see `reach info`)\n"
      "%s%s",
      kDefaultPrefillChunk, (quantize_flag_help(22) + full_kv_flag_help(22) + kv_cache_flag_help(22) + key_calib_flag_help(22, false) + activations_flag_help(22)).c_str(),
      scheme_flags_help().c_str());
}

// --tools FILE (a JSON array of API tools) and --tool-choice, read as reach serve reads a request's.
server::ToolRequest read_tools(const std::string& file, const std::string& choice) {
  if (file.empty()) return {};
  const FileKind kind{"tools file", file_kinds::MiB, "a few kB"};
  const std::string text = read_file(platform::path_from_utf8(file), kind);
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  try {
    (void)parse_json_bounded(text, 64);
    body["tools"] = nlohmann::ordered_json::parse(text);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::invalid_argument, "--tools " + file + ": not valid JSON (" + e.what() + ")");
  }
  if (choice == "auto" || choice == "none" || choice == "required")
    body["tool_choice"] = choice;
  else if (!choice.empty())
    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice}}}};
  try {
    server::ToolRequest t = server::parse_tool_request(body);
    if (t.tools.empty()) throw Error(ErrorCode::invalid_argument, "--tools " + file + ": no tools in the array");
    return t;
  } catch (const server::ApiError& e) {
    throw Error(ErrorCode::invalid_argument, "--tools " + file + ": " + e.message);
  }
}

std::string ids_line(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

// How the chat template was found, for -v.
std::string describe_chat(const ChatTemplate& t) {
  return std::string(t.family_name()) + (t.from_vocabulary() ? " (no template in the model: from its turn tokens)"
                                                             : " (the model's template)") +
         ", stops at " + t.end_of_turn();
}

// The reply on the terminal, as the serving engine's ReplyText splits it: the content (a harmony
// reply's final channel) to stdout, a harmony reply's analysis to stderr (when asked) after a
// "reasoning:" label, dimmed on a terminal so that it reads as an aside.
class ReplyPrinter {
 public:
  explicit ReplyPrinter(bool show_reasoning) : show_(show_reasoning), dim_(platform::is_terminal(platform::Stream::err) &&
                                                                  platform::enable_ansi_escapes(platform::Stream::err)) {}
  void print(const serve::ReplyPiece& d) {
    if (show_ && !d.reasoning.empty()) {
      if (!in_reasoning_) std::fprintf(stderr, "%sreasoning: ", dim_ ? "\x1b[2m" : "");
      in_reasoning_ = true;
      std::fwrite(d.reasoning.data(), 1, d.reasoning.size(), stderr);
    }
    if (!d.content.empty()) {
      end_reasoning();
      std::fwrite(d.content.data(), 1, d.content.size(), stdout);
      std::fflush(stdout);
    }
  }
  void end_reasoning() {
    if (in_reasoning_) std::fprintf(stderr, "%s\n", dim_ ? "\x1b[0m" : "");
    in_reasoning_ = false;
  }

 private:
  bool show_, dim_, in_reasoning_ = false;
};

}  // namespace

namespace {

// The command; cmd_run turns a lost GPU into its own exit code.
int run(const Args& args) {
  const auto t_start = std::chrono::steady_clock::now();
  std::string model_dir, prompt, device, chat, system;
  bool have_prompt = false, have_chat = false, have_system = false, print_ids = false, verbose = false;
  bool show_reasoning = false;
  std::optional<std::string> reasoning_effort;
  int64_t n_predict = 64, ctx = 0, chunk = kDefaultPrefillChunk;
  SamplerParams sp;
  SessionOptions so;
  so.cache_type_k = so.cache_type_v = kFrontEndKvType;
  std::optional<WType> quantize;
  std::string json_schema_file;
  bool json_object = false;
  std::string tools_file, tool_choice;
  std::vector<std::string> stops;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { run_usage(); return 0; }
    else if (a == "-m" || a == "--model") model_dir = value_of(args, i);
    else if (a == "-p" || a == "--prompt") { prompt = value_of(args, i); have_prompt = true; }
    else if (a == "--chat") { chat = value_of(args, i); have_chat = true; }
    else if (a == "--system") { system = value_of(args, i); have_system = true; }
    else if (a == "--reasoning-effort") {
      reasoning_effort = value_of(args, i);
      if (*reasoning_effort != "low" && *reasoning_effort != "medium" && *reasoning_effort != "high")
        throw Error(ErrorCode::invalid_argument,
                    "--reasoning-effort '" + *reasoning_effort + "': pass low, medium or high");
    }
    else if (a == "--reasoning") show_reasoning = true;
    else if (a == "--stop") {
      stops.push_back(value_of(args, i));
      if (stops.back().empty()) throw Error(ErrorCode::invalid_argument, "--stop '': a stop string is not empty");
    }
    else if (a == "-n") n_predict = int_of(args, i, 0, 1 << 24);
    // Bounds that keep the float finite and in the sampler's ranges (validate_sampler_params).
    else if (a == "--temp") sp.temperature = float(float_of(args, i, 0, std::numeric_limits<float>::max(), "a finite number >= 0 (0 = greedy)"));
    else if (a == "--top-k") sp.top_k = int32_t(int_of(args, i, 0, 1 << 30));
    else if (a == "--top-p") sp.top_p = float(float_of(args, i, std::numeric_limits<float>::min(), 1, "a number in (0, 1] (1 = no nucleus cut)"));
    else if (a == "--seed") sp.seed = uint64_t(int_of(args, i, 0, INT64_MAX));
    else if (a == "--ctx") ctx = int_of(args, i, 1, 1 << 24);
    else if (a == "--chunk") chunk = int_of(args, i, 1, 1 << 16);
    else if (a == "--ids") print_ids = true;
    else if (a == "--json") json_object = true;
    else if (a == "--json-schema") json_schema_file = value_of(args, i);
    else if (a == "--tools")
      tools_file = value_of(args, i);
    else if (a == "--tool-choice")
      tool_choice = value_of(args, i);
    else if (a == "-v" || a == "--verbose") verbose = true;
    else if (a == "--device") device = value_of(args, i);
    else if (a == "--quantize") quantize = quantize_of(args, i);
    else if (a == "--full-kv") so.full_kv = true;
    else if (parse_key_calib_flag(args, i, so.calibrate_keys, so.key_calib_file, nullptr)) continue;
    else if (parse_kv_cache_flag(args, i, so.cache_type_k, so.cache_type_v)) continue;
    else if (parse_activations_flag(args, i, so.activations)) continue;
    else if (parse_scheme_flag(args, i, so.overrides)) continue;
    else throw Error(ErrorCode::invalid_argument, "unknown option '" + a + "' (see reach run --help)");
  }
  if (json_object && !json_schema_file.empty())
    throw Error(ErrorCode::invalid_argument, "--json and --json-schema both given: pass one (--json is any object)");
  // Read and checked before the model loads: a bad schema fails at once.
  std::shared_ptr<const JsonGrammar> json;
  if (json_object) json = JsonGrammar::any_object();
  if (!json_schema_file.empty()) {
    const FileKind kind{"JSON schema file", file_kinds::MiB, "a few kB"};
    try {
      json = JsonGrammar::from_schema_text(read_file(platform::path_from_utf8(json_schema_file), kind));
    } catch (const Error& e) {
      throw Error(e.code(), "--json-schema " + json_schema_file + ": " + e.what());
    }
  }
  if (!tool_choice.empty() && tools_file.empty())
    throw Error(ErrorCode::invalid_argument, "--tool-choice needs --tools FILE");
  if (!tools_file.empty() && !have_chat) throw Error(ErrorCode::invalid_argument, "--tools needs --chat TEXT");
  if (!tools_file.empty() && json)
    throw Error(ErrorCode::invalid_argument,
                "--tools with --json / --json-schema: pass one (a JSON reply leaves no "
                "room for calls)");
  const server::ToolRequest tools = read_tools(tools_file, tool_choice);
  if (have_prompt && have_chat)
    throw Error(ErrorCode::invalid_argument, "-p and --chat both given: pass one (--chat applies the chat template)");
  if (have_system && !have_chat) throw Error(ErrorCode::invalid_argument, "--system needs --chat TEXT");
  if (reasoning_effort && !have_chat) throw Error(ErrorCode::invalid_argument, "--reasoning-effort needs --chat TEXT");
  if (show_reasoning && !have_chat) throw Error(ErrorCode::invalid_argument, "--reasoning needs --chat TEXT");
  if (!have_prompt && !have_chat) throw Error(ErrorCode::invalid_argument, "no prompt: pass -p TEXT or --chat TEXT");
  if (have_prompt && prompt.empty())
    throw Error(ErrorCode::invalid_argument, "the prompt is empty: pass a non-empty -p TEXT");
  if (have_chat && chat.empty())
    throw Error(ErrorCode::invalid_argument, "the chat message is empty: pass a non-empty --chat TEXT");

  Engine e = open_engine(model_dir, device, true, quantize);
  Model& model = *e.model;
  const Tokenizer& tk = *model.tokenizer();
  GenerationOptions go;
  std::vector<int32_t> ids;
  std::optional<serve::ToolSyntax> tool_syntax;  // set: the reply is parsed for tool calls
  std::shared_ptr<const JsonConstraint> tool_constraint;   // the calls' (serve::plan_tool_calls)
  std::string tool_prefix;                                 // and the prompt's end (a forced call's opening)
  bool channels = false;   // the reply is in harmony's channels: only the final one is the answer
  ReplyPrinter printer(verbose || show_reasoning);
  if (have_chat) {
    // The chat template applied to [system,] user with the assistant's turn opened; the reply ends
    // at the end of that turn.
    ChatTemplate t = ChatTemplate::for_tokenizer(tk, platform::path_to_utf8(model.dir()));
    if (reasoning_effort) {
      if (!t.takes_reasoning_effort())
        throw Error(ErrorCode::invalid_argument, std::string("--reasoning-effort: this model's chat template (") +
                                                     t.family_name() + ") takes no reasoning effort; drop it");
      t.set_reasoning_effort(reasoning_effort);
    }
    if (t.has_channels()) {
      // As reach serve: a grammar over the whole reply would forbid the analysis channel's header.
      if (json)
        throw Error(ErrorCode::invalid_argument,
                    "--json / --json-schema with a harmony chat (this model's template): the reply opens with its "
                    "analysis channel, which the grammar would forbid; ask for JSON in the message instead");
      channels = true;
    }
    std::vector<ChatMessage> messages;
    if (have_system) messages.push_back({"system", system});
    messages.push_back({"user", chat});
    std::string reply_prefix;
    if (tools.active()) {
      // As reach serve: the family's call syntax; a forced call is opened in the prompt and its object
      // constrained to the tool's schema; under auto a call is constrained once the model opens it.
      tool_syntax = serve::ToolSyntax::for_template(t);
      if (!tool_syntax)
        throw Error(ErrorCode::unsupported,
                    std::string("--tools: this model's chat template (") + t.family_name() +
                        ") has no tool calls reach renders (Qwen 2.5, Qwen3, Llama 3.1, Mistral v3, SmolLM3, "
                        "Phi-4-mini, gpt-oss do)");
      try {
        const serve::ToolPlan plan = server::tool_plan(tools, *tool_syntax, tk);
        reply_prefix = tool_prefix = plan.reply_prefix;
        tool_constraint = plan.constraint;
      } catch (const server::ApiError& e) {
        throw Error(ErrorCode::invalid_argument, "--tools " + tools_file + ": " + e.message);
      }
    }
    ChatPrompt c = encode_chat(tk, t, messages,
                               tools.active() ? std::span<const ChatTool>(tools.tools) : std::span<const ChatTool>(),
                               reply_prefix);
    ids = std::move(c.ids);
    go.stop_ids = std::move(c.stop_ids);
    if (verbose) std::fprintf(stderr, "chat template: %s\n", describe_chat(t).c_str());
  } else {
    ids = tk.encode(prompt, true);
  }
  if (ids.empty()) throw Error(ErrorCode::invalid_argument, "the prompt encodes to no tokens");

  const int64_t needed = int64_t(ids.size()) + n_predict;
  if (ctx == 0) ctx = needed;
  if (needed > ctx)   // an option error, named in flags: no hint is added
    throw Error(ErrorCode::invalid_argument, "prompt of " + std::to_string(ids.size()) + " tokens + " +
                                                 std::to_string(n_predict) + " new tokens needs a context of " +
                                                 std::to_string(needed) + ", more than --ctx " + std::to_string(ctx) +
                                                 ": raise --ctx or lower -n");
  so.context = uint32_t(ctx);
  so.chunk = uint32_t(chunk);
  so.l_test = needed;   // dynamic scaling's "local static" length
  go.session = so;
  go.sampling = sp;
  Generation gen(model, go);
  Session& session = gen.session();
  if (json) {
    const auto t_trie = std::chrono::steady_clock::now();
    gen.set_constraint(std::make_shared<JsonConstraint>(json, TokenTrie::for_tokenizer(tk)));
    std::fprintf(stderr, "json: token trie of %d ids in %.3f s\n", tk.vocab_size(), seconds_since(t_trie));
  }
  if (tool_constraint) {
    gen.set_constraint(tool_constraint);
  }
  if (verbose) {
    std::fprintf(stderr, "device: %s\n", e.device->caps().summary().c_str());
    std::fprintf(stderr, "model: %s (%llu params, %s weights, %.1f MiB of matrices read per token)\n%s\n",
                 platform::path_to_utf8(model.dir()).c_str(), (unsigned long long)model.n_params(), model.weight_types().c_str(),
                 double(model.bytes_per_token()) / 1048576.0, session.config().describe().c_str());
    std::fprintf(stderr, "scheme: %s\n", session.schemes().describe().c_str());
    std::fprintf(stderr, "%s\n", session.describe_kv_cache().c_str());
    if (model.weight_types().find('q') != std::string::npos)
      std::fprintf(stderr, "activations: prefill %s, decode %s (%s)\n", activations_name(session.activations().prefill),
                   activations_name(session.activations().decode), session.activations_source().c_str());
  }
  std::fprintf(stderr, "load: %.2f s\n", e.load_seconds);

  auto t0 = std::chrono::steady_clock::now();
  session.prefill(ids);
  const double t_prefill = seconds_since(t0);

  std::vector<int32_t> generated;
  // harmony: the reply continues a forced call's header; its calls come apart from its channels.
  const bool harmony_calls = tool_syntax && tool_syntax->harmony;
  serve::ReplyText reply(stops, channels ? &tk : nullptr, harmony_calls ? tool_prefix : "", harmony_calls);
  std::optional<serve::ToolCallStream> tool_stream;
  if (tool_syntax)
    tool_stream.emplace(*tool_syntax, tools.forced() && !harmony_calls, tools.parallel ? SIZE_MAX : 1);
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  // The reply's text, less its tool calls, which are kept for the end.
  auto shown = [&](serve::ReplyPiece piece, bool end) {
    if (!tool_stream) return piece;
    std::vector<serve::ToolPiece> parts{tool_stream->push(harmony_calls ? piece.calls : piece.content)};
    if (end) parts.push_back(tool_stream->finish());
    if (!harmony_calls) piece.content.clear();
    for (const serve::ToolPiece& part : parts) {
      piece.content += part.content;
      for (const auto& c : part.calls) {
        if (c.index >= calls.size()) calls.emplace_back(c.name, "");
        calls[c.index].second += c.arguments;
      }
    }
    return piece;
  };
  t0 = std::chrono::steady_clock::now();
  double t_first_token = 0;
  for (int64_t i = 0; i < n_predict; ++i) {
    const GeneratedToken next = gen.next();
    if (i == 0) t_first_token = seconds_since(t_start);
    generated.push_back(next.id);
    if (next.stop) break;
    printer.print(shown(reply.push(next.id, next.text), false));
    if (reply.stopped()) break;   // a stop string: the text after it is not the reply's
    if (i + 1 < n_predict) session.decode(next.id);
  }
  const double t_decode = seconds_since(t0);
  printer.print(shown(reply.finish(gen.flush()), true));
  printer.end_reasoning();
  std::printf("\n");
  if (tool_stream) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& [name, arguments] : calls) list.push_back({{"name", name}, {"arguments", arguments}});
    std::printf("%s\n", list.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  }
  std::fflush(stdout);

  const size_t n_dec = generated.size() > 1 ? generated.size() - 1 : 0;
  std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tok/s)\n", ids.size(), t_prefill,
               ids.size() / std::max(t_prefill, 1e-9));
  std::fprintf(stderr, "decode: %zu tokens in %.3f s (%.1f tok/s)\n", n_dec, t_decode,
               n_dec ? n_dec / std::max(t_decode, 1e-9) : 0.0);
  if (const ConstrainedReply* c = gen.constraint())
    std::fprintf(stderr, "json mask: %llu tokens, %.3f ms per token (%.1f%% of decode)%s\n",
                 (unsigned long long)c->masks(), 1e3 * c->mask_seconds() / double(std::max<uint64_t>(c->masks(), 1)),
                 100.0 * c->mask_seconds() / std::max(t_decode, 1e-9),
                 c->ended() ? "" : "; the document is not complete (raise -n)");
  if (verbose) {
    // Cold start: pipelines are created on first use (only the variants this model
    // and scheme dispatch), so their cost lands in the first prefill and decode.
    const PipelineCache& pc = e.device->pipelines();
    const std::string source = pc.loaded_cache_bytes()
                                   ? "read " + std::to_string(pc.loaded_cache_bytes()) +
                                         " bytes of pipeline cache from " + pc.cache_file()
                                   : "no pipeline cache file read";
    std::fprintf(stderr, "first token: %.3f s after start; pipelines: %zu created in %.3f s (%s)\n",
                 t_first_token, pc.size(), pc.create_seconds(), source.c_str());
  }
  if (print_ids) {
    std::fprintf(stderr, "prompt ids: %s\n", ids_line(ids).c_str());
    std::fprintf(stderr, "generated ids: %s\n", ids_line(generated).c_str());
  }
  return 0;
}

}  // namespace

int cmd_run(const Args& args) {
  try {
    return run(args);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::device_lost) throw;
    // The text printed so far stays; the error goes on a line of its own.  The engine is freed by now.
    std::printf("\n");
    std::fflush(stdout);
    // The engine's message ends with what an embedder does next; here only the failing call is kept.
    const std::string what = e.what(), key = "VK_ERROR_DEVICE_LOST from ";
    const size_t at = what.find(key);
    const std::string cause = at == std::string::npos ? "VK_ERROR_DEVICE_LOST"
                                                      : what.substr(at, what.find(')', at) - at);
    std::fprintf(stderr,
                 "reach run: error: the GPU was lost while running (%s).\n"
                 "The driver reset it: a submission ran longer than the OS allows (a timeout such as Windows' "
                 "TDR), the GPU ran out of memory, or the driver failed.\n"
                 "Try: update the GPU driver; a smaller --ctx and --chunk (less memory, less work per "
                 "submission); a lower submission bound where one can be set (smaller submissions finish within "
                 "the timeout); then run again.\n",
                 cause.c_str());
    return kExitDeviceLost;
  }
}

}  // namespace reach::cli
