#pragma once
// A file open for reading through the OS's own handle (a descriptor on POSIX,
// a HANDLE on Windows), for the readers of untrusted files: open without
// blocking, ask what was opened, read in chunks, map (file_map.hpp).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace reach::platform {

enum class FileType { regular, directory, character_device, block_device, fifo, socket, symlink, other };

// "a regular file", "a directory", "a character device", "a FIFO (named pipe)", ...
const char* file_type_name(FileType type);

// What `path` names, following links (as stat); false when it cannot be looked at.
bool path_type(const std::filesystem::path& path, FileType& type);

class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ~ReadOnlyFile() { close(); }
  ReadOnlyFile(ReadOnlyFile&& o) noexcept : handle_(o.handle_) { o.handle_ = kClosed; }
  ReadOnlyFile& operator=(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // Opens `path` for reading.  POSIX: O_NONBLOCK for the open alone (a FIFO would
  // wait for a writer; cleared after), O_CLOEXEC, O_NOCTTY.  Windows: shared for
  // reading, writing and deleting, as POSIX allows.  False, with the system's
  // text in `error`, when it cannot be opened (a directory cannot, on Windows).
  bool open(const std::filesystem::path& path, std::string& error);
  // The type and size of the open file (fstat / GetFileType + GetFileSizeEx).
  bool status(FileType& type, uint64_t& size, std::string& error) const;
  // Reads up to `n` bytes: the count, 0 at the end, -1 on an error (text in `error`).
  int64_t read(void* buffer, size_t n, std::string& error);
  void close() noexcept;

  bool is_open() const { return handle_ != kClosed; }
  // The descriptor (POSIX) or HANDLE (Windows), for file_map.cpp.
  intptr_t native_handle() const { return handle_; }

 private:
  static constexpr intptr_t kClosed = -1;   // also Windows' INVALID_HANDLE_VALUE
  intptr_t handle_ = kClosed;
};

}  // namespace reach::platform
