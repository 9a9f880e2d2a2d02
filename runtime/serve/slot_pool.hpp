// The KV pool a server's slots share when no size is asked for (`reach serve` without --kv-size).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/session/kv_pool.hpp"
#include "runtime/session/session.hpp"

namespace reach::serve {

// A pool of `slots` whole contexts of these options: the memory the slots' own caches would reserve,
// shared, so that prompts map each other's blocks whichever slot computed them and one decode dispatch
// per layer serves every running slot.  nullptr, with why in `why`, where a pool would cost more than
// the slots' own caches (a sliding-window layer they keep in a ring: the pool holds its every position
// unless every layer is windowed) or cannot be made (more than one binding holds, out of memory); the
// slots then keep a cache each, as with --no-kv-pool.
std::shared_ptr<KvPool> make_slot_pool(Model& model, const SessionOptions& options, size_t slots, std::string& why);

}  // namespace reach::serve
