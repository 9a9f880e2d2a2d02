// Mixture-of-experts kernels (shaders/moe_*.comp): the router's top-k choice and weights, prefill's grouping of
// rows by expert, and the weighted sums of the experts' outputs.  The experts themselves are linear kernels
// (prefill) or moe_matvec (decode rows, kernels/moe_matvec.cpp).
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/spec.hpp"

namespace reach {

namespace {
constexpr uint32_t kGroup = 64;

const Pipeline& pipeline(Device& device, ShaderId kernel, uint32_t buffers, uint32_t push_bytes) {
  spec::ElementwiseSpec s;
  s.wg = kGroup;
  return device.pipelines().get({kernel, buffers, push_bytes, s.constants()});
}
}  // namespace

void Kernels::moe_route(CommandList& cmd, const Act& logits, uint32_t k, bool norm_topk, const BufferRange& ids,
                        const BufferRange& weights, const BufferRange& dense) {
  const uint32_t T = logits.rows, E = logits.cols;
  if (k == 0 || k > E || k > 32)
    throw Error(ErrorCode::internal, "moe_route: k=" + std::to_string(k) + " with " + std::to_string(E) +
                                         " experts (1 <= k <= min(experts, 32))");
  if (ids.size < uint64_t(T) * k * 4 || weights.size < uint64_t(T) * k * 4 || dense.size < uint64_t(T) * E * 4)
    throw Error(ErrorCode::internal, "moe_route: output buffers smaller than " + std::to_string(T) + " tokens");
  if (T == 0) return;
  struct { uint32_t tokens, experts, k, norm_topk; } push{T, E, k, norm_topk ? 1u : 0u};
  using B = spec::MoeRouteBindings;
  const auto& p = pipeline(device_, ShaderId::moe_route, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_LOGITS, logits.range()}, {B::B_IDS, ids}, {B::B_WEIGHTS, weights},
                                  {B::B_DENSE, dense}}),
               &push, sizeof push, stride_groups(T, kGroup), 1, 1, "moe_route");
}

void Kernels::moe_group(CommandList& cmd, const BufferRange& ids, uint32_t first, uint32_t rows, uint32_t k,
                        uint32_t n_experts, uint32_t cap, const BufferRange& grids, uint32_t calls,
                        const BufferRange& slots, const BufferRange& args) {
  if (rows > cap || ids.size < uint64_t(first + rows) * k * 4 || grids.size < uint64_t(calls) * 12 ||
      slots.size < uint64_t(cap) * n_experts * 4 ||
      args.size < uint64_t(n_experts) * calls * 12)
    throw Error(ErrorCode::internal, "moe_group: buffers smaller than " + std::to_string(n_experts) + " experts x " +
                                         std::to_string(cap) + " rows");
  if (n_experts == 0) return;
  struct { uint32_t first, rows, k, experts, cap, calls; } push{first, rows, k, n_experts, cap, calls};
  using B = spec::MoeGroupBindings;
  const auto& p = pipeline(device_, ShaderId::moe_group, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_IDS, ids}, {B::B_GRIDS, grids}, {B::B_SLOTS, slots}, {B::B_ARGS, args}}),
               &push, sizeof push, stride_groups(n_experts, kGroup), 1, 1, "moe_group");
}

void Kernels::moe_gather(CommandList& cmd, const BufferRange& ids, const BufferRange& slots, uint32_t first,
                         uint32_t rows, uint32_t k, uint32_t n_experts, uint32_t cap, const Act& x,
                         const BufferRange& y) {
  if (rows > cap || x.rows < first + rows || ids.size < uint64_t(first + rows) * k * 4 ||
      slots.size < uint64_t(cap) * n_experts * 4 || y.size < uint64_t(n_experts) * cap * x.cols * 4)
    throw Error(ErrorCode::internal, "moe_gather: buffers smaller than " + std::to_string(n_experts) + " experts x " +
                                         std::to_string(cap) + " rows");
  const uint64_t n = uint64_t(rows) * k * x.cols;
  if (n == 0) return;
  struct { uint32_t first, rows, k, cols, experts, cap; } push{first, rows, k, x.cols, n_experts, cap};
  using B = spec::MoeGatherBindings;
  const auto& p = pipeline(device_, ShaderId::moe_gather, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_IDS, ids}, {B::B_SLOTS, slots}, {B::B_X, x.range()}, {B::B_Y, y}}), &push,
               sizeof push, stride_groups(n, kGroup), 1, 1, "moe_gather");
}

void Kernels::moe_scatter(CommandList& cmd, const BufferRange& dense, const BufferRange& slots, uint32_t first,
                          uint32_t rows, uint32_t n_experts, uint32_t cap, const BufferRange& x, const Act& y) {
  if (rows > cap || y.rows < first + rows || dense.size < uint64_t(y.rows) * n_experts * 4 ||
      slots.size < uint64_t(cap) * n_experts * 4 || x.size < uint64_t(n_experts) * cap * y.cols * 4)
    throw Error(ErrorCode::internal, "moe_scatter: buffers smaller than " + std::to_string(n_experts) +
                                         " experts x " + std::to_string(cap) + " rows");
  const uint32_t n = rows * y.cols;
  if (n == 0) return;
  struct { uint32_t first, rows, cols, experts, cap; } push{first, rows, y.cols, n_experts, cap};
  using B = spec::MoeScatterBindings;
  const auto& p = pipeline(device_, ShaderId::moe_scatter, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_DENSE, dense}, {B::B_SLOTS, slots}, {B::B_X, x}, {B::B_Y, y.range()}}), &push,
               sizeof push, stride_groups(n, kGroup), 1, 1, "moe_scatter");
}

void Kernels::moe_combine(CommandList& cmd, const BufferRange& ids, const BufferRange& weights, uint32_t k,
                          const Act& x, const Act& y) {
  const uint64_t slots = uint64_t(y.rows) * k;
  if (k == 0 || x.rows < slots || x.cols < y.cols || ids.size < slots * 4 || weights.size < slots * 4)
    throw Error(ErrorCode::internal, "moe_combine: shapes disagree (" + std::to_string(y.rows) + " rows x " +
                                         std::to_string(k) + " slots)");
  const uint32_t n = y.rows * y.cols;
  if (n == 0) return;
  const uint64_t align = std::max<uint64_t>(device_.caps().min_storage_buffer_offset_alignment, 16);
  const Bound ib = bind_aligned(ids, slots * 4, 4, align);
  const Bound wb = bind_aligned(weights, slots * 4, 4, align);
  const Bound xb = bind_aligned(*x.buffer, x.offset, slots * x.cols * 4, 4, align);
  const Bound yb = bind_aligned(*y.buffer, y.offset, uint64_t(n) * 4, 4, align);
  struct { uint32_t n, cols, k, ids_off, w_off, ldx, x_off, y_off; } push{
      n, y.cols, k, ib.elem_off, wb.elem_off, x.cols, xb.elem_off, yb.elem_off};
  using B = spec::MoeCombineBindings;
  const auto& p = pipeline(device_, ShaderId::moe_combine, B::count, sizeof push);
  cmd.dispatch(p, spec::bound<B>({{B::B_IDS, ib.range}, {B::B_WEIGHTS, wb.range}, {B::B_X, xb.range},
                                  {B::B_Y, yb.range}}),
               &push, sizeof push, stride_groups(n, kGroup), 1, 1, "moe_combine");
}

}  // namespace reach
