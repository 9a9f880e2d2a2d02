#include "runtime/serve/slot_pool.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "engine/device.hpp"

namespace reach::serve {

std::shared_ptr<KvPool> make_slot_pool(Model& model, const SessionOptions& options, size_t slots, std::string& why) {
  why.clear();
  if (Session::rings_some_layer(model, options)) {
    why = "a sliding-window layer keeps only its window in each slot's own cache (a pool would hold every "
          "position); give --kv-size for a pool anyway";
    return nullptr;
  }
  KvPoolOptions po = Session::pool_options(model, options);
  // Whole blocks per slot: a sequence never shares a block it writes, so each slot's context takes its own
  // ceil(context / block) blocks (slots x context rounded up once would leave the last slot short).
  if (!po.block_rows) po.block_rows = KvPool::default_block_rows(model.device().caps());
  const uint64_t per_slot = (uint64_t(Session::context_of(model, options)) + po.block_rows - 1) / po.block_rows;
  po.tokens = uint32_t(std::min<uint64_t>(per_slot * po.block_rows * std::max<size_t>(slots, 1), uint64_t(1) << 31));
  try {
    return std::make_shared<KvPool>(model, po);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    why = std::string("a pool of the slots' contexts cannot be made (") + e.what() + ")";
    return nullptr;
  }
}

}  // namespace reach::serve
