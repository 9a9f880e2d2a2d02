#include "runtime/model/expert_layout.hpp"

#include <cstring>

#include "runtime/quant/mxfp4.hpp"

namespace reach {

std::vector<std::byte> experts_transposed(const std::byte* src, uint64_t esize, int64_t n, int64_t rows, int64_t cols,
                                          int64_t first, int64_t step) {
  const uint64_t R = uint64_t(rows), C = uint64_t(cols), m = uint64_t((cols - first + step - 1) / step);
  std::vector<std::byte> out(uint64_t(n) * m * R * esize);
  for (uint64_t e = 0; e < uint64_t(n); ++e)
    for (uint64_t r = 0; r < R; ++r)
      for (uint64_t j = 0; j < m; ++j)
        std::memcpy(out.data() + ((e * m + j) * R + r) * esize,
                    src + ((e * R + r) * C + uint64_t(first) + uint64_t(step) * j) * esize, esize);
  return out;
}

std::vector<std::byte> columns_every(const std::byte* src, uint64_t esize, int64_t rows, int64_t cols, int64_t first,
                                     int64_t step) {
  return experts_transposed(src, esize, rows, 1, cols, first, step);   // [rows][m][1] is [rows][m]
}

std::vector<std::byte> mxfp4_experts_from_openai(const uint8_t* codes, const uint8_t* scales, int64_t n, int64_t rows,
                                                 int64_t cols, int64_t first, int64_t step) {
  const uint64_t bpr = uint64_t(cols / 32), m = uint64_t((rows - first + step - 1) / step);
  std::vector<std::byte> out(uint64_t(n) * m * bpr * 17);
  for (uint64_t e = 0; e < uint64_t(n); ++e)
    for (uint64_t j = 0; j < m; ++j) {
      const uint64_t r = e * uint64_t(rows) + uint64_t(first) + uint64_t(step) * j;
      mxfp4_from_openai(codes + r * bpr * 16, scales + r * bpr, bpr, out.data() + (e * m + j) * bpr * 17);
    }
  return out;
}

}  // namespace reach
