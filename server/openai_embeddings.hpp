#pragma once
// POST /v1/embeddings (the OpenAI API): {"input": a string, a list of strings, a list of token ids or a
// list of such lists; "model"; "encoding_format": "float" (default) or "base64" (the float32 values'
// little-endian bytes); "dimensions": only the model's own (anything else is a 400, as reach does not
// shorten embeddings); "user": ignored}.  Each input goes through runtime/session/embedding.hpp's Embedder
// on its own, one request at a time (a lock), and comes back as {"object": "embedding", "index", "embedding"}.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/session/embedding.hpp"
#include "runtime/text/tokenizer.hpp"
#include "server/http_response.hpp"

namespace reach::server {

class EmbeddingsRoute {
 public:
  EmbeddingsRoute(std::unique_ptr<Embedder> embedder, const Tokenizer& tokenizer, std::string model_id)
      : embedder_(std::move(embedder)), tokenizer_(tokenizer), model_id_(std::move(model_id)) {}
  // The answer to the request body: 200 with the embeddings, or the error (400 naming the field; 503
  // while there is no Embedder).
  HttpResponse answer(const std::string& body);
  // After a lost device: null before the old model goes, a new Embedder once the model is loaded again.
  void reset(std::unique_ptr<Embedder> embedder);

 private:
  std::unique_ptr<Embedder> embedder_;
  Tokenizer tokenizer_;
  std::string model_id_;
  std::mutex mu_;   // one Embedder: one request at a time
};

// RFC 4648 base64 of the bytes (with padding).
std::string base64_encode(const void* data, size_t bytes);

}  // namespace reach::server
