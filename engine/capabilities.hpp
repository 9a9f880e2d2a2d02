#pragma once
// What a physical device can do, queried once.  Shader variants (f16 vs f32
// storage, subgroup size, tile sizes) are chosen from this record.
#include <cstdint>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "engine/coopmat.hpp"

namespace reach {

struct Capabilities {
  std::string device_name;
  std::string driver_name;
  std::string driver_info;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint32_t api_version = 0;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint8_t pipeline_cache_uuid[VK_UUID_SIZE] = {};

  // Reported for `reach info`; a device reach creates enables only
  // storage_16bit and subgroup_size_control (what the shaders use).
  bool fp16_arithmetic = false;   // shaderFloat16
  bool storage_16bit = false;     // storageBuffer16BitAccess
  bool storage_8bit = false;      // storageBuffer8BitAccess
  bool int8_arithmetic = false;   // shaderInt8
  bool int64 = false;             // shaderInt64
  bool integer_dot = false;       // shaderIntegerDotProduct (Vulkan 1.3): OpSDot on packed int8x4

  // VK_KHR_cooperative_matrix with its cooperativeMatrix feature, shaderFloat16 (f16 matrices) and
  // vulkanMemoryModel (glslang writes cooperative-matrix shaders for the Vulkan memory model) with
  // vulkanMemoryModelDeviceScope (the other kernels' Device-scope atomics and barriers stay valid): a
  // device reach creates enables them; an adopted one only where the host says it did
  // (AdoptedDevice::cooperative_matrix_enabled).  coopmat_shapes: the f16 x f16
  // subgroup-scope shapes the device lists (engine/coopmat.hpp), kept even when unusable, for `reach info`.
  bool cooperative_matrix = false;
  std::vector<CoopmatShape> coopmat_shapes;

  // subgroup_size is what VkPhysicalDeviceSubgroupProperties reports; a pipeline that does not pin its
  // size may run any width from subgroup_min to subgroup_max (Intel picks per pipeline; MoltenVK
  // reports 32 and cannot pin).  A kernel that needs a width pins it where can_pin_subgroup(), or
  // reads gl_SubgroupSize; fixed_subgroup() says which width it can count on.
  uint32_t subgroup_size = 1;
  uint32_t subgroup_min = 1;
  uint32_t subgroup_max = 1;
  bool subgroup_size_control = false;   // subgroupSizeControl and computeFullSubgroups
  VkShaderStageFlags subgroup_size_stages = 0;   // requiredSubgroupSizeStages: where a size may be pinned
  VkSubgroupFeatureFlags subgroup_ops = 0;

  uint64_t max_storage_buffer_range = 0;
  uint64_t max_memory_allocation_size = 0;
  uint64_t max_buffer_size = 0;
  uint64_t min_storage_buffer_offset_alignment = 0;
  uint64_t device_local_bytes = 0;
  uint32_t max_shared_memory = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_size[3] = {};
  uint32_t max_workgroup_count[3] = {};
  uint32_t max_push_constants = 0;
  // Descriptors one compute pipeline may bind: storage buffers, uniform texel buffers (counted as sampled
  // images) and both together.  The spec's minimums (4, 16, 128) are far below what the fused mat-vec binds.
  uint32_t max_stage_storage_buffers = 0;
  uint32_t max_stage_sampled = 0;
  uint32_t max_stage_resources = 0;
  uint64_t min_texel_buffer_offset_alignment = 1;
  uint64_t max_texel_buffer_elements = 0;
  // Formats the kernels' texel variants read, and whether each can back a
  // uniform texel buffer on this device.
  // The last two back the planes of quantized weights (kernels/quant_layout.hpp).
  // R32_UINT: the words of quantized K / V rows (kernels/attention.hpp).
  static constexpr VkFormat kTexelFormats[6] = {VK_FORMAT_R32G32B32A32_SFLOAT, VK_FORMAT_R16G16B16A16_SFLOAT,
                                                VK_FORMAT_R16G16B16A16_UINT, VK_FORMAT_R32G32B32A32_UINT,
                                                VK_FORMAT_R16_UINT, VK_FORMAT_R32_UINT};
  bool uniform_texel[6] = {};

  bool timestamps = false;
  float timestamp_period_ns = 1.0f;
  bool unified_memory = false;   // device-local memory is also host-visible
  // VK_EXT_memory_budget: the driver reports per-heap budgets and usage, so a
  // load can be refused before it runs out (Device::heap_budget).
  bool memory_budget = false;
  // timelineSemaphore (Vulkan 1.2): CommandList::submit_after can wait on a host-signalled value.
  // Enabled on reach's own devices where supported; off on adopted ones (reach cannot tell).
  bool timeline_semaphore = false;

  // Whether `f` (one of kTexelFormats) can back a uniform texel buffer.
  bool supports_uniform_texel(VkFormat f) const;
  bool is_cpu() const { return type == VK_PHYSICAL_DEVICE_TYPE_CPU; }
  bool has_subgroup_arithmetic() const { return subgroup_ops & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT; }
  // A compute pipeline may require a subgroup size (with full subgroups): the feature is on and the
  // device lists compute among the stages that take a required size.
  bool can_pin_subgroup() const {
    return subgroup_size_control && (subgroup_size_stages & VK_SHADER_STAGE_COMPUTE_BIT);
  }
  // The width every compute pipeline that asks for it runs: the only width the device has, or
  // subgroup_size pinned; 0 where the driver chooses (then only subgroup_min..subgroup_max is known).
  uint32_t fixed_subgroup() const {
    if (subgroup_min == subgroup_max) return subgroup_min;
    return can_pin_subgroup() && subgroup_size >= subgroup_min && subgroup_size <= subgroup_max ? subgroup_size : 0;
  }
  const char* type_name() const;
  std::string api_version_string() const;
  std::string summary() const;   // one readable line
  std::string to_json() const;   // one JSON object
};

// Fill the record for `phys` (features, properties and limits); `instance` looks up extension
// commands (the cooperative-matrix shapes: none without it).
Capabilities query_capabilities(const VkInstanceTable& vki, VkPhysicalDevice phys);

}  // namespace reach
