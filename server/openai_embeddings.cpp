#include "server/openai_embeddings.hpp"

#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "runtime/formats/json_parse.hpp"
#include "server/http_error.hpp"

namespace reach::server {

namespace {

using nlohmann::json;

constexpr int kMaxDepth = 8;
constexpr size_t kMaxValues = 1 << 20;
constexpr size_t kMaxInputs = 2048;   // OpenAI's limit per request

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError{400, message, "invalid_request_error", param, ""};
}

bool is_ids(const json& j) {
  if (!j.is_array() || j.empty()) return false;
  for (const json& x : j)
    if (!x.is_number_integer()) return false;
  return true;
}

// The inputs as token id lists: strings encoded as the model's tokenizer does (its special tokens added).
std::vector<std::vector<int32_t>> inputs_of(const json& input, const Tokenizer& tk, int64_t vocab) {
  const char* shape = "'input' must be a string, a list of strings, a list of token ids or a list of such lists";
  std::vector<json> items;
  if (input.is_string() || is_ids(input)) items.push_back(input);
  else if (input.is_array() && !input.empty()) items.assign(input.begin(), input.end());
  else bad("input", input.is_array() ? "'input' is an empty list: give at least one input" : shape);
  if (items.size() > kMaxInputs)
    bad("input", std::to_string(items.size()) + " inputs: at most " + std::to_string(kMaxInputs) + " per request");
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < items.size(); ++i) {
    const json& x = items[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    std::vector<int32_t> ids;
    if (x.is_string()) {
      if (x.get_ref<const std::string&>().empty()) bad("input", where + " is an empty string");
      ids = tk.encode(x.get<std::string>(), true);
    } else if (is_ids(x)) {
      for (const json& t : x) {
        const int64_t id = t.get<int64_t>();
        if (id < 0 || id >= vocab)
          bad("input", where + " holds the token id " + std::to_string(id) + ", outside the vocabulary of " +
                           std::to_string(vocab));
        ids.push_back(int32_t(id));
      }
    } else {
      bad("input", where + ": " + shape);
    }
    if (ids.empty()) bad("input", where + " encodes to no tokens");
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace

std::string base64_encode(const void* data, size_t bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((bytes + 2) / 3 * 4);
  for (size_t i = 0; i < bytes; i += 3) {
    const uint32_t b = uint32_t(p[i]) << 16 | (i + 1 < bytes ? uint32_t(p[i + 1]) << 8 : 0) |
                       (i + 2 < bytes ? uint32_t(p[i + 2]) : 0);
    out += kAlphabet[b >> 18 & 63];
    out += kAlphabet[b >> 12 & 63];
    out += i + 1 < bytes ? kAlphabet[b >> 6 & 63] : '=';
    out += i + 2 < bytes ? kAlphabet[b & 63] : '=';
  }
  return out;
}

void EmbeddingsRoute::reset(std::unique_ptr<Embedder> embedder) {
  std::lock_guard<std::mutex> l(mu_);
  embedder_ = std::move(embedder);
}

HttpResponse EmbeddingsRoute::answer(const std::string& text) {
  try {
    json body;
    try {
      body = parse_json_bounded(text, kMaxDepth, kMaxValues);
    } catch (const JsonTooLarge& e) {
      bad("", std::string("the request body ") + e.what());
    } catch (const json::exception& e) {
      bad("", std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) bad("", "the request body must be a JSON object with 'input'");
    if (body.contains("model") && !body["model"].is_null()) {
      if (!body["model"].is_string()) bad("model", "'model' must be a string");
      if (body["model"].get<std::string>() != model_id_)
        throw ApiError{404, "the model '" + body["model"].get<std::string>() + "' does not exist: this server has '" +
                                model_id_ + "'",
                       "invalid_request_error", "model", "model_not_found"};
    }
    bool base64 = false;
    if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
      const json& f = body["encoding_format"];
      if (!f.is_string() || (f != "float" && f != "base64"))
        bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
      base64 = f == "base64";
    }
    std::lock_guard<std::mutex> l(mu_);
    if (!embedder_)
      throw ApiError{503, "the model is loading again after a lost GPU: retry in a few seconds", "server_error", "",
                     "model_loading"};
    const size_t dims = embedder_->dims();
    if (body.contains("dimensions") && !body["dimensions"].is_null()) {
      const json& d = body["dimensions"];
      if (!d.is_number_integer() || d.get<int64_t>() != int64_t(dims))
        bad("dimensions", "'dimensions' is not supported: this model's embeddings have " + std::to_string(dims) +
                              " dimensions, and reach does not shorten them (leave 'dimensions' out)");
    }
    if (!body.contains("input")) bad("input", "'input' is required: the text (or token ids) to embed");
    const std::vector<std::vector<int32_t>> inputs =
        inputs_of(body["input"], tokenizer_, embedder_->model().config().vocab_size);
    json data = json::array();
    size_t tokens = 0;
    {
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].size() > embedder_->context())
          throw ApiError{400,
                         "input[" + std::to_string(i) + "] is " + std::to_string(inputs[i].size()) +
                             " tokens; an embedding takes at most " + std::to_string(embedder_->context()),
                         "invalid_request_error", "input", "context_length_exceeded"};
        const std::vector<float> v = embedder_->embed(inputs[i]);
        tokens += inputs[i].size();
        json e = {{"object", "embedding"}, {"index", i}};
        if (base64) {   // the float32 values' little-endian bytes, whatever the host's order
          std::vector<uint8_t> bytes(v.size() * 4);
          for (size_t k = 0; k < v.size(); ++k) {
            uint32_t u;
            std::memcpy(&u, &v[k], 4);
            for (int b = 0; b < 4; ++b) bytes[k * 4 + b] = uint8_t(u >> (8 * b));
          }
          e["embedding"] = base64_encode(bytes.data(), bytes.size());
        } else {
          e["embedding"] = v;
        }
        data.push_back(std::move(e));
      }
    }
    return json_response({{"object", "list"},
                          {"data", std::move(data)},
                          {"model", model_id_},
                          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
  } catch (const ApiError& e) {
    return error_response(e);
  } catch (const Error& e) {
    const bool ours = e.code() == ErrorCode::invalid_argument || e.code() == ErrorCode::context_overflow;
    return error_response({ours ? 400 : 500, e.what(), ours ? "invalid_request_error" : "server_error", "", ""});
  }
}

}  // namespace reach::server
