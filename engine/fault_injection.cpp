#include "engine/fault_injection.hpp"

#include "base/error.hpp"

namespace reach {

const char* fault_point_name(FaultPoint p) {
  switch (p) {
    case FaultPoint::submit: return "submit";
    case FaultPoint::wait: return "wait";
    case FaultPoint::alloc: return "alloc";
    case FaultPoint::count_: break;
  }
  return "unknown";
}

void FaultInjector::arm(FaultPoint point, uint64_t nth, VkResult result) {
  if (nth == 0 || result >= 0)
    throw Error(ErrorCode::invalid_argument, "fault injection: nth must be >= 1 and the result an error");
  std::lock_guard lock(mu_);
  armed_ = true;
  point_ = point;
  left_ = nth;
  result_ = result;
}

void FaultInjector::disarm() {
  std::lock_guard lock(mu_);
  armed_ = false;
}

VkResult FaultInjector::next(FaultPoint point) {
  calls_[size_t(point)]++;
  std::lock_guard lock(mu_);
  if (!armed_ || point != point_ || --left_ > 0) return VK_SUCCESS;
  armed_ = false;
  return result_;
}

void FaultInjector::arm_from(const Settings::Fault& fault) {
  if (fault.point.empty()) return;
  // Once per process: the server's device rebuilt after the fault, or a second device, runs clean.
  static std::atomic<bool> taken{false};
  if (taken.exchange(true)) return;
  const FaultPoint p = fault.point == "submit" ? FaultPoint::submit
                       : fault.point == "wait" ? FaultPoint::wait
                                               : FaultPoint::alloc;
  const VkResult r = fault.result == "device_lost"            ? VK_ERROR_DEVICE_LOST
                     : fault.result == "out_of_host_memory"   ? VK_ERROR_OUT_OF_HOST_MEMORY
                                                              : VK_ERROR_OUT_OF_DEVICE_MEMORY;
  arm(p, fault.nth, r);
}

}  // namespace reach
