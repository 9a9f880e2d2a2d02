#pragma once
// Progress of a long library operation (a model's weight upload), reported to
// the caller, which draws it however it likes: the library prints nothing.
#include <cstdint>
#include <functional>

namespace reach {

// Called with the work done and the total (bytes for a model load).  Return
// false to cancel: the operation stops and throws Error(ErrorCode::cancelled).
using ProgressFn = std::function<bool(uint64_t done, uint64_t total)>;

}  // namespace reach
