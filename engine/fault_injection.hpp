#pragma once
// A test hook that fails one Vulkan call on purpose: the Nth queue submission, fence wait or memory
// allocation of a device returns a chosen VkResult instead of running.  A lost GPU (a Windows TDR, a
// driver reset, a weak iGPU's timeout) or a heap exhausted mid-run cannot be produced on demand on a real
// device, yet every path that must survive one (the C API, `reach run`, `reach serve`) needs testing.
// Each Device has one (Device::faults()); the tests arm it directly, the CLI and server tests through
// REACH_FAULT (Settings::fault), which arms the first device a process makes only, so a device rebuilt
// after the fault runs clean.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include <vulkan/vulkan.h>

#include "base/settings.hpp"

namespace reach {

enum class FaultPoint : uint8_t { submit, wait, alloc, count_ };
const char* fault_point_name(FaultPoint p);

class FaultInjector {
 public:
  // The nth call at `point` from now (1: the next one) returns `result`; one fault, then disarmed.
  void arm(FaultPoint point, uint64_t nth, VkResult result);
  void disarm();
  // Called by the choke points before the real call: VK_SUCCESS (go on), or the armed result.
  VkResult next(FaultPoint point);
  // Calls counted at `point` since the device was made (tests size their N with it).
  uint64_t calls(FaultPoint point) const { return calls_[size_t(point)].load(); }
  // Arms from Settings::fault, once per process (a no-op for an empty one or after the first).
  void arm_from(const Settings::Fault& fault);

 private:
  std::mutex mu_;
  bool armed_ = false;
  FaultPoint point_ = FaultPoint::submit;
  uint64_t left_ = 0;
  VkResult result_ = VK_SUCCESS;
  std::atomic<uint64_t> calls_[size_t(FaultPoint::count_)] = {};
};

}  // namespace reach
