#include "runtime/session/embedding.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.hpp"

namespace reach {

namespace {

PoolingSpec declared_pooling(const Model& model) {
  if (!model.is_gguf()) return pooling_of_folder(model.dir());
  return pooling_of_gguf(GgufFile::open(model.dir()));
}

}  // namespace

PoolingSpec model_pooling(const Model& model) {
  PoolingSpec spec = declared_pooling(model);
  if (spec.pooling == Pooling::none) spec = {Pooling::last, true};
  return spec;
}

bool is_embedding_model(const Model& model) {
  const std::string& a = model.config().architecture;
  const bool bare = a.size() > 5 && a.compare(a.size() - 5, 5, "Model") == 0;   // Qwen3Model: no head
  return bare || declared_pooling(model).pooling != Pooling::none;
}

std::vector<float> pool_hidden(std::span<const float> rows, size_t n, size_t dims, const PoolingSpec& spec) {
  if (n == 0) throw Error(ErrorCode::invalid_argument, "no tokens to pool: an input needs at least one token");
  if (rows.size() < n * dims) throw Error(ErrorCode::internal, "pool_hidden: fewer hidden values than n x dims");
  std::vector<double> v(dims, 0.0);
  switch (spec.pooling) {
    case Pooling::mean:
      for (size_t r = 0; r < n; ++r)
        for (size_t i = 0; i < dims; ++i) v[i] += rows[r * dims + i];
      for (double& x : v) x /= double(n);
      break;
    case Pooling::cls:
      for (size_t i = 0; i < dims; ++i) v[i] = rows[i];
      break;
    case Pooling::last:
      for (size_t i = 0; i < dims; ++i) v[i] = rows[(n - 1) * dims + i];
      break;
    default: throw Error(ErrorCode::invalid_argument, "pool_hidden: no pooling given (mean, cls or last)");
  }
  if (spec.normalize) {
    double sq = 0;
    for (double x : v) sq += x * x;
    // sentence-transformers' Normalize: x / max(|x|, 1e-12).
    const double norm = std::max(std::sqrt(sq), 1e-12);
    for (double& x : v) x /= norm;
  }
  return std::vector<float>(v.begin(), v.end());
}

Embedder::Embedder(Model& model, const PoolingSpec& spec, uint32_t context, uint32_t chunk)
    : model_(model), spec_(spec) {
  if (spec_.pooling == Pooling::none)
    throw Error(ErrorCode::invalid_argument, "an Embedder needs a pooling (mean, cls or last)");
  SessionOptions o;
  o.context = context;
  o.chunk = chunk;
  session_ = std::make_unique<Session>(model_, o);
}

std::vector<float> Embedder::embed(std::span<const int32_t> ids) {
  session_->rewind(0);
  hidden_.clear();
  session_->prefill_hidden(ids, hidden_);
  return pool_hidden(hidden_, ids.size(), dims(), spec_);
}

}  // namespace reach
