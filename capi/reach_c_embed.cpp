// The C API's embeddings (include/reach.h): a model's Embedder (runtime/session/embedding.hpp), made on
// the first reach_embed and kept with the model.
#include "capi/capi_internal.hpp"

using namespace reach;
using namespace reach::capi;

reach_embed_params reach_embed_default_params(void) {
  reach_embed_params p{};
  p.size = sizeof p;
  p.pooling = REACH_POOLING_MODEL;
  p.normalize = -1;
  return p;
}

reach_status reach_embedding_dims(const reach_model* model, size_t* dims) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    need(dims != nullptr, REACH_ERROR_INVALID_ARGUMENT, "dims is NULL");
    *dims = size_t(m->model->config().hidden_size);
  });
}

reach_status reach_embed(reach_model* model, const int32_t* tokens, size_t n, float* out, size_t dims,
                         const reach_embed_params* params) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    const reach_embed_params p = read_params(params, reach_embed_default_params(), "reach_embed_params");
    need(p.pooling >= REACH_POOLING_MODEL && p.pooling <= REACH_POOLING_LAST, REACH_ERROR_INVALID_ARGUMENT,
         "reach_embed_params.pooling must be REACH_POOLING_MODEL, _MEAN, _CLS or _LAST");
    need(p.normalize >= -1 && p.normalize <= 1, REACH_ERROR_INVALID_ARGUMENT,
         "reach_embed_params.normalize must be -1 (as the model says), 0 or 1");
    need(tokens != nullptr && n > 0, REACH_ERROR_INVALID_ARGUMENT, "no tokens: an embedding needs at least one");
    need(out != nullptr, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    const size_t want = size_t(m->model->config().hidden_size);
    need(dims == want, REACH_ERROR_INVALID_ARGUMENT,
         "dims is " + std::to_string(dims) + ", the model's embeddings have " + std::to_string(want) +
             " (reach_embedding_dims)");
    std::unique_lock<std::recursive_mutex> l(m->device->mu);
    if (!m->embedder) m->embedder = std::make_unique<Embedder>(*m->model, model_pooling(*m->model));
    std::vector<float> v = m->embedder->embed(std::span<const int32_t>(tokens, n));
    if (p.pooling != REACH_POOLING_MODEL || p.normalize != -1) {
      PoolingSpec spec = m->embedder->pooling();
      if (p.pooling == REACH_POOLING_MEAN) spec.pooling = Pooling::mean;
      if (p.pooling == REACH_POOLING_CLS) spec.pooling = Pooling::cls;
      if (p.pooling == REACH_POOLING_LAST) spec.pooling = Pooling::last;
      if (p.normalize != -1) spec.normalize = p.normalize == 1;
      v = pool_hidden(m->embedder->last_hidden(), n, want, spec);
    }
    std::copy(v.begin(), v.end(), out);
  });
}
