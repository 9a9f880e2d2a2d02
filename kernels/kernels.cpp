#include "kernels/kernels.hpp"

#include <algorithm>

#include "engine/device.hpp"
#include "engine/error.hpp"

namespace reach {

uint32_t wtype_size(WType t) { return t == WType::f32 ? 4 : 2; }
const char* wtype_name(WType t) {
  switch (t) {
    case WType::f32: return "f32";
    case WType::f16: return "f16";
    case WType::bf16: return "bf16";
  }
  return "?";
}

KernelConfig KernelConfig::from(const Capabilities& caps) {
  KernelConfig c;
  c.subgroup = caps.subgroup_size;
  c.cpu_device = caps.is_cpu();
  c.max_binding = binding_span(caps);
  c.matvec_rows = c.cpu_device ? 4 : 8;
  c.choose_linear(caps);
  // CPU: one subgroup per row, so the reduction needs no shared memory or barrier.
  c.reduce_wg = std::min<uint32_t>(c.cpu_device ? std::max(c.subgroup, 1u) : 256u,
                                   std::max(caps.max_workgroup_invocations, 1u));
  return c;
}

Kernels::Kernels(Device& device) : Kernels(device, KernelConfig::from(device.caps())) {}
Kernels::Kernels(Device& device, const KernelConfig& config) : device_(device), config_(config) {}

}  // namespace reach
