#include "base/platform/local_time.hpp"

namespace reach::platform {

std::tm local_time(std::time_t t) {
  std::tm tm{};
#ifdef _WIN32
  if (localtime_s(&tm, &t) != 0) tm = std::tm{};   // argument order is the reverse of POSIX's
#else
  if (!localtime_r(&t, &tm)) tm = std::tm{};
#endif
  return tm;
}

}  // namespace reach::platform
