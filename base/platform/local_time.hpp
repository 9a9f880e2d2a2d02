#pragma once
// The calendar time in the machine's time zone, thread-safe on every OS
// (std::localtime shares one buffer between threads).
#include <ctime>

namespace reach::platform {

// localtime_r on POSIX, localtime_s on Windows; a zeroed tm if the OS cannot convert.
std::tm local_time(std::time_t t);

}  // namespace reach::platform
