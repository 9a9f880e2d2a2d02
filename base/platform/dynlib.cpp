#include "base/platform/dynlib.hpp"

#include <utility>

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace reach {

namespace {

#if defined(_WIN32)
std::wstring widen(const std::string& utf8) {
  if (utf8.empty()) return {};
  const int n = MultiByteToWideChar(CP_UTF8, 0, utf8.data(), int(utf8.size()), nullptr, 0);
  std::wstring out(size_t(n > 0 ? n : 0), L'\0');
  if (n > 0) MultiByteToWideChar(CP_UTF8, 0, utf8.data(), int(utf8.size()), out.data(), n);
  return out;
}

std::string narrow(const wchar_t* text) {
  const int n = WideCharToMultiByte(CP_UTF8, 0, text, -1, nullptr, 0, nullptr, nullptr);
  if (n <= 1) return {};
  std::string out(size_t(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, text, -1, out.data(), n, nullptr, nullptr);
  out.resize(size_t(n - 1));
  return out;
}

std::string last_error_text() {
  const DWORD code = GetLastError();
  wchar_t* text = nullptr;
  const DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                                 nullptr, code, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  std::string out = n && text ? narrow(text) : "error " + std::to_string(code);
  if (text) LocalFree(text);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}
#endif

void close_handle(void* handle) {
  if (!handle) return;
#if defined(_WIN32)
  FreeLibrary(static_cast<HMODULE>(handle));
#else
  dlclose(handle);
#endif
}

}  // namespace

DynamicLibrary DynamicLibrary::open(const std::string& name, std::string* error) {
  DynamicLibrary lib;
#if defined(_WIN32)
  lib.handle_ = reinterpret_cast<void*>(LoadLibraryW(widen(name).c_str()));
  if (!lib.handle_ && error) *error = last_error_text();
#else
  // RTLD_LOCAL: the library's symbols stay out of the global namespace, so a
  // host that loads its own Vulkan loader is not handed ours by accident.
  lib.handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle_ && error) {
    const char* why = dlerror();
    *error = why ? why : "unknown error";
  }
#endif
  if (lib.handle_) lib.name_ = name;
  return lib;
}

DynamicLibrary::~DynamicLibrary() { close_handle(handle_); }

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), name_(std::move(other.name_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    close_handle(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

void* DynamicLibrary::symbol(const char* symbol) const {
  if (!handle_) return nullptr;
#if defined(_WIN32)
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(handle_), symbol));
#else
  return dlsym(handle_, symbol);
#endif
}

}  // namespace reach
