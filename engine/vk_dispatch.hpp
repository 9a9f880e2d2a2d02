#pragma once
// reach's own Vulkan dispatch tables.  reach is compiled with VK_NO_PROTOTYPES
// and links no libvulkan: every entry point is looked up at run time, so one
// binary runs wherever a loader can be found (libvulkan.so.1, vulkan-1.dll,
// MoltenVK), and inside a host that brings its own loader (volk, a game's).
//
//  - VkGlobalTable: vkGetInstanceProcAddr(NULL, ...), before any instance.
//  - VkInstanceTable: from vkGetInstanceProcAddr(instance, ...).
//  - VkDeviceTable: from vkGetDeviceProcAddr(device, ...), held by each Device
//    (Device::vk()).  Device-level pointers from the device skip the loader's
//    per-call trampoline, and each device keeps the functions of the driver (and
//    loader: an adopted device's host may have its own) it came from.
//
// The members carry the Vulkan names, so a call reads `dev.vk().vkCreateBuffer(...)`
// and searching for a Vulkan function finds its uses.
#include <vulkan/vulkan.h>

namespace reach {

// X(name): required; a table without it is an error naming it.
#define REACH_VK_GLOBAL_FUNCTIONS(X)        \
  X(vkCreateInstance)                       \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)
// Vulkan 1.1's: a 1.0 loader has none (reach then reports the loader's version as 1.0).
#define REACH_VK_GLOBAL_OPTIONAL(X) X(vkEnumerateInstanceVersion)

#define REACH_VK_INSTANCE_FUNCTIONS(X)      \
  X(vkDestroyInstance)                      \
  X(vkEnumeratePhysicalDevices)             \
  X(vkGetPhysicalDeviceProperties)          \
  X(vkGetPhysicalDeviceProperties2)         \
  X(vkGetPhysicalDeviceFeatures2)           \
  X(vkGetPhysicalDeviceFormatProperties)    \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)    \
  X(vkGetPhysicalDeviceMemoryProperties2)   \
  X(vkEnumerateDeviceExtensionProperties)   \
  X(vkCreateDevice)                         \
  X(vkGetDeviceProcAddr)
// Present only where the instance enabled VK_EXT_debug_utils.
#define REACH_VK_INSTANCE_OPTIONAL(X)       \
  X(vkCreateDebugUtilsMessengerEXT)         \
  X(vkDestroyDebugUtilsMessengerEXT)

#define REACH_VK_DEVICE_FUNCTIONS(X)   \
  X(vkDestroyDevice)                   \
  X(vkGetDeviceQueue)                  \
  X(vkDeviceWaitIdle)                  \
  X(vkQueueSubmit)                     \
  X(vkQueueWaitIdle)                   \
  X(vkAllocateMemory)                  \
  X(vkFreeMemory)                      \
  X(vkMapMemory)                       \
  X(vkUnmapMemory)                     \
  X(vkCreateBuffer)                    \
  X(vkDestroyBuffer)                   \
  X(vkGetBufferMemoryRequirements)     \
  X(vkBindBufferMemory)                \
  X(vkCreateBufferView)                \
  X(vkDestroyBufferView)               \
  X(vkCreateCommandPool)               \
  X(vkDestroyCommandPool)              \
  X(vkAllocateCommandBuffers)          \
  X(vkFreeCommandBuffers)              \
  X(vkResetCommandBuffer)              \
  X(vkBeginCommandBuffer)              \
  X(vkEndCommandBuffer)                \
  X(vkCreateFence)                     \
  X(vkDestroyFence)                    \
  X(vkResetFences)                     \
  X(vkWaitForFences)                   \
  X(vkGetFenceStatus)                  \
  X(vkCreateEvent)                     \
  X(vkDestroyEvent)                    \
  X(vkSetEvent)                        \
  X(vkCreateQueryPool)                 \
  X(vkDestroyQueryPool)                \
  X(vkGetQueryPoolResults)             \
  X(vkCreateDescriptorPool)            \
  X(vkDestroyDescriptorPool)           \
  X(vkResetDescriptorPool)             \
  X(vkAllocateDescriptorSets)          \
  X(vkUpdateDescriptorSets)            \
  X(vkCreateDescriptorSetLayout)       \
  X(vkDestroyDescriptorSetLayout)      \
  X(vkCreatePipelineLayout)            \
  X(vkDestroyPipelineLayout)           \
  X(vkCreateShaderModule)              \
  X(vkDestroyShaderModule)             \
  X(vkCreatePipelineCache)             \
  X(vkDestroyPipelineCache)            \
  X(vkGetPipelineCacheData)            \
  X(vkCreateComputePipelines)          \
  X(vkDestroyPipeline)                 \
  X(vkCmdBindPipeline)                 \
  X(vkCmdBindDescriptorSets)           \
  X(vkCmdPushConstants)                \
  X(vkCmdDispatch)                     \
  X(vkCmdDispatchIndirect)             \
  X(vkCmdPipelineBarrier)              \
  X(vkCmdCopyBuffer)                   \
  X(vkCmdFillBuffer)                   \
  X(vkCmdWaitEvents)                   \
  X(vkCmdResetQueryPool)               \
  X(vkCmdWriteTimestamp)

#define REACH_VK_MEMBER(name) PFN_##name name = nullptr;

struct VkGlobalTable {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  REACH_VK_GLOBAL_FUNCTIONS(REACH_VK_MEMBER)
  REACH_VK_GLOBAL_OPTIONAL(REACH_VK_MEMBER)
};

struct VkInstanceTable {
  VkInstance instance = VK_NULL_HANDLE;   // the instance these functions belong to
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  REACH_VK_INSTANCE_FUNCTIONS(REACH_VK_MEMBER)
  REACH_VK_INSTANCE_OPTIONAL(REACH_VK_MEMBER)
};

struct VkDeviceTable {
  VkDevice device = VK_NULL_HANDLE;   // the device these functions belong to
  REACH_VK_DEVICE_FUNCTIONS(REACH_VK_MEMBER)
};

#undef REACH_VK_MEMBER

}  // namespace reach
