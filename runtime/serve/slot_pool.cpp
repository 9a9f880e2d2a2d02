#include "runtime/serve/slot_pool.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace reach::serve {

std::shared_ptr<KvPool> make_slot_pool(Model& model, const SessionOptions& options, size_t slots, std::string& why) {
  why.clear();
  if (Session::rings_some_layer(model, options)) {
    why = "a sliding-window layer keeps only its window in each slot's own cache (a pool would hold every "
          "position); give --kv-size for a pool anyway";
    return nullptr;
  }
  KvPoolOptions po = Session::pool_options(model, options);
  po.tokens = uint32_t(std::min<uint64_t>(uint64_t(Session::context_of(model, options)) * std::max<size_t>(slots, 1),
                                          uint64_t(1) << 31));
  try {
    return std::make_shared<KvPool>(model, po);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    why = std::string("a pool of the slots' contexts cannot be made (") + e.what() + ")";
    return nullptr;
  }
}

}  // namespace reach::serve
