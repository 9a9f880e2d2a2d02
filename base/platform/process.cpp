#include "base/platform/process.hpp"

#ifdef _WIN32
#include <windows.h>
#include <psapi.h>
#else
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif
#ifdef __APPLE__
#include <mach/mach.h>
#include <sys/sysctl.h>
#endif

#include <cstdio>

namespace reach::platform {

#ifdef _WIN32

uint64_t process_id() { return GetCurrentProcessId(); }

uint64_t physical_memory() {
  MEMORYSTATUSEX m{};
  m.dwLength = sizeof m;
  return GlobalMemoryStatusEx(&m) ? m.ullTotalPhys : 0;
}

uint64_t resident_memory() {
  PROCESS_MEMORY_COUNTERS c{};
  return GetProcessMemoryInfo(GetCurrentProcess(), &c, sizeof c) ? c.WorkingSetSize : 0;
}

uint64_t raise_open_file_limit() { return 0; }

int command_exit_code(int status) { return status; }

#else

uint64_t process_id() { return static_cast<uint64_t>(::getpid()); }

uint64_t physical_memory() {
#ifdef __APPLE__
  uint64_t bytes = 0;
  size_t len = sizeof bytes;
  int mib[2] = {CTL_HW, HW_MEMSIZE};
  return ::sysctl(mib, 2, &bytes, &len, nullptr, 0) == 0 ? bytes : 0;
#else
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
#endif
}

uint64_t resident_memory() {
#ifdef __APPLE__
  mach_task_basic_info info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, reinterpret_cast<task_info_t>(&info), &count) != KERN_SUCCESS)
    return 0;
  return info.resident_size;
#else
  // statm: size resident shared ... in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return n == 2 && page > 0 ? resident * uint64_t(page) : 0;
#endif
}

uint64_t raise_open_file_limit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return 0;
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    // macOS refuses more than OPEN_MAX for the soft limit of an unlimited hard one.
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0) ::getrlimit(RLIMIT_NOFILE, &files);
  }
  return files.rlim_cur == RLIM_INFINITY ? 0 : uint64_t(files.rlim_cur);
}

int command_exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

#endif

}  // namespace reach::platform
