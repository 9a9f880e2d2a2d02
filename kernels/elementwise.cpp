// Element-wise kernels (shaders/elementwise_*.comp): add / bias broadcast,
// silu·mul, gelu_tanh·mul, scale, soft-capping and the bf16 -> f32 / f32 -> f16 conversions.  Grid-stride loops,
// so any n fits the dispatch grid.
#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/spec.hpp"

namespace reach {

namespace {
constexpr uint32_t kGroup = 256;

void need(const BufferRange& b, uint64_t bytes, const char* op, const char* what, uint32_t n) {
  if (b.size < bytes)
    throw Error(ErrorCode::internal, std::string(op) + ": " + what + " holds " + std::to_string(b.size) +
                                         " bytes, n=" + std::to_string(n) + " needs " + std::to_string(bytes));
}

const Pipeline& pipeline(Device& device, ShaderId kernel, uint32_t buffers, uint32_t push_bytes) {
  spec::ElementwiseSpec s;
  s.wg = kGroup;
  return device.pipelines().get({kernel, buffers, push_bytes, s.constants()});
}
}  // namespace

void Kernels::elementwise_add(CommandList& cmd, const BufferRange& a, const BufferRange& b, const BufferRange& y, uint32_t n,
                  uint32_t b_period) {
  if (b_period == 0 || a.size < uint64_t(n) * 4 || y.size < uint64_t(n) * 4 || b.size < uint64_t(std::min(n, b_period)) * 4)
    throw Error(ErrorCode::internal, "elementwise_add: buffers smaller than n=" + std::to_string(n));
  struct { uint32_t n, b_period; } push{n, b_period};
  using B = spec::ElementwiseAddBindings;
  const auto& p = pipeline(device_, ShaderId::elementwise_add, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_A, a}, {B::B_B, b}, {B::B_Y, y}}), &push, sizeof push, stride_groups(n, kGroup),
               1, 1, "elementwise_add");
}

void Kernels::elementwise_silu_mul(CommandList& cmd, const BufferRange& g, const BufferRange& u, const BufferRange& y, uint32_t n) {
  need(g, uint64_t(n) * 4, "elementwise_silu_mul", "g", n);
  need(u, uint64_t(n) * 4, "elementwise_silu_mul", "u", n);
  need(y, uint64_t(n) * 4, "elementwise_silu_mul", "y", n);
  if (n == 0) return;
  using B = spec::ElementwiseSiluMulBindings;
  const auto& p = pipeline(device_, ShaderId::elementwise_silu_mul, B::count, sizeof n);
  cmd.dispatch(p, spec::bound<B>({{B::B_G, g}, {B::B_U, u}, {B::B_Y, y}}), &n, sizeof n, stride_groups(n, kGroup), 1, 1,
               "elementwise_silu_mul");
}

void Kernels::elementwise_gelu_tanh_mul(CommandList& cmd, const BufferRange& g, const BufferRange& u, const BufferRange& y,
                            uint32_t n) {
  need(g, uint64_t(n) * 4, "elementwise_gelu_tanh_mul", "g", n);
  need(u, uint64_t(n) * 4, "elementwise_gelu_tanh_mul", "u", n);
  need(y, uint64_t(n) * 4, "elementwise_gelu_tanh_mul", "y", n);
  if (n == 0) return;
  using B = spec::ElementwiseGeluTanhMulBindings;
  const auto& p = pipeline(device_, ShaderId::elementwise_gelu_tanh_mul, B::count, sizeof n);
  cmd.dispatch(p, spec::bound<B>({{B::B_G, g}, {B::B_U, u}, {B::B_Y, y}}), &n, sizeof n, stride_groups(n, kGroup), 1, 1,
               "elementwise_gelu_tanh_mul");
}

void Kernels::elementwise_scale(CommandList& cmd, const BufferRange& x, const BufferRange& y, uint32_t n, float s) {
  need(x, uint64_t(n) * 4, "elementwise_scale", "x", n);
  need(y, uint64_t(n) * 4, "elementwise_scale", "y", n);
  if (n == 0) return;
  struct { uint32_t n; float s; } push{n, s};
  using B = spec::ElementwiseScaleBindings;
  const auto& p = pipeline(device_, ShaderId::elementwise_scale, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_X, x}, {B::B_Y, y}}), &push, sizeof push, stride_groups(n, kGroup), 1, 1,
               "elementwise_scale");
}

void Kernels::elementwise_softcap(CommandList& cmd, const BufferRange& x, const BufferRange& y, uint32_t n, float cap) {
  // A zero cap means "no capping": the caller skips the dispatch; here it would divide by zero.
  if (!(cap > 0) || !std::isfinite(cap))
    throw Error(ErrorCode::invalid_argument, "elementwise_softcap: cap must be positive and finite, got " +
                                                 std::to_string(cap));
  need(x, uint64_t(n) * 4, "elementwise_softcap", "x", n);
  need(y, uint64_t(n) * 4, "elementwise_softcap", "y", n);
  if (n == 0) return;
  struct { uint32_t n; float cap; } push{n, cap};
  using B = spec::ElementwiseSoftcapBindings;
  const auto& p = pipeline(device_, ShaderId::elementwise_softcap, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_X, x}, {B::B_Y, y}}), &push, sizeof push, stride_groups(n, kGroup), 1, 1,
               "elementwise_softcap");
}

void Kernels::elementwise_bf16_to_f32(CommandList& cmd, const BufferRange& in, const BufferRange& out, uint32_t n) {
  require_16bit_storage(device_.caps(), "elementwise_bf16_to_f32");
  need(in, uint64_t(n) * 2, "elementwise_bf16_to_f32", "in", n);
  need(out, uint64_t(n) * 4, "elementwise_bf16_to_f32", "out", n);
  if (n == 0) return;
  using B = spec::ElementwiseBf16ToF32Bindings;
  const auto& p = pipeline(device_, ShaderId::elementwise_bf16_to_f32, B::count, sizeof n);
  cmd.dispatch(p, spec::bound<B>({{B::B_IN, in}, {B::B_OUT, out}}), &n, sizeof n, stride_groups(n, kGroup), 1, 1,
               "elementwise_bf16_to_f32");
}

void Kernels::elementwise_f32_to_f16(CommandList& cmd, const BufferRange& in, const BufferRange& out, uint32_t n) {
  require_16bit_storage(device_.caps(), "elementwise_f32_to_f16");
  need(in, uint64_t(n) * 4, "elementwise_f32_to_f16", "in", n);
  need(out, uint64_t(n) * 2, "elementwise_f32_to_f16", "out", n);
  if (n == 0) return;
  using B = spec::ElementwiseF32ToF16Bindings;
  const auto& p = pipeline(device_, ShaderId::elementwise_f32_to_f16, B::count, sizeof n);
  cmd.dispatch(p, spec::bound<B>({{B::B_IN, in}, {B::B_OUT, out}}), &n, sizeof n, stride_groups(n, kGroup), 1, 1,
               "elementwise_f32_to_f16");
}

}  // namespace reach
