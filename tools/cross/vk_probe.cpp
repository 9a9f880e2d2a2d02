// Lists the Vulkan devices the Windows Vulkan loader offers, opening it the way reach does on
// Windows (LoadLibraryW + vkGetInstanceProcAddr, no import library).  Built with MinGW-w64 and
// run under Wine by tools/wine_stage.sh --probe; under Wine on Linux it should list llvmpipe
// (Wine's vulkan-1.dll forwards to the host's loader and Mesa's lavapipe).
// Exit status: 0 with at least one device, 1 otherwise (what failed is printed).
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#include <windows.h>

#include <cstdio>
#include <vector>

int main() {
  HMODULE loader = LoadLibraryW(L"vulkan-1.dll");
  if (!loader) {
    std::printf("vk_probe: LoadLibraryW(vulkan-1.dll) failed, error %lu\n", GetLastError());
    return 1;
  }
  auto get_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(
      reinterpret_cast<void *>(GetProcAddress(loader, "vkGetInstanceProcAddr")));
  if (!get_proc) {
    std::printf("vk_probe: vulkan-1.dll has no vkGetInstanceProcAddr\n");
    return 1;
  }
  auto create_instance = reinterpret_cast<PFN_vkCreateInstance>(get_proc(nullptr, "vkCreateInstance"));
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vk_probe";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  VkResult r = create_instance(&info, nullptr, &instance);
  if (r != VK_SUCCESS) {
    std::printf("vk_probe: vkCreateInstance failed: VkResult %d\n", static_cast<int>(r));
    return 1;
  }
  auto enumerate = reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(
      get_proc(instance, "vkEnumeratePhysicalDevices"));
  auto properties = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties>(
      get_proc(instance, "vkGetPhysicalDeviceProperties"));
  auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(get_proc(instance, "vkDestroyInstance"));
  uint32_t count = 0;
  enumerate(instance, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  enumerate(instance, &count, devices.data());
  for (VkPhysicalDevice d : devices) {
    VkPhysicalDeviceProperties p{};
    properties(d, &p);
    std::printf("vk_probe: device %s (Vulkan %u.%u.%u)\n", p.deviceName, VK_API_VERSION_MAJOR(p.apiVersion),
                VK_API_VERSION_MINOR(p.apiVersion), VK_API_VERSION_PATCH(p.apiVersion));
  }
  std::printf("vk_probe: %u device(s)\n", count);
  destroy(instance, nullptr);
  return count > 0 ? 0 : 1;
}
