#pragma once
// How a quantized matrix (GGML block format, kernels.hpp's WType::q*) is laid
// out in device memory.  The file holds rows of blocks (array of structs); the
// device copy has exactly the same number of bytes, arranged so the kernels
// can read it with wide aligned loads.  Loaders call quant_to_device_layout on
// the host once per tensor; nothing is ever expanded to 16 or 32 bits.
#include <cstdint>

#include "kernels/kernels.hpp"

namespace reach {

// Bytes the device copy of a [rows, cols] matrix of type t takes (== the file's bytes).
uint64_t quant_device_bytes(WType t, uint32_t rows, uint32_t cols);

// `blocks` holds rows * cols / wtype_block_elems(t) blocks in file order (row-major);
// writes quant_device_bytes(t, rows, cols) bytes to `out` (which must not overlap).
void quant_to_device_layout(WType t, uint32_t rows, uint32_t cols, const void* blocks, void* out);

}  // namespace reach
