#include "kernels/binding.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace reach {

uint32_t stride_groups(uint64_t n, uint32_t wg) { return std::min<uint32_t>(groups_for(n, wg), 65535u); }

uint64_t binding_span(const Capabilities& caps, uint64_t configured) {
  uint64_t m = caps.max_storage_buffer_range ? caps.max_storage_buffer_range : (128ull << 20);
  if (caps.max_buffer_size && caps.max_buffer_size < m) m = caps.max_buffer_size;
  if (configured && configured < m) m = configured;
  return m;
}

Bound bind_aligned(const Buffer& buf, VkDeviceSize offset, VkDeviceSize bytes, uint32_t esize, uint64_t align) {
  const VkDeviceSize base = offset / align * align;
  Bound b;
  b.range = buf.range(base, offset - base + bytes);
  b.elem_off = static_cast<uint32_t>((offset - base) / esize);
  return b;
}

Bound bind_aligned(const BufferRange& r, VkDeviceSize bytes, uint32_t esize, uint64_t align) {
  const VkDeviceSize base = r.offset / align * align;
  return {BufferRange{r.buffer, base, r.offset - base + bytes}, static_cast<uint32_t>((r.offset - base) / esize)};
}

std::vector<RowChunk> split_rows(uint32_t n_rows, uint64_t row_bytes, uint64_t max_range, uint64_t align) {
  if (row_bytes > max_range)
    throw Error(ErrorCode::unsupported, "one row of " + std::to_string(row_bytes) +
                                            " bytes exceeds the device's maxStorageBufferRange");
  // Rows per chunk: as many as fit, rounded down so each chunk start stays aligned.
  uint64_t rows = std::min<uint64_t>(n_rows, max_range / std::max<uint64_t>(row_bytes, 1));
  uint64_t step = 1;
  while ((step * row_bytes) % align) ++step;   // rows whose byte span is a multiple of align
  if (rows < n_rows) rows = std::max<uint64_t>(step, rows / step * step);
  std::vector<RowChunk> out;
  for (uint64_t r = 0; r < n_rows; r += rows)
    out.push_back({static_cast<uint32_t>(r), static_cast<uint32_t>(std::min<uint64_t>(rows, n_rows - r))});
  return out;
}

void require_16bit_storage(const Capabilities& caps, const std::string& what) {
  if (!caps.storage_16bit)
    throw Error(ErrorCode::unsupported, what + ": needs 16-bit storage buffers (storageBuffer16BitAccess), which this "
                                               "device does not support or enable; convert the weights to f32");
}

RowGrid row_grid(const Capabilities& caps, uint32_t rows, const char* op) {
  const uint32_t max_x = std::min<uint32_t>(caps.max_workgroup_count[0] ? caps.max_workgroup_count[0] : 65535u, 65535u);
  RowGrid g;
  g.x = std::max<uint32_t>(std::min(rows, max_x), 1);
  g.y = groups_for(rows, g.x);
  if (caps.max_workgroup_count[1] && g.y > caps.max_workgroup_count[1])
    throw Error(ErrorCode::internal, std::string(op) + ": " + std::to_string(rows) + " rows exceed the dispatch grid");
  return g;
}

}  // namespace reach
