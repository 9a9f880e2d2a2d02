#include "runtime/formats/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.hpp"

namespace reach {

namespace {

std::string describe_size(uint64_t bytes) {
  if (bytes % file_kinds::MiB == 0) return std::to_string(bytes / file_kinds::MiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// " (a symbolic link to /dev/zero)" when the path is a link, so the message
// explains why "tokenizer.json" is a device.
std::string link_note(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return {};
  std::filesystem::path target = std::filesystem::read_symlink(path, ec);
  return ec ? std::string(" (a symbolic link)") : " (a symbolic link to " + target.string() + ")";
}

[[noreturn]] void not_regular(const std::string& where, unsigned mode, const std::filesystem::path& path,
                              const std::string& hint) {
  throw Error(ErrorCode::io, where + ": is " + file_type_name(mode) + link_note(path) + ", not a regular file" + hint);
}

}  // namespace

const char* file_type_name(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a file";
}

OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

OpenFile open_regular_file(const std::filesystem::path& path, const std::string& what, const std::string& hint) {
  const std::string where = what + " " + path.string();
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int e = errno;  // before stat() can change it
    struct stat st {};
    // A socket cannot be opened (ENXIO): say what the path is rather than "No such device".
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) not_regular(where, st.st_mode, path, hint);
    throw Error(ErrorCode::io, where + ": cannot open: " + std::strerror(e) + hint);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(ErrorCode::io, where + ": cannot stat: " + std::strerror(e) + hint);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    not_regular(where, st.st_mode, path, hint);
  }
  // Regular files ignore O_NONBLOCK; clear it so later reads are plainly blocking.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return OpenFile(fd, static_cast<uint64_t>(st.st_size));
}

std::string read_file(const std::filesystem::path& path, const FileKind& kind, const std::string& hint) {
  OpenFile f = open_regular_file(path, kind.name, hint);
  const std::string where = std::string(kind.name) + " " + path.string();
  auto too_large = [&](const std::string& size) {
    throw Error(ErrorCode::format, where + ": " + size + " exceeds the " + describe_size(kind.max_bytes) +
                                       " limit for a " + kind.name + " (real ones: " + kind.typical +
                                       ") - this is not the file reach expects here");
  };
  if (f.size() > kind.max_bytes) too_large(std::to_string(f.size()) + " bytes");
  std::string out;
  out.reserve(static_cast<size_t>(f.size()));
  // Read to the end rather than st_size bytes (a file can grow, /proc reports 0),
  // never past the limit: at most max_bytes + one buffer are held.
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(f.fd(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      throw Error(ErrorCode::io, where + ": read error: " + std::strerror(e) + hint);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > kind.max_bytes)
      too_large("more than " + std::to_string(kind.max_bytes) + " bytes");
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace reach
