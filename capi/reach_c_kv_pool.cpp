// The C API's KV pool (include/reach.h): one paged KV cache that sessions of a model share
// (runtime/session/kv_pool.hpp); reach_session_create_in_pool is in reach_c_session.cpp.
#include <tuple>

#include "capi/capi_internal.hpp"

using namespace reach;
using namespace reach::capi;

extern "C" {

reach_kv_pool_params reach_kv_pool_default_params(void) {
  reach_kv_pool_params p{};
  p.size = sizeof p;
  p.cache_type_k = REACH_KV_F16;
  p.cache_type_v = REACH_KV_F16;
  return p;
}

reach_status reach_kv_pool_create(reach_model* model, const reach_kv_pool_params* params, reach_kv_pool** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    auto m = live(model, Kind::model, "model");
    const reach_kv_pool_params p = read_params(params, reach_kv_pool_default_params(), "reach_kv_pool");
    KvPoolOptions o;
    o.tokens = p.tokens;
    o.bytes = p.bytes;
    o.block_rows = p.block_rows;
    for (auto [value, field, dst] : {std::tuple{p.cache_type_k, "cache_type_k", &o.cache_type_k},
                                     std::tuple{p.cache_type_v, "cache_type_v", &o.cache_type_v}}) {
      need(value >= REACH_KV_F32 && value <= REACH_KV_Q4_0, REACH_ERROR_INVALID_ARGUMENT,
           std::string(field) + " is " + std::to_string(value) + ": it must be a reach_kv_type (REACH_KV_F32 .. REACH_KV_Q4_0)");
      *dst = KvType(value);
    }
    need(p.tokens <= (1u << 31), REACH_ERROR_INVALID_ARGUMENT,
         "tokens is " + std::to_string(p.tokens) + ": a pool holds at most 2^31 positions");
    o.rotated_keys = p.rotated_keys != 0;
    std::unique_lock<std::recursive_mutex> l(m->device->mu);
    auto kp = std::make_unique<reach_kv_pool>();
    kp->model = m.get();
    kp->pool = std::make_shared<KvPool>(*m->model, o);
    log(REACH_LOG_INFO, kp->pool->describe());
    m->pools++;
    registry_add(kp.get(), Kind::kv_pool);
    *out = kp.release();
  });
}

reach_status reach_kv_pool_free(reach_kv_pool* pool) {
  if (!pool) return REACH_OK;
  return guard(__func__, [&] {
    FreeClaim claim(pool, Kind::kv_pool, "pool");
    reach_model* m = pool->model;
    std::unique_lock<std::recursive_mutex> l(m->device->mu);
    need(pool->sessions == 0, REACH_ERROR_INVALID_STATE,
         std::to_string(pool->sessions) + " session(s) still use this KV pool: free them first");
    claim.commit();
    delete pool;
    m->pools--;
  });
}

reach_status reach_kv_pool_get_info(const reach_kv_pool* pool, reach_kv_pool_info* info) {
  return guard(__func__, [&] {
    auto kp = live(pool, Kind::kv_pool, "pool");
    need(info, REACH_ERROR_INVALID_ARGUMENT, "info is NULL");
    std::unique_lock<std::recursive_mutex> l(kp->model->device->mu);
    const KvPool& p = *kp->pool;
    reach_kv_pool_info full{};
    full.size = sizeof full;
    full.block_rows = p.block_rows();
    full.blocks = p.blocks().total();
    full.blocks_used = p.blocks().used();
    full.blocks_cached = p.blocks().cached();
    full.sessions = uint32_t(kp->sessions);
    full.bytes = p.bytes();
    full.bytes_per_token = p.bytes_per_token();
    full.prefix_hits = kp->prefix_hits;
    full.prefix_hit_tokens = kp->prefix_hit_tokens;
    write_info(info, full, "info");
  });
}

}  // extern "C"
