#pragma once
// One linear-kernel case with guards, shared by the linear suites (test_kernels_linear*.cpp): X and
// W are placed at byte offsets inside buffers filled with 0xCD, Y is pre-filled with a sentinel, the
// case records its kernel on those, and Y is checked against the reference inside [y_off, + M*N)
// and against the sentinel on both sides of it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/kernel_check.hpp"

namespace reach::test {

struct LinearCheck {
  std::string op, params;   // as KernelCheck's
  uint32_t seed = 0;
  Tolerance tol;
  uint32_t M = 0, N = 0, K = 0;
  WType type = WType::f32;
  uint32_t x_off = 0, w_off = 0, y_off = 0;   // byte offsets of X, W, Y in their buffers
  const std::vector<float>* x = nullptr;       // [M, K]
  const std::vector<uint8_t>* w = nullptr;     // W as the device reads it
  uint32_t w_tail = 0;                         // bytes of 0xCD after W
  std::function<std::vector<double>()> reference;   // [M, N]
  std::function<void(CommandList&, const Act&, const Mat&, const Act&)> record;
};

void check_linear(const LinearCheck& c);

}  // namespace reach::test
