#include "tests/test_device.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace reach::test {

void on_validation_message(int severity, const std::string& message) {
  if (severity < 1) return;   // warnings and errors fail; info does not
  if (doctest::is_running_in_test) {
    const std::string text = "Vulkan validation: " + message;
    FAIL_CHECK(text);
  } else {
    std::fprintf(stderr, "Vulkan validation (outside a test): %s\n", message.c_str());
    std::_Exit(3);
  }
}

Gpu& gpu() {
  static std::unique_ptr<Gpu> g;
  if (!g) {
    g = std::make_unique<Gpu>();
    DeviceOptions opt;
    opt.validation = true;
    opt.on_validation = on_validation_message;
    g->device = Device::create(opt);
    g->allocator = std::make_unique<Allocator>(*g->device);
    g->transfer = std::make_unique<Transfer>(*g->allocator);
    g->kernels = std::make_unique<Kernels>(*g->device);
  }
  return *g;
}

HostVulkan::HostVulkan() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  const char* layer = "VK_LAYER_KHRONOS_validation";
  ici.enabledLayerCount = 1;
  ici.ppEnabledLayerNames = &layer;
  REQUIRE(vkCreateInstance(&ici, nullptr, &instance) == VK_SUCCESS);
  uint32_t n = 1;
  vkEnumeratePhysicalDevices(instance, &n, &phys);
  REQUIRE(n >= 1);
  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qfs(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &qn, qfs.data());
  while (family < qn && !(qfs[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
  REQUIRE(family < qn);
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  REQUIRE(vkCreateDevice(phys, &dci, nullptr, &device) == VK_SUCCESS);
  vkGetDeviceQueue(device, family, 0, &queue);
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = family;
  REQUIRE(vkCreateCommandPool(device, &cpi, nullptr, &pool) == VK_SUCCESS);
}

HostVulkan::~HostVulkan() {
  if (device) vkDeviceWaitIdle(device);
  if (pool) vkDestroyCommandPool(device, pool, nullptr);
  if (device) vkDestroyDevice(device, nullptr);
  if (instance) vkDestroyInstance(instance, nullptr);
}

Buffer Gpu::upload_bytes(const void* data, size_t bytes, Arena arena, const std::string& label) {
  Buffer b = allocator->allocate(arena, bytes, label);
  transfer->upload(b, 0, data, bytes);
  return b;
}

Buffer Gpu::upload_f32(const std::vector<float>& v, Arena arena, const std::string& label) {
  return upload_bytes(v.data(), v.size() * 4, arena, label);
}

Buffer Gpu::zeros(size_t bytes, const std::string& label) {
  Buffer b = allocator->allocate(Arena::scratch, bytes, label);
  std::vector<char> z(bytes, 0);
  transfer->upload(b, 0, z.data(), bytes);
  return b;
}

std::vector<float> Gpu::download_f32(const Buffer& b, size_t count, VkDeviceSize offset) {
  std::vector<float> out(count);
  transfer->download(b, offset, out.data(), count * 4);
  return out;
}

std::filesystem::path source_root() {
  if (const char* s = std::getenv("REACH_SOURCE_ROOT"); s && *s) return s;
  return std::filesystem::current_path();
}

std::filesystem::path build_root() {
  if (const char* s = std::getenv("REACH_BUILD_ROOT"); s && *s) return s;
  return std::filesystem::current_path() / "build";
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

uint16_t f32_to_f16_bits(float f) {
  // Independent of the GPU path: IEEE conversion with round-to-nearest-even.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000u;
    const uint32_t shift = uint32_t(14 - exp);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return uint16_t(sign | h);
}

float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(float(mant | 0x400u), int(exp) - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

float bf16_bits_to_f32(uint16_t b) {
  uint32_t x = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace reach::test
