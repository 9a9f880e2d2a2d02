#pragma once
// The Vulkan device shared by the GPU test suites.  Validation is always on:
// any validation message fails the test case that caused it.
//
// The shared objects are made on first use and destroyed by release_fixtures(),
// which tests/support/main.cpp calls once doctest has run, before main returns.
// A function-local static would instead be destroyed after the Vulkan loader's
// and the validation layer's own globals, and LeakSanitizer would report their
// allocations; so no test keeps a Vulkan object in a static of its own.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/command.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "engine/transfer.hpp"
#include "engine/vk_dispatch.hpp"
#include "kernels/kernels.hpp"

namespace reach::test {

// Members are declared in creation order, so destruction runs kernels,
// transfer, allocator, then the device.
struct Gpu {
  std::unique_ptr<Device> device;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<Transfer> transfer;
  std::unique_ptr<Kernels> kernels;

  Buffer upload_f32(const std::vector<float>& v, Arena arena = Arena::scratch, const std::string& label = "test");
  Buffer upload_bytes(const void* data, size_t bytes, Arena arena = Arena::scratch, const std::string& label = "test");
  Buffer zeros(size_t bytes, const std::string& label = "out");
  std::vector<float> download_f32(const Buffer& b, size_t count, VkDeviceSize offset = 0);
  std::vector<uint16_t> download_u16(const Buffer& b, size_t count, VkDeviceSize offset = 0);
  // Records `record` into a fresh command list, submits it and waits; returns the list's dispatch count.
  uint32_t run(const std::function<void(CommandList&)>& record);
};

// A host application's own Vulkan objects, made with raw Vulkan (validation
// layer on), for the adopted-device tests.  Destroyed in reverse order.
struct HostVulkan {
  // The host's Vulkan functions: the loader's vkGetInstanceProcAddr (reach's own copy of the
  // system loader, engine/vk_loader.hpp) and the tables filled from it.  `get_instance_proc_addr`
  // is what a host hands an adopted device.
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
  VkInstanceTable vki;
  VkDeviceTable vk;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t family = 0;
  VkCommandPool pool = VK_NULL_HANDLE;
  // debug_utils: also enable VK_EXT_debug_utils on the instance (for hosts that
  // route validation messages to reach's callback).
  explicit HostVulkan(bool debug_utils = false);
  ~HostVulkan();
  HostVulkan(const HostVulkan&) = delete;
  HostVulkan& operator=(const HostVulkan&) = delete;
};

// The shared device, allocator, transfer and kernels; made on first use.
Gpu& gpu();
// Destroys every shared fixture in dependency order.  Called by main after the run.
void release_fixtures();
// The validation callback used by every device the tests create.
void on_validation_message(int severity, const std::string& message);
// The suites run under the Khronos validation layer unless REACH_VALIDATION=0
// (a GPU machine with only its vendor's driver has no layer).
bool validation_wanted();

}  // namespace reach::test
