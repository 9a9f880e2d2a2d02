#pragma once
// Device profiles: a Vulkan Profiles JSON file (the Khronos schema; gpuinfo.org's device reports and
// the Khronos / Android baselines are written in it) describing what another GPU offers.  reach reads
// one (REACH_DEVICE_PROFILE, reach_device_params.device_profile, `reach info --device-profile`) and
// then uses only what both that profile and the real device allow, so a kernel plan for an Apple M1,
// an Android phone or a Polaris card can be exercised here.  What a profile cannot change: the real
// subgroup width (the hardware runs its own; a profile only narrows the range reach may pin, or
// forbids pinning), the device type (a CPU device keeps its CPU kernel variants), the speed of what
// the real device emulates, and memory heaps (the files carry none).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/capabilities.hpp"

namespace reach {

// What one profile of the file states, as reach reads it.  A profile states what a device meeting it
// guarantees: a feature or extension it does not list is absent, a limit it does not state is the
// Vulkan specification's required minimum (which every field starts at).
struct DeviceProfile {
  std::string file;          // as given, for messages
  std::string name;          // the profile used: the file's first under `profiles`
  std::string device_name;   // VkPhysicalDeviceProperties.deviceName, else `name`
  uint32_t api_version = VK_API_VERSION_1_0;   // profiles.NAME.api-version
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  std::vector<std::string> extensions;

  // Features (a member of any features structure: Vulkan11/12/13Features and the extension structs
  // that carry the same member).
  bool fp16_arithmetic = false;        // shaderFloat16
  bool storage_16bit = false;          // storageBuffer16BitAccess
  bool storage_8bit = false;           // storageBuffer8BitAccess
  bool int8_arithmetic = false;        // shaderInt8
  bool int64 = false;                  // shaderInt64
  bool integer_dot = false;            // shaderIntegerDotProduct
  bool integer_dot_accelerated = false;   // integerDotProduct4x8BitPackedSignedAccelerated
  bool subgroup_size_control_feature = false;   // subgroupSizeControl
  bool compute_full_subgroups = false;          // computeFullSubgroups
  bool cooperative_matrix_feature = false;      // cooperativeMatrix
  bool vulkan_memory_model = false;             // vulkanMemoryModel
  bool vulkan_memory_model_device_scope = false;   // vulkanMemoryModelDeviceScope
  bool bf16 = false;                            // shaderBFloat16Type (VK_KHR_shader_bfloat16)

  // Subgroups (VkPhysicalDeviceSubgroupProperties / Vulkan11Properties; SubgroupSizeControl /
  // Vulkan13Properties).  0: not stated.
  uint32_t subgroup_size = 0;
  uint32_t subgroup_min = 0, subgroup_max = 0;
  VkShaderStageFlags subgroup_stages = VK_SHADER_STAGE_COMPUTE_BIT;
  VkSubgroupFeatureFlags subgroup_ops = VK_SUBGROUP_FEATURE_BASIC_BIT;
  VkShaderStageFlags required_subgroup_size_stages = 0;
  bool required_subgroup_size_stages_stated = false;

  // Limits, from the specification's minimums (alignments: its maximums) up.
  uint32_t max_shared_memory = 16384;
  uint32_t max_workgroup_invocations = 128;
  uint32_t max_workgroup_size[3] = {128, 128, 64};
  uint32_t max_workgroup_count[3] = {65535, 65535, 65535};
  uint32_t max_push_constants = 128;
  uint32_t max_stage_storage_buffers = 4;
  uint32_t max_stage_sampled = 16;
  uint32_t max_stage_resources = 128;
  uint32_t max_set_storage_buffers = 24;   // maxDescriptorSetStorageBuffers (reach uses one set)
  uint64_t max_storage_buffer_range = 1ull << 27;
  uint64_t max_memory_allocation_size = 1ull << 30;
  uint64_t max_buffer_size = 1ull << 30;
  uint64_t min_storage_buffer_offset_alignment = 256;
  uint64_t min_texel_buffer_offset_alignment = 256;
  uint64_t max_texel_buffer_elements = 65536;
  // Capabilities::kTexelFormats that can back a uniform texel buffer.  The specification requires it
  // of all six, so a format the file does not list keeps it.
  bool uniform_texel[6] = {true, true, true, true, true, true};

  bool has_extension(const char* name) const;
  // subgroupSizeControl with computeFullSubgroups, and compute among requiredSubgroupSizeStages.
  bool can_pin_subgroup() const;
  // cooperativeMatrix (with its extension), shaderFloat16 and vulkanMemoryModel with its Device scope: what reach's
  // cooperative-matrix GEMM needs.  The files list no shapes: the real device's stay.
  bool cooperative_matrix() const;
};

// Reads `path`.  Throws Error(io) when it cannot be read, Error(format) naming the file and the key
// when it is not JSON, has no `profiles` / `capabilities`, names a capability it lacks, or holds a
// wrong type at a key reach reads.  Keys reach does not read are ignored.
DeviceProfile load_device_profile(const std::string& path);
// The same from text already read (`file` names it in messages).
DeviceProfile parse_device_profile(const std::string& text, const std::string& file);

// What reach may use on `real` under profile `p`: the smaller of each limit (the larger of each
// alignment), the AND of each feature and extension, the subgroup operations both have.  The
// subgroup width stays the real one; the pinnable range narrows to both ranges (and pinning is off
// where the profile forbids it, the ranges do not meet, or the real width falls outside).
Capabilities apply_profile(const Capabilities& real, const DeviceProfile& p);

// The profile's device on its own (what reach would choose there), for `reach info`: its limits and
// features as Capabilities (no real device involved; timestamps and heaps unknown).
Capabilities profile_capabilities(const DeviceProfile& p);

// Why reach cannot run on a device meeting `p` at all, or "" when it can: below Vulkan 1.2 (the version
// reach creates its devices with).  Descriptor limits are checked per pipeline when it is created
// (engine/pipeline.cpp names the kernel and the limit), since which kernels run depends on the model.
std::string profile_refusal(const DeviceProfile& p);

}  // namespace reach
