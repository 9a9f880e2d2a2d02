#include "base/platform/file.hpp"

#ifdef _WIN32
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#endif

#include <limits>
#include <system_error>

#include "base/platform/system_error.hpp"

namespace reach::platform {

const char* file_type_name(FileType type) {
  switch (type) {
    case FileType::regular: return "a regular file";
    case FileType::directory: return "a directory";
    case FileType::character_device: return "a character device";
    case FileType::block_device: return "a block device";
    case FileType::fifo: return "a FIFO (named pipe)";
    case FileType::socket: return "a socket";
    case FileType::symlink: return "a symbolic link";
    case FileType::other: break;
  }
  return "not a file";
}

bool path_type(const std::filesystem::path& path, FileType& type) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || st.type() == fs::file_type::not_found || st.type() == fs::file_type::none) return false;
  switch (st.type()) {
    case fs::file_type::regular: type = FileType::regular; break;
    case fs::file_type::directory: type = FileType::directory; break;
    case fs::file_type::character: type = FileType::character_device; break;
    case fs::file_type::block: type = FileType::block_device; break;
    case fs::file_type::fifo: type = FileType::fifo; break;
    case fs::file_type::socket: type = FileType::socket; break;
    case fs::file_type::symlink: type = FileType::symlink; break;
    default: type = FileType::other; break;
  }
  return true;
}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    close();
    handle_ = o.handle_;
    o.handle_ = kClosed;
  }
  return *this;
}

#ifdef _WIN32

namespace {
HANDLE as_handle(intptr_t h) { return reinterpret_cast<HANDLE>(h); }
}  // namespace

bool ReadOnlyFile::open(const std::filesystem::path& path, std::string& error) {
  close();
  HANDLE h = CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                         nullptr, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    error = last_error_text();
    return false;
  }
  handle_ = reinterpret_cast<intptr_t>(h);
  return true;
}

bool ReadOnlyFile::status(FileType& type, uint64_t& size, std::string& error) const {
  switch (GetFileType(as_handle(handle_))) {
    case FILE_TYPE_DISK: type = FileType::regular; break;
    case FILE_TYPE_CHAR: type = FileType::character_device; break;
    case FILE_TYPE_PIPE: type = FileType::fifo; break;
    default: type = FileType::other; break;
  }
  size = 0;
  if (type != FileType::regular) return true;
  LARGE_INTEGER n{};
  if (!GetFileSizeEx(as_handle(handle_), &n)) {
    error = last_error_text();
    return false;
  }
  size = static_cast<uint64_t>(n.QuadPart);
  return true;
}

int64_t ReadOnlyFile::read(void* buffer, size_t n, std::string& error) {
  DWORD got = 0;
  const DWORD want = n > std::numeric_limits<DWORD>::max() ? std::numeric_limits<DWORD>::max() : DWORD(n);
  if (!ReadFile(as_handle(handle_), buffer, want, &got, nullptr)) {
    if (GetLastError() == ERROR_BROKEN_PIPE) return 0;   // a pipe's writer has gone: the end
    error = last_error_text();
    return -1;
  }
  return static_cast<int64_t>(got);
}

void ReadOnlyFile::close() noexcept {
  if (handle_ != kClosed) CloseHandle(as_handle(handle_));
  handle_ = kClosed;
}

#else

namespace {

FileType type_of(mode_t mode) {
  if (S_ISREG(mode)) return FileType::regular;
  if (S_ISDIR(mode)) return FileType::directory;
  if (S_ISCHR(mode)) return FileType::character_device;
  if (S_ISBLK(mode)) return FileType::block_device;
  if (S_ISFIFO(mode)) return FileType::fifo;
  if (S_ISSOCK(mode)) return FileType::socket;
  if (S_ISLNK(mode)) return FileType::symlink;
  return FileType::other;
}

}  // namespace

bool ReadOnlyFile::open(const std::filesystem::path& path, std::string& error) {
  close();
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    error = last_error_text();
    return false;
  }
  // Regular files ignore O_NONBLOCK; clear it so later reads are plainly blocking.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  handle_ = fd;
  return true;
}

bool ReadOnlyFile::status(FileType& type, uint64_t& size, std::string& error) const {
  struct stat st {};
  if (::fstat(static_cast<int>(handle_), &st) != 0) {
    error = last_error_text();
    return false;
  }
  type = type_of(st.st_mode);
  size = static_cast<uint64_t>(st.st_size);
  return true;
}

int64_t ReadOnlyFile::read(void* buffer, size_t n, std::string& error) {
  for (;;) {
    const ssize_t got = ::read(static_cast<int>(handle_), buffer, n);
    if (got >= 0) return got;
    if (errno == EINTR) continue;
    error = last_error_text();
    return -1;
  }
}

void ReadOnlyFile::close() noexcept {
  if (handle_ != kClosed) ::close(static_cast<int>(handle_));
  handle_ = kClosed;
}

#endif

}  // namespace reach::platform
