#pragma once
// The binding rules every kernel family follows, written once:
//  * a descriptor may span at most `binding_span` bytes (maxStorageBufferRange,
//    or a smaller configured cap) and starts at an aligned offset, the
//    remainder travelling as an element offset (`bind_aligned`);
//  * tensors larger than one binding are cut into row chunks (`split_rows`);
//  * 16-bit weights need 16-bit storage unless read through texel buffers;
//  * one-workgroup-per-row kernels lay rows over a 2D grid (`row_grid`), and
//    element-wise kernels use a capped grid-stride grid (`stride_groups`);
//  * texel views need minTexelBufferOffsetAlignment and whole texels.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/capabilities.hpp"
#include "engine/memory.hpp"

namespace reach {

// Workgroups needed to cover n items with `per_group` each.
inline uint32_t groups_for(uint64_t n, uint64_t per_group) {
  return static_cast<uint32_t>((n + per_group - 1) / per_group);
}

// Grid of a grid-stride element-wise kernel: enough groups of `wg`, capped at
// 65535 (every device's minimum maxComputeWorkGroupCount[0]); the shader loops.
uint32_t stride_groups(uint64_t n, uint32_t wg);

// Bytes one descriptor may span: maxStorageBufferRange, maxBufferSize and, when
// non-zero, `configured` (tests force small values to exercise splitting).
uint64_t binding_span(const Capabilities& caps, uint64_t configured = 0);

// A range bound from an aligned start: range.offset is a multiple of `align`
// and `elem_off` elements of `esize` bytes lead to the wanted data.
struct Bound {
  BufferRange range;
  uint32_t elem_off = 0;
};
Bound bind_aligned(const Buffer& buf, VkDeviceSize offset, VkDeviceSize bytes, uint32_t esize, uint64_t align);
// The same for the first `bytes` of a range (already inside its buffer).
Bound bind_aligned(const BufferRange& r, VkDeviceSize bytes, uint32_t esize, uint64_t align);

// Rows [first_row, first_row + rows) of a row-major tensor.
struct RowChunk {
  uint32_t first_row;
  uint32_t rows;
};
// Row ranges of a [rows, row_bytes] tensor each of whose byte span fits in
// max_range and starts at an offset that is a multiple of `align` (relative
// to the tensor's start).  Throws unsupported when one row does not fit.
std::vector<RowChunk> split_rows(uint32_t rows, uint64_t row_bytes, uint64_t max_range, uint64_t align);

// Throws Error(unsupported) naming `what` when the device lacks
// storageBuffer16BitAccess.
void require_16bit_storage(const Capabilities& caps, const std::string& what);

// One workgroup per row on a 2D grid (the shaders compute row = y * num_x + x).
struct RowGrid {
  uint32_t x = 1, y = 1;
};
RowGrid row_grid(const Capabilities& caps, uint32_t rows, const char* op);

}  // namespace reach
