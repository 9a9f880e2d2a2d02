#pragma once
// A shared library opened at run time (dlopen / LoadLibraryW) and the symbols
// looked up in it.  Vulkan-free: the engine's loader uses it to find the
// Vulkan loader, so that no reach binary links libvulkan and a machine without
// one gets an error instead of a program that cannot start.
#include <string>

namespace reach {

class DynamicLibrary {
 public:
  // Opens `name` (UTF-8; a bare name is looked up the platform's way, a path is
  // taken as it is).  Returns an empty library on failure; `error` then holds the
  // system's reason (dlerror / FormatMessageW), when given.
  static DynamicLibrary open(const std::string& name, std::string* error = nullptr);

  DynamicLibrary() = default;
  ~DynamicLibrary();
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  bool is_open() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }
  // The address of `symbol`, or nullptr when the library has none.
  void* symbol(const char* symbol) const;

 private:
  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace reach
