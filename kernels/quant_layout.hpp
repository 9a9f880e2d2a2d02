#pragma once
// How a quantized matrix (GGML block format, kernels.hpp's WType::q*) is laid
// out in device memory.  The file holds rows of blocks (array of structs); the
// device copy has exactly the same number of bytes, arranged so the kernels
// can read it with wide aligned loads.  Loaders call quant_to_device_layout on
// the host once per tensor; nothing is ever expanded to 16 or 32 bits.
//
// Device layout: two planes, each in block order (row-major, as the file):
//   quant plane  at offset 0: the packed quants of every block (qs; qh+qs for
//                q5_k; ql+qh for q6_k), a multiple of 16 bytes per block, so
//                it is read as uvec4s (SSBO) or R32G32B32A32_UINT texels;
//   meta plane   right after it: the block's 16-bit fields (d first, then
//                m / dmin, the K-quants' 12 scale bytes or q6_k's 16, the
//                4-byte qh of q5_0 / q5_1), read as 16-bit units (a u32 SSBO
//                or R16_UINT texels).
// Why: GGML blocks are 18..210 bytes, so their fields are unaligned and each
// would be several byte loads; llvmpipe turns per-lane SSBO loads into scalar
// loops but vectorises texel fetches, which need fixed-size aligned texels.
// Splitting keeps the total bytes (quant + meta == block bytes) and makes every
// load aligned.  A row range [r0, r1) is a contiguous range of each plane, so
// weights above maxStorageBufferRange bind each plane's sub-range separately.
// The matrix start (Mat::offset) must be a multiple of 16 bytes.
#include <cstdint>

#include "kernels/kernels.hpp"

namespace reach {

// Per-block bytes of the two planes (quant + meta == wtype_block_bytes).
struct QuantPlanes {
  uint32_t quant_bytes = 0;   // multiple of 16
  uint32_t meta_bytes = 0;    // multiple of 2
};
QuantPlanes quant_planes(WType t);   // throws internal for non-block types

// Bytes per meta-plane texel when the kernels read the meta plane as texels:
// 16 (the whole block meta, one R32G32B32A32 fetch) for q4_k / q5_k, else 2
// (R16 units; one R32 fetch of q4_1's d and m measured slower on llvmpipe).
uint32_t quant_meta_texel_bytes(WType t);

// Bytes of one meta-plane unit as the kernels address it: 2 (16-bit units), 1 for mxfp4 (its meta is a single
// E8M0 byte per block, so its unit offsets count bytes).
uint32_t quant_meta_unit_bytes(WType t);

// Bytes the device copy of a [rows, cols] matrix of type t takes (== the file's bytes; mxfp4 rounded up to 16).
uint64_t quant_device_bytes(WType t, uint32_t rows, uint32_t cols);

// `blocks` holds rows * cols / wtype_block_elems(t) blocks in file order (row-major);
// writes quant_device_bytes(t, rows, cols) bytes to `out` (which must not overlap).
void quant_to_device_layout(WType t, uint32_t rows, uint32_t cols, const void* blocks, void* out);

}  // namespace reach
