#include "base/platform/file_map.hpp"

#ifdef _WIN32
#include <windows.h>
#else
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <limits>

#include "base/platform/system_error.hpp"

namespace reach::platform {

FileMapping& FileMapping::operator=(FileMapping&& o) noexcept {
  if (this != &o) {
    unmap();
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

#ifdef _WIN32

size_t page_size() {
  SYSTEM_INFO info{};
  GetSystemInfo(&info);
  return info.dwPageSize;
}

bool FileMapping::map(const ReadOnlyFile& file, uint64_t size, std::string& error) {
  unmap();
  if (size == 0 || size > std::numeric_limits<size_t>::max()) {
    error = "cannot map " + std::to_string(size) + " bytes";
    return false;
  }
  // Sizes 0: the mapping and the view take the file's whole length.
  HANDLE mapping = CreateFileMappingW(reinterpret_cast<HANDLE>(file.native_handle()), nullptr, PAGE_READONLY, 0,
                                      0, nullptr);
  if (!mapping) {
    error = last_error_text();
    return false;
  }
  void* view = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, static_cast<SIZE_T>(size));
  if (!view) error = last_error_text();
  CloseHandle(mapping);   // the view keeps the mapping object alive
  if (!view) return false;
  data_ = view;
  size_ = size;
  return true;
}

void FileMapping::unmap() noexcept {
  if (data_) UnmapViewOfFile(data_);
  data_ = nullptr;
  size_ = 0;
}

#else

size_t page_size() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

bool FileMapping::map(const ReadOnlyFile& file, uint64_t size, std::string& error) {
  unmap();
  if (size == 0 || size > std::numeric_limits<size_t>::max()) {
    error = "cannot map " + std::to_string(size) + " bytes";
    return false;
  }
  // No MAP_POPULATE (Linux only, and the upload touches each page once anyway).
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, static_cast<int>(file.native_handle()), 0);
  if (p == MAP_FAILED) {
    error = last_error_text();
    return false;
  }
  data_ = p;
  size_ = size;
  return true;
}

void FileMapping::unmap() noexcept {
  if (data_) ::munmap(data_, static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

#endif

}  // namespace reach::platform
