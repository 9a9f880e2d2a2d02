#include "base/error.hpp"

namespace reach {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::vulkan: return "vulkan";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::io: return "io";
    case ErrorCode::format: return "format";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::context_overflow: return "context_overflow";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::internal: return "internal";
    case ErrorCode::device_lost: return "device_lost";
    case ErrorCode::kv_pool_full: return "kv_pool_full";
  }
  return "unknown";
}

}  // namespace reach
