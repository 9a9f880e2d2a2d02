#pragma once
// Read-only mappings of whole files (mmap / CreateFileMappingW + MapViewOfFile),
// for the safetensors and GGUF readers: the file's bytes without a copy, paged
// in as the upload reads them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/platform/file.hpp"

namespace reach::platform {

// The OS's page size (the mapping granularity on POSIX), a power of two.
size_t page_size();

// A read-only, private view of a whole file, unmapped by the destructor.  The
// view keeps the file alive: the ReadOnlyFile may be closed after map().
class FileMapping {
 public:
  FileMapping() = default;
  ~FileMapping() { unmap(); }
  FileMapping(FileMapping&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  FileMapping& operator=(FileMapping&& o) noexcept;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  // Maps the first `size` bytes of `file` (its whole length: status()'s size),
  // size > 0.  False, with the system's text in `error`, when the OS refuses.
  bool map(const ReadOnlyFile& file, uint64_t size, std::string& error);
  void unmap() noexcept;

  const std::byte* data() const { return static_cast<const std::byte*>(data_); }
  uint64_t size() const { return size_; }
  bool mapped() const { return data_ != nullptr; }

 private:
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace reach::platform
