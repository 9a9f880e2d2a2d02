#pragma once
// The Vulkan device shared by the GPU test suites.  Validation is always on:
// any validation message fails the test case that caused it.
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/command.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "engine/memory.hpp"
#include "engine/transfer.hpp"

namespace reach::test {

struct Gpu {
  std::unique_ptr<Device> device;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<Transfer> transfer;
  std::unique_ptr<Kernels> kernels;

  Buffer upload_f32(const std::vector<float>& v, Arena arena = Arena::scratch, const std::string& label = "test");
  Buffer upload_bytes(const void* data, size_t bytes, Arena arena = Arena::scratch, const std::string& label = "test");
  Buffer zeros(size_t bytes, const std::string& label = "out");
  std::vector<float> download_f32(const Buffer& b, size_t count, VkDeviceSize offset = 0);
};

// A host application's own Vulkan objects, made with raw Vulkan (validation
// layer on), for the adopted-device tests.  Destroyed in reverse order.
struct HostVulkan {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t family = 0;
  VkCommandPool pool = VK_NULL_HANDLE;
  HostVulkan();
  ~HostVulkan();
  HostVulkan(const HostVulkan&) = delete;
  HostVulkan& operator=(const HostVulkan&) = delete;
};

// Created on first use; lives until the process exits.
Gpu& gpu();
// The validation callback used by every device the tests create.
void on_validation_message(int severity, const std::string& message);
// Repository root (REACH_SOURCE_ROOT, set by meson test) and build root.
std::filesystem::path source_root();
std::filesystem::path build_root();

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
uint16_t f32_to_f16_bits(float f);   // round to nearest even
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);  // round to nearest even
float bf16_bits_to_f32(uint16_t b);

}  // namespace reach::test
