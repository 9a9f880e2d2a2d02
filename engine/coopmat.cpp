#include "engine/coopmat.hpp"

namespace reach {

std::vector<CoopmatShape> query_coopmat_shapes(const VkInstanceTable& vki, VkPhysicalDevice phys) {
  using Query = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, VkCoopmatProperties*);
  std::vector<CoopmatShape> out;
  if (!vki.instance || !vki.vkGetInstanceProcAddr) return out;
  auto query = reinterpret_cast<Query>(
      vki.vkGetInstanceProcAddr(vki.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!query) return out;
  uint32_t n = 0;
  if (query(phys, &n, nullptr) < 0 || n == 0) return out;
  std::vector<VkCoopmatProperties> props(n);
  if (query(phys, &n, props.data()) < 0) return out;
  props.resize(n);
  for (const auto& p : props) {
    if (p.scope != kCoopmatScopeSubgroup || p.AType != coopmat_f16 || p.BType != coopmat_f16 ||
        p.saturatingAccumulation)
      continue;
    if (p.CType == coopmat_f32 && p.ResultType == coopmat_f32) out.push_back({p.MSize, p.NSize, p.KSize, false});
    if (p.CType == coopmat_f16 && p.ResultType == coopmat_f16) out.push_back({p.MSize, p.NSize, p.KSize, true});
  }
  return out;
}

}  // namespace reach
