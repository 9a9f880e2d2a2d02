#pragma once
// The process and the machine it runs on: its id, the physical memory, its own
// resident memory, the open-file limit, a command's exit code.  (Environment
// variables: the library reads none, tools/check_no_getenv.py; the edges use
// std::getenv, and tests set them with tests/support/environment.hpp.)
#include <cstdint>

namespace reach::platform {

// getpid() / GetCurrentProcessId(): unique names for temporary files.
uint64_t process_id();

// Physical RAM in bytes; 0 when the OS does not say.  Linux: sysconf
// (_SC_PHYS_PAGES x page size); macOS: sysctl hw.memsize; Windows:
// GlobalMemoryStatusEx.
uint64_t physical_memory();

// This process's resident set in bytes (Linux /proc/self/statm, macOS
// task_info, Windows GetProcessMemoryInfo); 0 when unknown.
uint64_t resident_memory();

// Raises the soft limit on open files to the hard one (setrlimit RLIMIT_NOFILE;
// a server holds a descriptor per connection).  Nothing on Windows, whose
// sockets have no such limit.  Returns the limit in effect, 0 when none.
uint64_t raise_open_file_limit();

// The exit code of a command from std::system's or pclose's result: WEXITSTATUS
// where it exited (-1 when a signal ended it) on POSIX, the value itself on Windows.
int command_exit_code(int status);

}  // namespace reach::platform
