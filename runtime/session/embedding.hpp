#pragma once
// Embeddings: a text's token ids through the model to the final-normed hidden state of every token
// (Session::prefill_hidden: the attention stays causal, as the model was trained), pooled into one
// vector by the model's pooling (runtime/config/pooling.hpp) and L2-normalized where the model says.
//
//   Embedder e(model, model_pooling(model));
//   std::vector<float> v = e.embed(model.tokenizer()->encode("a query", true));   // e.dims() floats
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/config/pooling.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/session.hpp"

namespace reach {

// The model's own pooling (its folder's sentence-transformers modules, or its GGUF's pooling_type);
// where it names none, a decoder's default: the last token, normalized (as Qwen3-Embedding).
PoolingSpec model_pooling(const Model& model);
// Whether the model says it is an embedding model (a pooling in its files, or a bare *Model class).
bool is_embedding_model(const Model& model);

// rows [n, dims] of hidden states -> one vector, pooled by spec (mean in double), normalized if it says.
// Throws invalid_argument for n == 0 or Pooling::none.
std::vector<float> pool_hidden(std::span<const float> rows, size_t n, size_t dims, const PoolingSpec& spec);

class Embedder {
 public:
  // context: the longest input in tokens (0: min(the model's, 4096)); chunk: the prefill chunk (0: the
  // default), a longer input goes through in several.
  Embedder(Model& model, const PoolingSpec& spec, uint32_t context = 0, uint32_t chunk = 0);
  // One input's vector (dims() floats): the session starts over for each.  Throws invalid_argument for
  // no ids or an id outside the vocabulary, context_overflow for more ids than the context.
  std::vector<float> embed(std::span<const int32_t> ids);
  // The hidden state of each token [n, dims()] of the last embed(), before pooling.
  const std::vector<float>& last_hidden() const { return hidden_; }
  size_t dims() const { return size_t(model_.config().hidden_size); }
  uint32_t context() const { return session_->capacity(); }
  const PoolingSpec& pooling() const { return spec_; }
  const Model& model() const { return model_; }

 private:
  Model& model_;
  PoolingSpec spec_;
  std::unique_ptr<Session> session_;
  std::vector<float> hidden_;
};

}  // namespace reach
