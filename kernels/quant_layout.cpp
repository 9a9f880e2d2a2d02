#include "kernels/quant_layout.hpp"

#include <cstring>

namespace reach {

uint64_t quant_device_bytes(WType t, uint32_t rows, uint32_t cols) { return uint64_t(rows) * wtype_row_bytes(t, cols); }

void quant_to_device_layout(WType t, uint32_t rows, uint32_t cols, const void* blocks, void* out) {
  std::memcpy(out, blocks, size_t(quant_device_bytes(t, rows, cols)));
}

}  // namespace reach
