#include "engine/capabilities.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <sstream>
#include <vector>

namespace reach {

bool Capabilities::supports_uniform_texel(VkFormat f) const {
  for (size_t i = 0; i < std::size(kTexelFormats); ++i)
    if (kTexelFormats[i] == f) return uniform_texel[i];
  return false;
}

const char* Capabilities::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

std::string Capabilities::api_version_string() const {
  return std::to_string(VK_API_VERSION_MAJOR(api_version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(api_version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(api_version));
}

static std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / 1048576.0);
  return buf;
}

std::string Capabilities::summary() const {
  std::ostringstream s;
  s << device_name << " [" << type_name() << ", " << driver_name << " " << driver_info
    << ", Vulkan " << api_version_string() << "]"
    << " fp16=" << (fp16_arithmetic ? "yes" : "no")
    << " storage16=" << (storage_16bit ? "yes" : "no")
    << " int_dot=" << (integer_dot ? "yes" : "no")
    << " coopmat=" << (cooperative_matrix ? "yes" : "no")
    << " subgroup=" << subgroup_size;
  if (subgroup_min != subgroup_max) s << " (" << subgroup_min << "-" << subgroup_max << ")";
  s << (can_pin_subgroup() ? " pinnable" : " not-pinnable");
  s << (has_subgroup_arithmetic() ? " +arith" : "")
    << " shared=" << max_shared_memory / 1024 << " KiB"
    << " max_storage_range=" << mib(max_storage_buffer_range)
    << " max_alloc=" << mib(max_memory_allocation_size)
    << " max_buffer=" << mib(max_buffer_size)
    << " vram=" << mib(device_local_bytes)
    << " timestamps=" << (timestamps ? "yes" : "no")
    << " memory_budget=" << (memory_budget ? "yes" : "no");
  return s.str();
}

static std::string json_escape(const std::string& in) {
  std::string out;
  for (char c : in) {
    if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (static_cast<unsigned char>(c) < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); out += b; }
    else out += c;
  }
  return out;
}

std::string Capabilities::to_json() const {
  std::ostringstream s;
  s << "{\"name\":\"" << json_escape(device_name) << "\",\"type\":\"" << type_name()
    << "\",\"driver\":\"" << json_escape(driver_name) << "\",\"driver_info\":\"" << json_escape(driver_info)
    << "\",\"vendor_id\":" << vendor_id << ",\"device_id\":" << device_id
    << ",\"api_version\":\"" << api_version_string() << "\""
    << ",\"fp16_arithmetic\":" << (fp16_arithmetic ? "true" : "false")
    << ",\"storage_16bit\":" << (storage_16bit ? "true" : "false")
    << ",\"storage_8bit\":" << (storage_8bit ? "true" : "false")
    << ",\"integer_dot\":" << (integer_dot ? "true" : "false")
    << ",\"cooperative_matrix\":" << (cooperative_matrix ? "true" : "false")
    << ",\"subgroup_size\":" << subgroup_size << ",\"subgroup_min\":" << subgroup_min
    << ",\"subgroup_max\":" << subgroup_max
    << ",\"subgroup_size_control\":" << (subgroup_size_control ? "true" : "false")
    << ",\"subgroup_size_stages\":" << subgroup_size_stages
    << ",\"subgroup_pinnable\":" << (can_pin_subgroup() ? "true" : "false")
    << ",\"subgroup_arithmetic\":" << (has_subgroup_arithmetic() ? "true" : "false")
    << ",\"max_storage_buffer_range\":" << max_storage_buffer_range
    << ",\"max_memory_allocation_size\":" << max_memory_allocation_size
    << ",\"max_buffer_size\":" << max_buffer_size
    << ",\"max_shared_memory\":" << max_shared_memory
    << ",\"max_stage_storage_buffers\":" << max_stage_storage_buffers
    << ",\"max_stage_sampled\":" << max_stage_sampled
    << ",\"max_stage_resources\":" << max_stage_resources
    << ",\"max_workgroup_invocations\":" << max_workgroup_invocations
    << ",\"device_local_bytes\":" << device_local_bytes
    << ",\"timestamps\":" << (timestamps ? "true" : "false")
    << ",\"unified_memory\":" << (unified_memory ? "true" : "false")
    << ",\"memory_budget\":" << (memory_budget ? "true" : "false") << "}";
  return s.str();
}

