#pragma once
// Finds the Vulkan loader at run time and fills reach's dispatch tables
// (engine/vk_dispatch.hpp) through vkGetInstanceProcAddr / vkGetDeviceProcAddr.
#include <string>
#include <vector>

#include "base/settings.hpp"
#include "engine/vk_dispatch.hpp"

namespace reach {

// The names tried, in order, when settings.vulkan_library is empty:
// libvulkan.so.1 (Linux, the BSDs), vulkan-1.dll (Windows), libvulkan.1.dylib
// then libMoltenVK.dylib (macOS).
const std::vector<std::string>& default_vulkan_libraries();

// The global functions of the loader settings.vulkan_library names (REACH_VULKAN_LIBRARY), else of
// the first of default_vulkan_libraries() that opens.  Each library is opened once per process, by
// the first caller (thread-safe), and never closed: reach's objects, and a host's, may use it until
// exit.  Throws Error naming every library tried, or the entry point a library lacks.
const VkGlobalTable& vulkan_loader(const Settings& settings);

// The tables from a vkGetInstanceProcAddr: the loader's, or a host's own (the C API's adopted
// device).  `source` names where it came from, for the errors ("libvulkan.so.1", "the host's
// vkGetInstanceProcAddr").  A required function that is missing is an Error naming it.
VkGlobalTable load_global_table(PFN_vkGetInstanceProcAddr get_instance_proc_addr, const std::string& source);
VkInstanceTable load_instance_table(PFN_vkGetInstanceProcAddr get_instance_proc_addr, VkInstance instance,
                                    const std::string& source);
// The device's own functions, from vkGetDeviceProcAddr (VkInstanceTable::vkGetDeviceProcAddr).
VkDeviceTable load_device_table(PFN_vkGetDeviceProcAddr get_device_proc_addr, VkDevice device,
                                const std::string& source);

}  // namespace reach
