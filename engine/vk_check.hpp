#pragma once
// Vulkan results as reach::Errors: the one place the error type meets Vulkan,
// so base/error.hpp stays free of <vulkan/vulkan.h>.
#include <vulkan/vulkan.h>

#include "base/error.hpp"

namespace reach {

const char* vk_result_name(VkResult result);

// Throws Error for any result < 0.  `call` names the Vulkan function,
// `hint` (optional) tells the user what to try.
void vk_check(VkResult result, const char* call, const char* hint = nullptr);

}  // namespace reach
