#include "base/platform/system_error.hpp"

#ifdef _WIN32
#include <windows.h>
#else
#include <cerrno>
#include <cstring>
#endif

#include "base/platform/file_names.hpp"

namespace reach::platform {

#ifdef _WIN32

int last_error() { return static_cast<int>(GetLastError()); }

std::string error_text(int code) {
  wchar_t* text = nullptr;
  const DWORD n = FormatMessageW(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
      static_cast<DWORD>(code), 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  if (n == 0 || !text) return "error " + std::to_string(code);
  std::wstring w(text, n);
  LocalFree(text);
  while (!w.empty() && (w.back() == L'\n' || w.back() == L'\r' || w.back() == L' ')) w.pop_back();
  return utf8_from_wide(w);
}

#else

int last_error() { return errno; }

std::string error_text(int code) { return std::strerror(code); }

#endif

}  // namespace reach::platform
