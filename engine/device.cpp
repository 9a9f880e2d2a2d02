#include "engine/device.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "engine/device_profile.hpp"
#include "engine/pipeline.hpp"
#include "engine/vk_check.hpp"
#include "engine/vk_loader.hpp"

namespace reach {

namespace {

bool has_layer(const VkGlobalTable& g, const char* name) {
  uint32_t n = 0;
  g.vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  g.vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_instance_extension(const VkGlobalTable& g, const char* name) {
  uint32_t n = 0;
  g.vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  g.vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

struct InstanceBundle {
  VkInstanceTable vki;   // vki.instance: the instance
  bool debug_utils = false;
};

const char* severity_name(int level) { return level >= 2 ? "error" : level == 1 ? "warning" : "info"; }

// instance_messages: chained into VkInstanceCreateInfo so that the layer's
// checks of vkCreateInstance / vkDestroyInstance are delivered too.
InstanceBundle make_instance(const Settings& settings, bool validation,
                             const VkDebugUtilsMessengerCreateInfoEXT* instance_messages) {
  const VkGlobalTable& g = vulkan_loader(settings);
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (g.vkEnumerateInstanceVersion) g.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2)
    throw Error(ErrorCode::unsupported, "the Vulkan loader supports only Vulkan " +
                std::to_string(VK_API_VERSION_MAJOR(loader_version)) + "." +
                std::to_string(VK_API_VERSION_MINOR(loader_version)) + "; reach needs 1.2 or newer: update libvulkan1");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "reach";
  app.pEngineName = "reach";
  app.apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;

  std::vector<const char*> layers, exts;
  InstanceBundle out;
  if (validation) {
    if (!has_layer(g, "VK_LAYER_KHRONOS_validation"))
      throw Error(ErrorCode::unsupported,
                  "validation was requested (the validation option, or REACH_VALIDATION=1 where read) but "
                  "VK_LAYER_KHRONOS_validation is not installed: apt-get install vulkan-validationlayers, or "
                  "turn validation off (unset REACH_VALIDATION)");
    layers.push_back("VK_LAYER_KHRONOS_validation");
  }
  if (has_instance_extension(g, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) && validation) {
    exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    out.debug_utils = true;
  }
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  if (out.debug_utils && instance_messages) ci.pNext = instance_messages;
  // MoltenVK devices are only listed with portability enumeration.
  if (has_instance_extension(g, "VK_KHR_portability_enumeration")) {
    exts.push_back("VK_KHR_portability_enumeration");
    ci.flags |= 0x00000001;  // VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
  }
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  VkInstance instance = VK_NULL_HANDLE;
  vk_check(g.vkCreateInstance(&ci, nullptr, &instance), "vkCreateInstance",
           "no Vulkan driver found: install one (CPU-only machines: apt-get install mesa-vulkan-drivers)");
  try {
    out.vki = load_instance_table(g.vkGetInstanceProcAddr, instance, "the Vulkan loader's instance");
  } catch (...) {
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(g.vkGetInstanceProcAddr(instance, "vkDestroyInstance"));
    if (destroy) destroy(instance, nullptr);
    throw;
  }
  return out;
}

std::vector<VkPhysicalDevice> physical_devices(const VkInstanceTable& vki) {
  uint32_t n = 0;
  vk_check(vki.vkEnumeratePhysicalDevices(vki.instance, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devs(n);
  vk_check(vki.vkEnumeratePhysicalDevices(vki.instance, &n, devs.data()), "vkEnumeratePhysicalDevices");
  devs.resize(n);
  return devs;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// settings.device_profile (REACH_DEVICE_PROFILE): read once per call, refused with its reason, or
// nullptr when none is named.
std::unique_ptr<DeviceProfile> profile_of(const Settings& settings) {
  if (settings.device_profile.empty()) return nullptr;
  auto p = std::make_unique<DeviceProfile>(load_device_profile(settings.device_profile));
  if (const std::string why = profile_refusal(*p); !why.empty()) throw Error(ErrorCode::unsupported, why);
  return p;
}

}  // namespace

bool validation_layer_installed(const Settings& settings) {
  return has_layer(vulkan_loader(settings), "VK_LAYER_KHRONOS_validation");
}

int device_type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
  }
}

std::vector<PhysicalDeviceInfo> Device::list(bool validation, const LogCallback& on_validation,
                                              const Settings& settings) {
  const auto profile = profile_of(settings);   // before the instance: a bad file leaks nothing
  MessageSink sink;
  sink.on_message = on_validation;
  const VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info(&sink);
  InstanceBundle inst = make_instance(settings, validation, &mi);
  const VkInstanceTable& vki = inst.vki;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  auto destroy_instance = [&] {
    if (messenger && vki.vkDestroyDebugUtilsMessengerEXT)
      vki.vkDestroyDebugUtilsMessengerEXT(vki.instance, messenger, nullptr);
    vki.vkDestroyInstance(vki.instance, nullptr);
  };
  std::vector<PhysicalDeviceInfo> out;
  try {
    if (inst.debug_utils) messenger = create_messenger(vki, &sink);
    uint32_t i = 0;
    for (VkPhysicalDevice d : physical_devices(vki)) out.push_back({i++, d, query_capabilities(vki, d)});
    if (profile)
      for (auto& o : out) o.caps = apply_profile(o.caps, *profile);
  } catch (...) {
    destroy_instance();
    throw;
  }
  for (auto& o : out) o.handle = VK_NULL_HANDLE;  // the instance dies here
  destroy_instance();
  return out;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Device::debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                      VkDebugUtilsMessageTypeFlagsEXT,
                                                      const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                      void* user) {
  auto* sink = static_cast<MessageSink*>(user);
  const int level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT     ? 2
                    : severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT ? 1
                                                                                  : 0;
  if (level == 2) sink->errors++;
  const char* text = data && data->pMessage ? data->pMessage : "";
  // A Vulkan callback must not throw: a failing host callback loses the message, never the process.
  try {
    if (sink->on_message) {
      sink->on_message(level, text);
    } else {
      // Nobody asked for the messages but validation is on: one line each on stderr.
      std::string line = text;
      std::replace(line.begin(), line.end(), '\n', ' ');
      std::fprintf(stderr, "reach: vulkan validation %s: %s\n", severity_name(level), line.c_str());
    }
  } catch (...) {
  }
  return VK_FALSE;
}

VkDebugUtilsMessengerCreateInfoEXT Device::messenger_info(MessageSink* sink) {
  VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT;
  mi.pfnUserCallback = &Device::debug_callback;
  mi.pUserData = sink;
  return mi;
}

VkDebugUtilsMessengerEXT Device::create_messenger(const VkInstanceTable& vki, MessageSink* sink) {
  if (!vki.vkCreateDebugUtilsMessengerEXT || !vki.vkDestroyDebugUtilsMessengerEXT) return VK_NULL_HANDLE;
  const VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info(sink);
  VkDebugUtilsMessengerEXT m = VK_NULL_HANDLE;
  vk_check(vki.vkCreateDebugUtilsMessengerEXT(vki.instance, &mi, nullptr, &m), "vkCreateDebugUtilsMessengerEXT");
  return m;
}

std::unique_ptr<Device> Device::create(const DeviceOptions& options) {
  std::unique_ptr<Device> dev(new Device());
  const bool validation = options.validation || options.settings.validation;
  dev->sink_.on_message = options.on_validation;
  const VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info(&dev->sink_);
  InstanceBundle inst = make_instance(options.settings, validation, &mi);
  dev->vki_ = inst.vki;
  dev->instance_ = inst.vki.instance;
  dev->owns_instance_ = true;
  const VkInstanceTable& vki = dev->vki_;
  if (inst.debug_utils) dev->messenger_ = create_messenger(vki, &dev->sink_);

  auto devs = physical_devices(vki);
  if (devs.empty())
    throw Error(ErrorCode::unsupported,
                "no Vulkan device found: install a GPU driver, or mesa-vulkan-drivers for the CPU (lavapipe)");

  // Selection: explicit name, explicit index, the settings' (REACH_DEVICE), else best type.
  std::string name = options.name;
  int index = options.index;
  if (name.empty() && index < 0) {
    name = options.settings.device_name;
    index = options.settings.device_index;
  }
  auto available = [&] {   // "\n  INDEX: NAME" per device, for the errors below
    std::string all;
    for (size_t i = 0; i < devs.size(); ++i) all += "\n  " + std::to_string(i) + ": " + query_capabilities(vki, devs[i]).device_name;
    return all;
  };
  int chosen = -1;
  if (!name.empty()) {
    for (size_t i = 0; i < devs.size(); ++i)
      if (lower(query_capabilities(vki, devs[i]).device_name).find(lower(name)) != std::string::npos) { chosen = int(i); break; }
    if (chosen < 0)
      throw Error(ErrorCode::invalid_argument, "no Vulkan device matches '" + name + "'; available:" + available());
  } else if (index >= 0) {
    if (index >= static_cast<int>(devs.size()))
      throw Error(ErrorCode::invalid_argument, "device index " + std::to_string(index) + " is out of range: " +
                                                   std::to_string(devs.size()) + " device(s); available:" + available());
    chosen = index;
  } else {
    int best_rank = -1;
    for (size_t i = 0; i < devs.size(); ++i) {
      VkPhysicalDeviceProperties p;
      vki.vkGetPhysicalDeviceProperties(devs[i], &p);
      if (p.apiVersion < VK_API_VERSION_1_2) continue;
      int r = device_type_rank(p.deviceType);
      if (r > best_rank) { best_rank = r; chosen = int(i); }
    }
    if (chosen < 0) throw Error(ErrorCode::unsupported, "no Vulkan 1.2 device found; update the GPU driver");
  }
  dev->phys_ = devs[chosen];
  dev->caps_ = query_capabilities(vki, dev->phys_);
  if (dev->caps_.api_version < VK_API_VERSION_1_2)
    throw Error(ErrorCode::unsupported, dev->caps_.device_name + " supports Vulkan " + dev->caps_.api_version_string() +
                                            "; reach needs 1.2: update the driver");
  // A device profile narrows what reach uses, and so the features enabled below.
  if (const auto profile = profile_of(options.settings)) dev->caps_ = apply_profile(dev->caps_, *profile);

  uint32_t qn = 0;
  vki.vkGetPhysicalDeviceQueueFamilyProperties(dev->phys_, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qfs(qn);
  vki.vkGetPhysicalDeviceQueueFamilyProperties(dev->phys_, &qn, qfs.data());
  int family = -1;
  // Prefer a compute-only family (async compute), then any with compute.
  for (uint32_t i = 0; i < qn && family < 0; ++i)
    if ((qfs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qfs[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = int(i);
  for (uint32_t i = 0; i < qn && family < 0; ++i)
    if (qfs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = int(i);
  if (family < 0) throw Error(ErrorCode::unsupported, dev->caps_.device_name + " has no compute queue");
  dev->queue_family_ = static_cast<uint32_t>(family);

  const float priority = options.low_priority ? 0.0f : 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = dev->queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;

  const auto& c = dev->caps_;
  const bool v13 = c.api_version >= VK_API_VERSION_1_3;
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  f13.subgroupSizeControl = c.subgroup_size_control;
  f13.computeFullSubgroups = c.subgroup_size_control;
  f13.shaderIntegerDotProduct = c.integer_dot;   // the int8-activation linear kernels (linear_q8.cpp)
  // Enable only what a shader uses: 16-bit storage (f16/bf16 weights, f16
  // caches) and pinned subgroup sizes.  fp16 arithmetic, int8 and int64 are
  // reported in Capabilities but no kernel needs them yet.  Integer dot products
  // (packed int8x4) where the device has them.
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, v13 ? &f13 : nullptr};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  f11.storageBuffer16BitAccess = c.storage_16bit;
  f12.timelineSemaphore = c.timeline_semaphore;   // CommandList::submit_after
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  // Cooperative matrices (the prefill GEMMs of kernels/linear_coopmat.cpp): the extension, its
  // feature, the f16 arithmetic its f16 matrices need and the memory model their SPIR-V declares.
  VkCoopmatFeatures cm;
  if (c.cooperative_matrix) {
    cm.cooperativeMatrix = VK_TRUE;
    cm.pNext = f2.pNext;
    f2.pNext = &cm;
    f12.shaderFloat16 = VK_TRUE;
    f12.vulkanMemoryModel = VK_TRUE;
    // With the memory model on, Device scope (every kernel's atomics and memoryBarrierBuffer, e.g. the
    // split-K decode's arrival counters) is valid SPIR-V only with this feature too (VUID-RuntimeSpirv-
    // vulkanMemoryModel-06265); Capabilities asks for both before it offers cooperative matrices.
    f12.vulkanMemoryModelDeviceScope = VK_TRUE;
  }

  std::vector<const char*> dev_exts;
  {
    uint32_t n = 0;
    vki.vkEnumerateDeviceExtensionProperties(dev->phys_, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> exts(n);
    vki.vkEnumerateDeviceExtensionProperties(dev->phys_, nullptr, &n, exts.data());
    for (const auto& e : exts)
      if (std::strcmp(e.extensionName, "VK_KHR_portability_subset") == 0) dev_exts.push_back("VK_KHR_portability_subset");
  }
  if (c.memory_budget) dev_exts.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (c.cooperative_matrix) dev_exts.push_back(kCoopmatExtension);
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(dev_exts.size());
  dci.ppEnabledExtensionNames = dev_exts.data();
  vk_check(vki.vkCreateDevice(dev->phys_, &dci, nullptr, &dev->device_), "vkCreateDevice");
  // Device functions from the device itself (engine/vk_dispatch.hpp).
  try {
    dev->vkd_ = load_device_table(vki.vkGetDeviceProcAddr, dev->device_, "the Vulkan driver of " + dev->caps_.device_name);
  } catch (...) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDevice>(vki.vkGetDeviceProcAddr(dev->device_, "vkDestroyDevice"));
    if (destroy) destroy(dev->device_, nullptr);
    dev->device_ = VK_NULL_HANDLE;
    throw;
  }
  dev->owns_device_ = true;
  dev->vkd_.vkGetDeviceQueue(dev->device_, dev->queue_family_, 0, &dev->queue_);
  dev->settings_ = options.settings;
  dev->pipeline_cache_dir_ =
      options.pipeline_cache_dir.empty() ? options.settings.pipeline_cache_dir : options.pipeline_cache_dir;
  dev->init_common();
  return dev;
}

std::unique_ptr<Device> Device::adopt(const AdoptedDevice& h) {
  if (!h.instance || !h.physical_device || !h.device || !h.queue)
    throw Error(ErrorCode::invalid_argument,
                "adopting a device needs VkInstance, VkPhysicalDevice, VkDevice and VkQueue (one was VK_NULL_HANDLE)");
  std::unique_ptr<Device> dev(new Device());
  // The host's functions when it passed its vkGetInstanceProcAddr; else the loader's.
  const bool host_gipa = h.get_instance_proc_addr != nullptr;
  const PFN_vkGetInstanceProcAddr gipa =
      host_gipa ? h.get_instance_proc_addr : vulkan_loader(h.settings).vkGetInstanceProcAddr;
  const std::string source = host_gipa ? "the host's vkGetInstanceProcAddr" : "the Vulkan loader";
  dev->vki_ = load_instance_table(gipa, h.instance, source);
  dev->vkd_ = load_device_table(dev->vki_.vkGetDeviceProcAddr, h.device, source + " (vkGetDeviceProcAddr)");
  const VkInstanceTable& vki = dev->vki_;
  dev->instance_ = h.instance;
  dev->phys_ = h.physical_device;
  dev->device_ = h.device;
  dev->queue_ = h.queue;
  dev->queue_family_ = h.queue_family;
  dev->queue_lock_ = h.queue_lock;
  dev->sink_.on_message = h.on_validation;
  // The host's instance: a messenger only where the host enabled debug utils on it.
  if (h.debug_utils_enabled) dev->messenger_ = create_messenger(vki, &dev->sink_);
  dev->caps_ = query_capabilities(vki, h.physical_device);
  if (dev->caps_.api_version < VK_API_VERSION_1_2)
    throw Error(ErrorCode::unsupported, "the adopted device supports only Vulkan " + dev->caps_.api_version_string() +
                                            "; reach needs 1.2");
  uint32_t qn = 0;
  vki.vkGetPhysicalDeviceQueueFamilyProperties(h.physical_device, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qfs(qn);
  vki.vkGetPhysicalDeviceQueueFamilyProperties(h.physical_device, &qn, qfs.data());
  if (h.queue_family >= qn || !(qfs[h.queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT))
    throw Error(ErrorCode::invalid_argument, "adopted queue family " + std::to_string(h.queue_family) +
                                                 " does not support compute; pass a compute-capable family");
  // Only features the host says it enabled may be used.
  dev->caps_.storage_16bit = dev->caps_.storage_16bit && h.storage_16bit_enabled;
  dev->caps_.fp16_arithmetic = dev->caps_.fp16_arithmetic && h.fp16_arithmetic_enabled;
  dev->caps_.subgroup_size_control = dev->caps_.subgroup_size_control && h.subgroup_size_control_enabled;
  dev->caps_.cooperative_matrix = dev->caps_.cooperative_matrix && dev->caps_.fp16_arithmetic &&
                                  h.cooperative_matrix_enabled;
  dev->caps_.storage_8bit = false;
  dev->caps_.int8_arithmetic = false;
  dev->caps_.timeline_semaphore = false;
  if (const auto profile = profile_of(h.settings)) dev->caps_ = apply_profile(dev->caps_, *profile);
  dev->settings_ = h.settings;
  dev->pipeline_cache_dir_ = h.pipeline_cache_dir.empty() ? h.settings.pipeline_cache_dir : h.pipeline_cache_dir;
  dev->init_common();
  return dev;
}

void Device::init_common() {
  faults_.arm_from(settings_.fault);
  vki_.vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
  pipelines_ = std::make_unique<PipelineCache>(*this, pipeline_cache_dir_);
}

Device::~Device() {
  // On a lost device this returns VK_ERROR_DEVICE_LOST at once; what was submitted is over either way.
  if (device_ && vkd_.vkDeviceWaitIdle) vkd_.vkDeviceWaitIdle(device_);
  pipelines_.reset();  // saves the pipeline cache, destroys pipelines
  if (owns_device_ && device_ && vkd_.vkDestroyDevice) vkd_.vkDestroyDevice(device_, nullptr);
  if (messenger_) vki_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (owns_instance_ && instance_) vki_.vkDestroyInstance(instance_, nullptr);
}

PipelineCache& Device::pipelines() { return *pipelines_; }

HeapBudget Device::heap_budget(uint32_t heap) const {
  HeapBudget out;
  if (heap >= mem_props_.memoryHeapCount) return out;
  out.size = mem_props_.memoryHeaps[heap].size;
  out.budget = out.size;
  // A physical-device query: valid wherever the device supports the extension,
  // so adopted devices get it too, whether or not the host enabled it.
  if (!caps_.memory_budget) return out;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT mb{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 mp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, &mb};
  vki_.vkGetPhysicalDeviceMemoryProperties2(phys_, &mp);
  if (mb.heapBudget[heap] == 0) return out;   // a driver that fills nothing: keep the heap size
  out.budget = mb.heapBudget[heap];
  out.usage = mb.heapUsage[heap];
  out.reported = true;
  return out;
}

uint32_t Device::memory_type_index(uint32_t type_bits, VkMemoryPropertyFlags required,
                                   VkMemoryPropertyFlags preferred) const {
  int best = -1;
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const auto f = mem_props_.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & (required | preferred)) == (required | preferred)) return i;
    if (best < 0) best = int(i);
  }
  if (best < 0)
    throw Error(ErrorCode::unsupported, caps_.device_name + " has no memory type with the required properties");
  return static_cast<uint32_t>(best);
}

std::string device_lost_message(const std::string& call) {
  return "the GPU was lost (VK_ERROR_DEVICE_LOST from " + call +
         "): the driver reset it, a submission ran past the OS's timeout (Windows TDR) or it ran out of memory; "
         "the device and everything made on it (models, sessions) can no longer be used: free them, create a "
         "new device (or adopt the host's again) and load the model again";
}

void Device::mark_lost(const char* call) {
  std::lock_guard lock(lost_mutex_);
  if (!lost_.load()) lost_call_ = call;
  lost_.store(true);
}

void Device::check_not_lost() const {
  if (!lost_.load()) return;
  std::lock_guard lock(lost_mutex_);
  throw Error(ErrorCode::device_lost, device_lost_message(lost_call_));
}

void Device::check(VkResult result, const char* call) {
  if (result == VK_ERROR_DEVICE_LOST) {
    mark_lost(call);
    check_not_lost();
  }
  vk_check(result, call);
}

void Device::submit(const VkSubmitInfo& info, VkFence fence) {
  check_not_lost();
  // An injected fault stands for the submission: nothing reaches the queue.
  VkResult r = faults_.next(FaultPoint::submit);
  if (r == VK_SUCCESS) {
    std::lock_guard<std::mutex> guard(queue_mutex_);
    if (queue_lock_) queue_lock_(true);
    r = vkd_.vkQueueSubmit(queue_, 1, &info, fence);
    if (queue_lock_) queue_lock_(false);
  }
  check(r, "vkQueueSubmit");
}

void Device::wait_idle() {
  check_not_lost();
  std::lock_guard<std::mutex> guard(queue_mutex_);
  if (queue_lock_) queue_lock_(true);
  VkResult r = vkd_.vkQueueWaitIdle(queue_);
  if (queue_lock_) queue_lock_(false);
  check(r, "vkQueueWaitIdle");
}

}  // namespace reach
