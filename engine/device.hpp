#pragma once
// A Vulkan device reach computes on: either one reach creates and owns, or a
// host application's own VkInstance / VkPhysicalDevice / VkDevice / VkQueue
// that reach adopts without owning (games already have one).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "base/settings.hpp"
#include "engine/capabilities.hpp"
#include "engine/fault_injection.hpp"
#include "engine/vk_dispatch.hpp"

namespace reach {

class PipelineCache;

// Messages from the validation layer or driver, delivered synchronously on
// the thread of the Vulkan call that caused them.  A device given none writes
// each message to stderr as one line ("reach: vulkan validation error: ...").
using LogCallback = std::function<void(int severity /*0 info,1 warn,2 error*/, const std::string& message)>;

// Whether the loader (settings.vulkan_library, else the system's) lists VK_LAYER_KHRONOS_validation.
bool validation_layer_installed(const Settings& settings = {});

struct DeviceOptions {
  int index = -1;              // -1: settings.device_index / device_name, else the best type
  std::string name;            // substring of the device name; overrides index when set
  bool validation = false;     // also on when settings.validation
  bool low_priority = false;   // ask for a low queue priority (embedding next to a renderer)
  std::string pipeline_cache_dir;   // "" = settings.pipeline_cache_dir; "-" disables
  LogCallback on_validation;   // called for every validation message (tests fail on them)
  // The REACH_* knobs (base/settings.hpp), kept by the device for its pipelines, kernels and
  // sessions.  Default: none; an edge fills it from the environment with settings_from(std::getenv).
  Settings settings;
};

// A host app's handles.  reach never destroys them.  queue_lock, if set, is
// called with true before and false after every use of the queue.
struct AdoptedDevice {
  // The host's own vkGetInstanceProcAddr (its loader, volk's, ...): every instance and device
  // function reach calls comes from it, and reach opens no Vulkan library.  nullptr: the loader
  // settings.vulkan_library names, else the system's (engine/vk_loader.hpp).
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkQueue queue = VK_NULL_HANDLE;
  std::function<void(bool lock)> queue_lock;
  std::string pipeline_cache_dir;
  // Which optional features the host enabled on its VkDevice (reach cannot
  // query that): kernels needing a feature not enabled fall back to f32.
  bool storage_16bit_enabled = false;     // storageBuffer16BitAccess
  bool fp16_arithmetic_enabled = false;   // shaderFloat16
  bool subgroup_size_control_enabled = false;
  // VK_KHR_cooperative_matrix and its cooperativeMatrix feature, with shaderFloat16 and vulkanMemoryModel.
  bool cooperative_matrix_enabled = false;
  // The host enabled VK_EXT_debug_utils on its VkInstance: reach then registers
  // a messenger there, so validation messages (the host's own included: a
  // messenger sees the whole instance) reach on_validation.  Without it reach
  // cannot receive them (creating a messenger would itself be invalid).
  bool debug_utils_enabled = false;
  LogCallback on_validation;
  // As DeviceOptions::settings (the device choice and validation do not apply: the host made them).
  Settings settings;
};

// One memory heap now.  With VK_EXT_memory_budget (Capabilities::memory_budget)
// `budget` is what the driver grants this process (other processes' use taken
// out) and `usage` what the process holds; without it budget = size, usage = 0.
struct HeapBudget {
  uint64_t size = 0;
  uint64_t budget = 0;
  uint64_t usage = 0;
  bool reported = false;   // from VK_EXT_memory_budget
};

struct PhysicalDeviceInfo {
  uint32_t index;
  VkPhysicalDevice handle;
  Capabilities caps;
};

class Device {
 public:
  static std::unique_ptr<Device> create(const DeviceOptions& options = {});
  static std::unique_ptr<Device> adopt(const AdoptedDevice& handles);
  // Every physical device the loader reports, in loader order.  With
  // validation, the layer checks the enumeration and its messages go to
  // on_validation (none: stderr).
  // The loader is settings.vulkan_library's, else the system's.
  static std::vector<PhysicalDeviceInfo> list(bool validation = false, const LogCallback& on_validation = {},
                                              const Settings& settings = {});

  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return phys_; }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  bool owns_device() const { return owns_device_; }
  const Capabilities& caps() const { return caps_; }
  // This device's Vulkan functions: the device-level ones from vkGetDeviceProcAddr of this VkDevice
  // (engine/vk_dispatch.hpp says why), the instance-level ones from its VkInstance.
  const VkDeviceTable& vk() const { return vkd_; }
  const VkInstanceTable& vki() const { return vki_; }
  uint32_t memory_type_index(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const;
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return mem_props_; }
  // Queried on every call: the budget moves as this and other processes allocate.
  HeapBudget heap_budget(uint32_t heap) const;

  // Submits to the queue under the host's lock (if any).
  void submit(const VkSubmitInfo& info, VkFence fence);
  void wait_idle();

  // A lost device (VK_ERROR_DEVICE_LOST from a submission, a wait or an allocation) stays lost, as a real
  // one does: every later submit / wait / allocation throws Error(device_lost) without calling Vulkan,
  // while destruction still works (destructors wait on fences and ignore what they return).
  bool lost() const { return lost_.load(); }
  // Marks the device lost where `call` returned VK_ERROR_DEVICE_LOST; the choke points call it.
  void mark_lost(const char* call);
  // Throws Error(device_lost) with what to do when the device is lost; returns otherwise.
  void check_not_lost() const;
  // Throws for a failed `call`: Error(device_lost) (marking the device lost) for VK_ERROR_DEVICE_LOST,
  // else as vk_check.
  void check(VkResult result, const char* call);
  // The test hook that fails the Nth submission, wait or allocation (engine/fault_injection.hpp).
  FaultInjector& faults() { return faults_; }

  PipelineCache& pipelines();
  // The settings the device was created with (DeviceOptions::settings, AdoptedDevice::settings).
  const Settings& settings() const { return settings_; }
  // Whether validation messages reach this device's callback: the layer is on
  // (owned) or the host's instance has VK_EXT_debug_utils (adopted).
  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  // Validation messages of severity error seen since creation.
  uint64_t validation_errors() const { return sink_.errors.load(); }

 private:
  Device() = default;
  void init_common();

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  bool owns_instance_ = false;
  bool owns_device_ = false;
  VkInstanceTable vki_;
  VkDeviceTable vkd_;
  // Where the debug messenger delivers (its pUserData): outlives the messenger.
  struct MessageSink {
    LogCallback on_message;
    std::atomic<uint64_t> errors{0};
  };
  MessageSink sink_;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  Capabilities caps_;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  std::function<void(bool)> queue_lock_;
  std::mutex queue_mutex_;
  std::string pipeline_cache_dir_;
  Settings settings_;
  std::unique_ptr<PipelineCache> pipelines_;
  std::atomic<bool> lost_{false};
  std::string lost_call_;   // the call that first returned VK_ERROR_DEVICE_LOST, under lost_mutex_
  mutable std::mutex lost_mutex_;
  FaultInjector faults_;

  static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                        VkDebugUtilsMessageTypeFlagsEXT types,
                                                        const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                        void* user);
  static VkDebugUtilsMessengerCreateInfoEXT messenger_info(MessageSink* sink);
  static VkDebugUtilsMessengerEXT create_messenger(const VkInstanceTable& vki, MessageSink* sink);
};

// The message of a lost device: what happened and what to do (the C API, `reach run` and the server show it).
std::string device_lost_message(const std::string& call);

// Rank used to prefer discrete > integrated > virtual > CPU > other.
int device_type_rank(VkPhysicalDeviceType type);

}  // namespace reach
