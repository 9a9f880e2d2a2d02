// Elementwise kernels: silu_mul and the bf16 -> f32 / f32 -> f16 conversions.
// Grid-stride loops, as add (kernels.cpp).
#include <algorithm>
#include <string>

#include "engine/device.hpp"
#include "engine/error.hpp"
#include "engine/kernels.hpp"

namespace reach {

namespace {
constexpr uint32_t kGroup = 256;
uint32_t groups(uint64_t n) { return std::min<uint32_t>(groups_for(n, kGroup), 65535u); }

void need(const BufferRange& b, uint64_t bytes, const char* op, const char* what, uint32_t n) {
  if (b.size < bytes)
    throw Error(ErrorCode::internal, std::string(op) + ": " + what + " holds " + std::to_string(b.size) +
                                         " bytes, n=" + std::to_string(n) + " needs " + std::to_string(bytes));
}

void need_16bit(const Device& device, const char* op) {
  if (!device.caps().storage_16bit)
    throw Error(ErrorCode::unsupported, std::string(op) + ": needs 16-bit storage buffers (storageBuffer16BitAccess), "
                                                          "which this device does not support or enable");
}
}  // namespace

void Kernels::silu_mul(CommandList& cmd, const BufferRange& g, const BufferRange& u, const BufferRange& y, uint32_t n) {
  need(g, uint64_t(n) * 4, "silu_mul", "g", n);
  need(u, uint64_t(n) * 4, "silu_mul", "u", n);
  need(y, uint64_t(n) * 4, "silu_mul", "y", n);
  if (n == 0) return;
  const auto& p = device_.pipelines().get({"silu_mul_f32", 3, 4, {kGroup}});
  cmd.dispatch(p, {g, u, y}, &n, sizeof n, groups(n), 1, 1, "silu_mul");
}

void Kernels::bf16_to_f32(CommandList& cmd, const BufferRange& in, const BufferRange& out, uint32_t n) {
  need_16bit(device_, "bf16_to_f32");
  need(in, uint64_t(n) * 2, "bf16_to_f32", "in", n);
  need(out, uint64_t(n) * 4, "bf16_to_f32", "out", n);
  if (n == 0) return;
  const auto& p = device_.pipelines().get({"bf16_to_f32", 2, 4, {kGroup}});
  cmd.dispatch(p, {in, out}, &n, sizeof n, groups(n), 1, 1, "bf16_to_f32");
}

void Kernels::f32_to_f16(CommandList& cmd, const BufferRange& in, const BufferRange& out, uint32_t n) {
  need_16bit(device_, "f32_to_f16");
  need(in, uint64_t(n) * 4, "f32_to_f16", "in", n);
  need(out, uint64_t(n) * 2, "f32_to_f16", "out", n);
  if (n == 0) return;
  const auto& p = device_.pipelines().get({"f32_to_f16", 2, 4, {kGroup}});
  cmd.dispatch(p, {in, out}, &n, sizeof n, groups(n), 1, 1, "f32_to_f16");
}

}  // namespace reach
