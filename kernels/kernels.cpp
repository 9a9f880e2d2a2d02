#include "kernels/kernels.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/spec.hpp"

namespace reach {

KernelConfig KernelConfig::from(const Capabilities& caps, const KernelSettings& settings) {
  KernelConfig c;
  c.subgroup = caps.subgroup_size;
  c.cpu_device = caps.is_cpu();
  c.max_binding = binding_span(caps);
  c.matvec_rows = c.cpu_device ? 4 : 8;
  c.choose_linear(caps);
  c.shape_overrides(caps, settings);
  c.choose_coopmat(caps, settings);
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

void KernelConfig::shape_overrides(const Capabilities& caps, const KernelSettings& s) {
  if (s.matvec_xshared) matvec_xshared = *s.matvec_xshared;   // matvec_xsh() takes it only in modes 1 and 2
  // A workgroup size the kernels accept: a power of two, at least one subgroup, within the device's limit.
  if (const uint32_t wg = s.matvec_wg;
      wg && !(wg & (wg - 1)) && wg >= std::max(subgroup, 1u) && wg <= caps.max_workgroup_invocations) {
    matvec_wg = wg;
    if (matvec_mode == spec::MATVEC_MODE_SUBGROUP) matvec_rows = std::max(1u, wg / std::max(subgroup, 1u));
  }
  if (const uint32_t rows = s.matvec_rows; rows && rows <= 64) matvec_rows = rows;
  // The shared-memory GEMM's tile: REACH_GEMM_TILE (square), REACH_GEMM_TM / _TN (per invocation),
  // REACH_GEMM_BK; ignored unless the result is a tile the kernel and the device take.
  if (gemm_shared) {
    const uint32_t tile = s.gemm_tile, tm = s.gemm_tm, tn = s.gemm_tn, bk = s.gemm_bk;
    const uint32_t t = tile ? tile : gemm_tile_m, m = tm ? tm : gemm_tm, n = tn ? tn : gemm_tn, b = bk ? bk : gemm_bk;
    const uint64_t wg = t % m || t % n ? 0 : uint64_t(t / m) * (t / n);
    if ((tile || tm || tn || bk) && gemm_tile_m == gemm_tile_n && wg && wg <= caps.max_workgroup_invocations &&
        uint64_t(2 * t) * (b + 1) * 4 <= caps.max_shared_memory && m <= 8 && n <= 8) {
      gemm_tile_m = gemm_tile_n = t;
      gemm_tm = m, gemm_tn = n, gemm_bk = b;
      gemm_wg = static_cast<uint32_t>(wg);
    }
  }
}

Kernels::Kernels(Device& device) : Kernels(device, KernelConfig::from(device.caps(), device.settings().kernels)) {}
Kernels::Kernels(Device& device, const KernelConfig& config) : device_(device), config_(config) {}

}  // namespace reach
