#pragma once
// VK_KHR_cooperative_matrix: whether a physical device has it and which matrix shapes it
// multiplies.  Debian 12's Vulkan headers (1.3.239) predate the extension (1.3.255), so the few
// structures reach reads are declared here with the registry's values.
#include <cstdint>
#include <vector>

#include <vulkan/vulkan.h>

#include "engine/vk_dispatch.hpp"

namespace reach {

inline constexpr const char* kCoopmatExtension = "VK_KHR_cooperative_matrix";

// The registry's structure types and enums of VK_KHR_cooperative_matrix.
inline constexpr VkStructureType kCoopmatFeaturesSType = static_cast<VkStructureType>(1000506000);
inline constexpr VkStructureType kCoopmatPropertiesSType = static_cast<VkStructureType>(1000506001);
enum CoopmatComponent : int32_t { coopmat_f16 = 0, coopmat_f32 = 1 };   // VkComponentTypeKHR (the two used)
inline constexpr int32_t kCoopmatScopeSubgroup = 3;                     // VK_SCOPE_SUBGROUP_KHR

struct VkCoopmatFeatures {   // VkPhysicalDeviceCooperativeMatrixFeaturesKHR
  VkStructureType sType = kCoopmatFeaturesSType;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};
struct VkCoopmatProperties {   // VkCooperativeMatrixPropertiesKHR
  VkStructureType sType = kCoopmatPropertiesSType;
  void* pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  int32_t AType = 0, BType = 0, CType = 0, ResultType = 0;
  VkBool32 saturatingAccumulation = VK_FALSE;
  int32_t scope = 0;
};

// One subgroup-scope shape with f16 A and B: C and the result f32, or f16 when f16_acc.
struct CoopmatShape {
  uint32_t m = 0, n = 0, k = 0;
  bool f16_acc = false;
  auto operator<=>(const CoopmatShape&) const = default;
};

// The f16 x f16 subgroup-scope shapes `phys` lists (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR,
// looked up through the instance of `vki`); empty where the command is missing.
std::vector<CoopmatShape> query_coopmat_shapes(const VkInstanceTable& vki, VkPhysicalDevice phys);

}  // namespace reach
