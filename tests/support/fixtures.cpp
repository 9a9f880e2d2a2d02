#include "tests/support/fixtures.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "engine/vk_loader.hpp"

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

namespace {
// Owned here rather than by a function-local static: release_fixtures() ends it.
std::unique_ptr<Gpu> g_gpu;
}  // namespace

bool validation_wanted() {
  const char* v = std::getenv("REACH_VALIDATION");
  return !(v && std::string(v) == "0");
}

Gpu& gpu() {
  if (!g_gpu) {
    auto g = std::make_unique<Gpu>();
    DeviceOptions opt;
    // The suites' device is the CLI's: REACH_COOPMAT=1, REACH_MATVEC_WG, REACH_TUNING_FILE, ... apply
    // (tools/coopmat_check.sh, tools/gpu_check.sh run suites under them).
    opt.settings = settings_from(std::getenv);
    opt.validation = validation_wanted();
    opt.on_validation = on_validation_message;
    g->device = Device::create(opt);
    g->allocator = std::make_unique<Allocator>(*g->device);
    g->transfer = std::make_unique<Transfer>(*g->allocator);
    g->kernels = std::make_unique<Kernels>(*g->device);
    g_gpu = std::move(g);
  }
  return *g_gpu;
}

void release_fixtures() {
  if (!g_gpu) return;
  // Users before what they use: kernels hold pipelines of the device, buffers live in the allocator.
  g_gpu->kernels.reset();
  g_gpu->transfer.reset();
  g_gpu->allocator.reset();
  g_gpu->device.reset();
  g_gpu.reset();
}

HostVulkan::HostVulkan(bool debug_utils) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  const char* layer = "VK_LAYER_KHRONOS_validation";
  ici.enabledLayerCount = validation_wanted() ? 1 : 0;
  ici.ppEnabledLayerNames = &layer;
  const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  if (debug_utils) {
    ici.enabledExtensionCount = 1;
    ici.ppEnabledExtensionNames = &ext;
  }
  const VkGlobalTable& global = vulkan_loader(Settings{});
  get_instance_proc_addr = global.vkGetInstanceProcAddr;
  REQUIRE(global.vkCreateInstance(&ici, nullptr, &instance) == VK_SUCCESS);
  vki = load_instance_table(get_instance_proc_addr, instance, "the test host's loader");
  uint32_t n = 1;
  vki.vkEnumeratePhysicalDevices(instance, &n, &phys);
  REQUIRE(n >= 1);
  uint32_t qn = 0;
  vki.vkGetPhysicalDeviceQueueFamilyProperties(phys, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qfs(qn);
  vki.vkGetPhysicalDeviceQueueFamilyProperties(phys, &qn, qfs.data());
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
  REQUIRE(vki.vkCreateDevice(phys, &dci, nullptr, &device) == VK_SUCCESS);
  vk = load_device_table(vki.vkGetDeviceProcAddr, device, "the test host's device");
  vk.vkGetDeviceQueue(device, family, 0, &queue);
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = family;
  REQUIRE(vk.vkCreateCommandPool(device, &cpi, nullptr, &pool) == VK_SUCCESS);
}

HostVulkan::~HostVulkan() {
  if (device) vk.vkDeviceWaitIdle(device);
  if (pool) vk.vkDestroyCommandPool(device, pool, nullptr);
  if (device) vk.vkDestroyDevice(device, nullptr);
  if (instance) vki.vkDestroyInstance(instance, nullptr);
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

std::vector<uint16_t> Gpu::download_u16(const Buffer& b, size_t count, VkDeviceSize offset) {
  std::vector<uint16_t> out(count);
  transfer->download(b, offset, out.data(), count * 2);
  return out;
}

uint32_t Gpu::run(const std::function<void(CommandList&)>& record) {
  CommandList cmd(*device);
  cmd.begin();
  record(cmd);
  cmd.end();
  cmd.run();
  return cmd.dispatch_count();
}

}  // namespace reach::test
