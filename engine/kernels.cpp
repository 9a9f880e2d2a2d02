#include "engine/kernels.hpp"

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

std::vector<RowChunk> split_rows(const Mat& m, uint64_t max_range, uint64_t align) {
  const uint64_t row_bytes = uint64_t(m.cols) * wtype_size(m.type);
  if (row_bytes > max_range)
    throw Error(ErrorCode::unsupported, "one row of " + std::to_string(row_bytes) +
                                            " bytes exceeds the device's maxStorageBufferRange");
  // Rows per chunk: as many as fit, rounded down so each chunk start stays aligned.
  uint64_t rows = std::min<uint64_t>(m.rows, max_range / row_bytes);
  uint64_t step = 1;
  while ((step * row_bytes) % align) ++step;   // rows whose byte span is a multiple of align
  if (rows < m.rows) rows = std::max<uint64_t>(step, rows / step * step);
  std::vector<RowChunk> out;
  for (uint64_t r = 0; r < m.rows; r += rows)
    out.push_back({static_cast<uint32_t>(r), static_cast<uint32_t>(std::min<uint64_t>(rows, m.rows - r))});
  return out;
}

KernelConfig KernelConfig::from(const Capabilities& caps) {
  KernelConfig c;
  c.subgroup = caps.subgroup_size;
  c.cpu_device = caps.is_cpu();
  c.max_binding = caps.max_storage_buffer_range;
  if (const uint64_t m = caps.max_buffer_size; m && m < c.max_binding) c.max_binding = m;
  c.matvec_rows = c.cpu_device ? 4 : 8;
  c.choose_linear(caps);
  // CPU: one subgroup per row, so the reduction needs no shared memory or barrier.
  c.reduce_wg = std::min<uint32_t>(c.cpu_device ? std::max(c.subgroup, 1u) : 256u,
                                   std::max(caps.max_workgroup_invocations, 1u));
  return c;
}

Kernels::Kernels(Device& device) : Kernels(device, KernelConfig::from(device.caps())) {}
Kernels::Kernels(Device& device, const KernelConfig& config) : device_(device), config_(config) {}

namespace {
constexpr uint32_t kElementwiseGroup = 256;
uint32_t elementwise_groups(uint64_t n) { return std::min<uint32_t>(groups_for(n, kElementwiseGroup), 65535u); }
}  // namespace

void Kernels::add(CommandList& cmd, const BufferRange& a, const BufferRange& b, const BufferRange& y, uint32_t n,
                  uint32_t b_period) {
  if (b_period == 0 || a.size < uint64_t(n) * 4 || y.size < uint64_t(n) * 4 || b.size < uint64_t(std::min(n, b_period)) * 4)
    throw Error(ErrorCode::internal, "add: buffers smaller than n=" + std::to_string(n));
  const auto& p = device_.pipelines().get({"add_f32", 3, 8, {kElementwiseGroup}});
  struct { uint32_t n, b_period; } push{n, b_period};
  cmd.dispatch(p, {a, b, y}, &push, sizeof push, elementwise_groups(n), 1, 1, "add");
}

}  // namespace reach
