#include "base/platform/console.hpp"

#ifdef _WIN32
#include <io.h>
#include <windows.h>
#else
#include <unistd.h>
#endif

namespace reach::platform {

#ifdef _WIN32

namespace {
HANDLE console_of(Stream s) { return GetStdHandle(s == Stream::out ? STD_OUTPUT_HANDLE : STD_ERROR_HANDLE); }
}  // namespace

bool is_terminal(Stream stream) {
  DWORD mode = 0;
  return _isatty(stream == Stream::out ? 1 : 2) && GetConsoleMode(console_of(stream), &mode);
}

bool enable_ansi_escapes(Stream stream) {
  HANDLE h = console_of(stream);
  DWORD mode = 0;
  if (!GetConsoleMode(h, &mode)) return false;
  if (mode & ENABLE_VIRTUAL_TERMINAL_PROCESSING) return true;
  return SetConsoleMode(h, mode | ENABLE_VIRTUAL_TERMINAL_PROCESSING) != 0;
}

#else

bool is_terminal(Stream stream) { return ::isatty(stream == Stream::out ? STDOUT_FILENO : STDERR_FILENO) == 1; }

bool enable_ansi_escapes(Stream stream) { return is_terminal(stream); }

#endif

}  // namespace reach::platform
