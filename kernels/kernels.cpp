#include "kernels/kernels.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/spec.hpp"

namespace reach {

KernelConfig KernelConfig::from(const Capabilities& caps) {
  KernelConfig c;
  c.subgroup = caps.subgroup_size;
  c.cpu_device = caps.is_cpu();
  c.max_binding = binding_span(caps);
  c.matvec_rows = c.cpu_device ? 4 : 8;
  c.choose_linear(caps);
  c.choose_coopmat(caps);
  if (c.cpu_device) {
    // Quantized GEMM (register tiles): 4 X rows share each decoded W sub-block.
    // Measured on lavapipe (2 cores), SmolLM2-135M MLP shapes at M = 128, CPU
    // time: q4_1 23.6 -> 17.4 ms (f16: 20.7 ms); q4_k 36 -> 22 ms.
    c.qgemm_tm = 4;
    c.qgemm_tn = 4;
  }
  // The int8 path (quant_int_dot) is off by default: on lavapipe, which runs
  // OpSDot unaccelerated, it measured slower on q4_1 and faster only on the
  // K-quants (docs/DESIGN.md, "Integer-dot activations"); its kernel has one
  // register-tile shape and no GPU measurement yet, so GPUs keep the tuned f32
  // kernels until one shows it faster.
  c.quant_int_dot = false;
  // CPU: one subgroup per row, so the reduction needs no shared memory or barrier.
  c.reduce_wg = std::min<uint32_t>(c.cpu_device ? std::max(c.subgroup, 1u) : 256u,
                                   std::max(caps.max_workgroup_invocations, 1u));
  // The fused mat-vec binds every output's planes, Y and bias at once: a device with fewer descriptors per
  // stage (the spec allows as few as 4 storage buffers) decodes with the unfused kernels instead.
  const uint32_t fused_bindings = std::max<uint32_t>(spec::LinearMatvecFusedQBindings::count,
                                                     spec::LinearMatvecFusedBindings::count);
  c.matvec_fused = caps.max_stage_storage_buffers >= fused_bindings && caps.max_stage_resources >= fused_bindings &&
                   (!c.weights_texel || caps.max_stage_sampled >= fused_bindings);
  return c;
}

Kernels::Kernels(Device& device) : Kernels(device, KernelConfig::from(device.caps())) {}
Kernels::Kernels(Device& device, const KernelConfig& config) : device_(device), config_(config) {}

}  // namespace reach