Capabilities query_capabilities(const VkInstanceTable& vki, VkPhysicalDevice phys) {
  Capabilities c;

  VkPhysicalDeviceProperties base{};
  vki.vkGetPhysicalDeviceProperties(phys, &base);
  const bool v13 = base.apiVersion >= VK_API_VERSION_1_3;
  // Chain only structures the device's API version knows about.
  VkPhysicalDeviceMaintenance4Properties m4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties sg_ctrl{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES, &m4};
  VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, v13 ? &sg_ctrl : nullptr};
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, &sg};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, &m3};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &drv};
  vki.vkGetPhysicalDeviceProperties2(phys, &props);
  const auto& p = props.properties;

  c.device_name = p.deviceName;
  c.driver_name = drv.driverName;
  c.driver_info = drv.driverInfo;
  c.vendor_id = p.vendorID;
  c.device_id = p.deviceID;
  c.api_version = p.apiVersion;
  c.type = p.deviceType;
  for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) c.pipeline_cache_uuid[i] = p.pipelineCacheUUID[i];

  c.subgroup_size = sg.subgroupSize;
  c.subgroup_ops = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? sg.supportedOperations : 0;
  c.subgroup_min = v13 && sg_ctrl.minSubgroupSize ? sg_ctrl.minSubgroupSize : sg.subgroupSize;
  c.subgroup_max = v13 && sg_ctrl.maxSubgroupSize ? sg_ctrl.maxSubgroupSize : sg.subgroupSize;
  c.subgroup_size_stages = v13 ? sg_ctrl.requiredSubgroupSizeStages : 0;

  c.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  c.min_storage_buffer_offset_alignment = p.limits.minStorageBufferOffsetAlignment;
  c.max_shared_memory = p.limits.maxComputeSharedMemorySize;
  c.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    c.max_workgroup_size[i] = p.limits.maxComputeWorkGroupSize[i];
    c.max_workgroup_count[i] = p.limits.maxComputeWorkGroupCount[i];
  }
  c.max_push_constants = p.limits.maxPushConstantsSize;
  c.max_stage_storage_buffers = p.limits.maxPerStageDescriptorStorageBuffers;
  c.max_stage_sampled = p.limits.maxPerStageDescriptorSampledImages;
  c.max_stage_resources = p.limits.maxPerStageResources;
  c.min_texel_buffer_offset_alignment = std::max<uint64_t>(p.limits.minTexelBufferOffsetAlignment, 1);
  c.max_texel_buffer_elements = p.limits.maxTexelBufferElements;
  for (size_t i = 0; i < std::size(Capabilities::kTexelFormats); ++i) {
    VkFormatProperties fp{};
    vki.vkGetPhysicalDeviceFormatProperties(phys, Capabilities::kTexelFormats[i], &fp);
    c.uniform_texel[i] = (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) != 0;
  }
  c.timestamp_period_ns = p.limits.timestampPeriod;

  c.max_buffer_size = v13 ? m4.maxBufferSize : m3.maxMemoryAllocationSize;
  c.max_memory_allocation_size = m3.maxMemoryAllocationSize;

  VkPhysicalDeviceShaderIntegerDotProductFeatures idot_feat{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures sg_feat{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
                                                      &idot_feat};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, v13 ? &sg_feat : nullptr};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  vki.vkGetPhysicalDeviceFeatures2(phys, &feats);
  c.fp16_arithmetic = f12.shaderFloat16;
  c.int8_arithmetic = f12.shaderInt8;
  c.storage_16bit = f11.storageBuffer16BitAccess;
  c.storage_8bit = f12.storageBuffer8BitAccess;
  c.timeline_semaphore = f12.timelineSemaphore;
  c.int64 = feats.features.shaderInt64;
  c.subgroup_size_control = v13 && sg_feat.subgroupSizeControl && sg_feat.computeFullSubgroups;
  c.integer_dot = v13 && idot_feat.shaderIntegerDotProduct;

  uint32_t qf_count = 0;
  vki.vkGetPhysicalDeviceQueueFamilyProperties(phys, &qf_count, nullptr);
  std::vector<VkQueueFamilyProperties> qfs(qf_count);
  vki.vkGetPhysicalDeviceQueueFamilyProperties(phys, &qf_count, qfs.data());
  for (const auto& q : qfs)
    if ((q.queueFlags & VK_QUEUE_COMPUTE_BIT) && q.timestampValidBits > 0 && p.limits.timestampComputeAndGraphics)
      c.timestamps = true;

  VkPhysicalDeviceMemoryProperties mem{};
  vki.vkGetPhysicalDeviceMemoryProperties(phys, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) c.device_local_bytes += mem.memoryHeaps[i].size;
  c.unified_memory = true;
  bool any_local = false;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    const auto f = mem.memoryTypes[i].propertyFlags;
    if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
      any_local = true;
      if (!(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) c.unified_memory = false;
    }
  }
  if (!any_local) c.unified_memory = false;

  uint32_t n_ext = 0;
  vki.vkEnumerateDeviceExtensionProperties(phys, nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  vki.vkEnumerateDeviceExtensionProperties(phys, nullptr, &n_ext, exts.data());
  bool coopmat_ext = false;
  for (const auto& e : exts) {
    if (std::strcmp(e.extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) == 0) c.memory_budget = true;
    if (std::strcmp(e.extensionName, kCoopmatExtension) == 0) coopmat_ext = true;
  }
  if (coopmat_ext) {
    VkCoopmatFeatures cm;
    VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &cm};
    vki.vkGetPhysicalDeviceFeatures2(phys, &f);
    c.coopmat_shapes = query_coopmat_shapes(vki, phys);
    c.cooperative_matrix = cm.cooperativeMatrix && c.fp16_arithmetic && f12.vulkanMemoryModel &&
                           f12.vulkanMemoryModelDeviceScope && !c.coopmat_shapes.empty();
  }
  return c;
}

}  // namespace reach
