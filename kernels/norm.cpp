// The norm family (shaders/norm_*.comp): rmsnorm and softmax, row reductions.  One workgroup per row; the workgroup
// size is KernelConfig::reduce_wg (the subgroup size on CPU devices, so the
// reduction is a single subgroupAdd/subgroupMax with no barrier; 256 on GPUs).
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/spec.hpp"

namespace reach {

namespace {

// llvmpipe (Mesa 22.3) caps the loop trips of one invocation at 65535, all
// loops of the shader together, and silently drops the rest (measured: softmax
// with one invocation per row goes wrong at exactly 3 passes x 21845 trips).
// The row kernels do 4 elements per trip; keep the total under this budget.
constexpr uint64_t kMaxTrips = 64000;
// Trips of one invocation: per pass ceil(cols / 4wg) plus <= 3 remainder trips
// and the loop exit, plus the small shared-array loops.
uint64_t trips(uint32_t cols, uint32_t wg, uint32_t passes) {
  return uint64_t(passes) * (groups_for(cols, uint64_t(4) * wg) + 4) + 2 * uint64_t(wg) + 16;
}

}  // namespace

// Spec constants: workgroup size and an upper bound on subgroups per workgroup.
// The workgroup is config.reduce_wg, doubled while a row would need more loop
// trips than kMaxTrips (softmax rows of > ~650k columns at 8 invocations).  The bound uses
// the smallest subgroup the device may pick; when it is 1 the shaders'
// shared-memory path (and its barriers) is specialised away.
ReducePlan reduce_plan(const Capabilities& caps, const KernelConfig& cfg, uint32_t cols, uint32_t passes,
                       const char* op) {
  if (!caps.has_subgroup_arithmetic())
    throw Error(ErrorCode::unsupported, std::string(op) + ": the device lacks subgroup arithmetic operations in compute "
                                                          "shaders (VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)");
  const uint32_t max_wg = std::min(caps.max_workgroup_invocations ? caps.max_workgroup_invocations : 128u,
                                   caps.max_workgroup_size[0] ? caps.max_workgroup_size[0] : 128u);
  uint32_t wg = cfg.reduce_wg;
  if (wg == 0 || wg > max_wg)
    throw Error(ErrorCode::internal, std::string(op) + ": reduce_wg=" + std::to_string(wg) +
                                         " is not a valid workgroup size on this device (max " + std::to_string(max_wg) + ")");
  while (trips(cols, wg, passes) > kMaxTrips && wg * 2 <= max_wg) wg *= 2;
  if (trips(cols, wg, passes) > kMaxTrips)
    throw Error(ErrorCode::unsupported, std::string(op) + ": rows of " + std::to_string(cols) +
                                            " columns are too long for one workgroup on this device");
  const uint32_t sg_min = std::max(caps.subgroup_min, 1u);
  return {wg, (wg + sg_min - 1) / sg_min};
}

namespace {

spec::NormSpec reduce_spec(const Device& device, const KernelConfig& cfg, uint32_t cols, uint32_t passes,
                           const char* op) {
  const ReducePlan plan = reduce_plan(device.caps(), cfg, cols, passes, op);
  spec::NormSpec s;
  s.wg = plan.wg;
  s.max_subgroups = plan.max_subgroups;
  return s;
}

void check_act(const Act& a, const char* op, const char* what) {
  if (!a.buffer) throw Error(ErrorCode::internal, std::string(op) + ": " + what + " has no buffer");
  if (a.offset + a.bytes() > a.buffer->size())
    throw Error(ErrorCode::internal, std::string(op) + ": " + what + " [" + std::to_string(a.rows) + ", " +
                                         std::to_string(a.cols) + "] at offset " + std::to_string(a.offset) +
                                         " overruns its buffer of " + std::to_string(a.buffer->size()) + " bytes");
}

}  // namespace

void Kernels::norm_rms(CommandList& cmd, const Act& x, const BufferRange& w, const Act& y, float eps, bool add_to_y) {
  check_act(x, "norm_rms", "x");
  check_act(y, "norm_rms", "y");
  if (x.rows != y.rows || x.cols != y.cols)
    throw Error(ErrorCode::internal, "rmsnorm: x [" + std::to_string(x.rows) + ", " + std::to_string(x.cols) +
                                         "] and y [" + std::to_string(y.rows) + ", " + std::to_string(y.cols) +
                                         "] differ in shape");
  if (w.size < uint64_t(x.cols) * 4)
    throw Error(ErrorCode::internal, "rmsnorm: weight of " + std::to_string(w.size) + " bytes is smaller than cols=" +
                                         std::to_string(x.cols) + " floats");
  if (add_to_y && x.buffer == y.buffer && x.offset < y.offset + y.bytes() && y.offset < x.offset + x.bytes())
    throw Error(ErrorCode::internal, "rmsnorm: add_to_y with y overlapping x");
  if (x.rows == 0 || x.cols == 0) return;
  struct { uint32_t rows, cols; float eps; } push{x.rows, x.cols, eps};
  using B = spec::NormRmsBindings;
  spec::NormSpec sc = reduce_spec(device_, config_, x.cols, 2, "norm_rms");
  sc.add_to_y = add_to_y ? 1 : 0;
  const auto& p = device_.pipelines().get({ShaderId::norm_rms, B::count, sizeof push, sc.constants()});
  const RowGrid g = row_grid(device_.caps(), x.rows, "norm_rms");
  cmd.dispatch(p, spec::bound<B>({{B::B_X, x.range()}, {B::B_W, w}, {B::B_Y, y.range()}}), &push, sizeof push, g.x, g.y,
               1, "norm_rms");
}

void Kernels::norm_softmax(CommandList& cmd, const Act& x, float scale) {
  check_act(x, "norm_softmax", "x");
  if (x.rows == 0 || x.cols == 0) return;
  struct { uint32_t rows, cols; float scale; } push{x.rows, x.cols, scale};
  using B = spec::NormSoftmaxBindings;
  const auto& p = device_.pipelines().get({ShaderId::norm_softmax, B::count, sizeof push,
                                           reduce_spec(device_, config_, x.cols, 3, "norm_softmax").constants()});
  const RowGrid g = row_grid(device_.caps(), x.rows, "norm_softmax");
  cmd.dispatch(p, spec::bound<B>({{B::B_X, x.range()}}), &push, sizeof push, g.x, g.y, 1, "norm_softmax");
}

}  // namespace reach
