#include "engine/vk_check.hpp"

#include <string>

namespace reach {

const char* vk_result_name(VkResult r) {
  switch (r) {
#define REACH_VK_CASE(x) case x: return #x;
    REACH_VK_CASE(VK_SUCCESS)
    REACH_VK_CASE(VK_NOT_READY)
    REACH_VK_CASE(VK_TIMEOUT)
    REACH_VK_CASE(VK_INCOMPLETE)
    REACH_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    REACH_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    REACH_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    REACH_VK_CASE(VK_ERROR_DEVICE_LOST)
    REACH_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    REACH_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    REACH_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    REACH_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    REACH_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    REACH_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    REACH_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    REACH_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    REACH_VK_CASE(VK_ERROR_UNKNOWN)
    REACH_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    REACH_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    REACH_VK_CASE(VK_ERROR_FRAGMENTATION)
    REACH_VK_CASE(VK_PIPELINE_COMPILE_REQUIRED)
#undef REACH_VK_CASE
    default: return "VK_RESULT_UNKNOWN";
  }
}

void vk_check(VkResult result, const char* call, const char* hint) {
  if (result >= 0) return;
  std::string msg = std::string(call) + " failed with " + vk_result_name(result) + " (" +
                    std::to_string(static_cast<int>(result)) + ")";
  ErrorCode code = ErrorCode::vulkan;
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
    code = ErrorCode::out_of_memory;
    if (!hint) hint = "use a smaller context, a smaller model or f16 weights";
  } else if (result == VK_ERROR_DEVICE_LOST) {
    code = ErrorCode::device_lost;
    if (!hint) hint = "the GPU reset or the driver crashed; make a new device and load the model again";
  } else if (result == VK_ERROR_INCOMPATIBLE_DRIVER || result == VK_ERROR_INITIALIZATION_FAILED) {
    if (!hint) hint = "install a Vulkan driver (on a CPU-only machine: apt-get install mesa-vulkan-drivers)";
  }
  if (hint) msg += ": " + std::string(hint);
  throw Error(code, msg);
}

}  // namespace reach
