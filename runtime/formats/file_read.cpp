#include "runtime/formats/file_read.hpp"

#include "base/error.hpp"
#include "base/platform/file_names.hpp"

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
  return ec ? std::string(" (a symbolic link)") : " (a symbolic link to " + platform::path_to_utf8(target) + ")";
}

[[noreturn]] void not_regular(const std::string& where, platform::FileType type, const std::filesystem::path& path,
                              const std::string& hint) {
  throw Error(ErrorCode::io,
              where + ": is " + platform::file_type_name(type) + link_note(path) + ", not a regular file" + hint);
}

}  // namespace

OpenFile open_regular_file(const std::filesystem::path& path, const std::string& what, const std::string& hint) {
  const std::string where = what + " " + platform::path_to_utf8(path);
  platform::ReadOnlyFile file;
  std::string error;
  platform::FileType type{};
  if (!file.open(path, error)) {
    // A socket cannot be opened (ENXIO), nor a directory on Windows: say what the path is rather than
    // "No such device".
    if (platform::path_type(path, type) && type != platform::FileType::regular) not_regular(where, type, path, hint);
    throw Error(ErrorCode::io, where + ": cannot open: " + error + hint);
  }
  uint64_t size = 0;
  if (!file.status(type, size, error)) throw Error(ErrorCode::io, where + ": cannot stat: " + error + hint);
  if (type != platform::FileType::regular) not_regular(where, type, path, hint);
  return OpenFile(std::move(file), size);
}

std::string read_file(const std::filesystem::path& path, const FileKind& kind, const std::string& hint) {
  OpenFile f = open_regular_file(path, kind.name, hint);
  const std::string where = std::string(kind.name) + " " + platform::path_to_utf8(path);
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
  std::string error;
  for (;;) {
    const int64_t n = f.file().read(buf, sizeof buf, error);
    if (n < 0) throw Error(ErrorCode::io, where + ": read error: " + error + hint);
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > kind.max_bytes)
      too_large("more than " + std::to_string(kind.max_bytes) + " bytes");
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace reach
