#pragma once
// Reading the files reach is given (a downloaded model folder, an eval text) as
// untrusted input: only regular files, each kind with its own size limit, and
// messages that say what the path really is and the errno of the call that failed.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include "base/platform/file.hpp"

namespace reach {

// One kind of file read whole, and the largest one accepted.  Every limit is here,
// with what real files measure, so that they can be compared in one place.
struct FileKind {
  const char* name;     // in messages: "tokenizer file", "config.json", ...
  uint64_t max_bytes;
  const char* typical;  // what real ones measure, for the "too large" message
};

namespace file_kinds {
constexpr uint64_t MiB = uint64_t{1} << 20;
// A 256k-token vocabulary (Gemma) takes ~35 MB; the JSON parse costs up to ~20x the bytes.
inline constexpr FileKind tokenizer_json{"tokenizer file", 128 * MiB, "up to ~35 MB (a 256k-token vocabulary)"};
// A few kB, up to ~100 kB with per-layer overrides.
inline constexpr FileKind config_json{"config.json", 4 * MiB, "a few kB"};
// tokenizer_config.json: a few kB, up to ~1 MB with long chat templates.
inline constexpr FileKind tokenizer_config_json{"tokenizer_config.json", 16 * MiB, "a few kB to ~1 MB"};
// One entry per tensor: ~10 MB for the largest mixture-of-experts models.
inline constexpr FileKind safetensors_index{"shard index", 64 * MiB, "up to ~10 MB"};
// `reach eval -f`: the whole King James Bible is 4.3 MB.
inline constexpr FileKind eval_text{"text file", 256 * MiB, "4.3 MB for the whole Bible"};
// `reach eval --tokens`: whitespace-separated ids, ~7 bytes a token.
inline constexpr FileKind token_ids{"token file", 256 * MiB, "~7 MB for a million tokens"};
}  // namespace file_kinds

// A regular file open for reading, closed by the destructor.
class OpenFile {
 public:
  OpenFile(platform::ReadOnlyFile file, uint64_t size) : file_(std::move(file)), size_(size) {}
  platform::ReadOnlyFile& file() { return file_; }
  const platform::ReadOnlyFile& file() const { return file_; }
  uint64_t size() const { return size_; }

 private:
  platform::ReadOnlyFile file_;
  uint64_t size_;
};

// Opens `path` without blocking (a FIFO would wait for a writer) and refuses
// anything but a regular file.  Throws Error(io) "<what> <path>: <problem><hint>",
// where the problem is the strerror of the failing call or what the path is
// ("is a directory", "is a character device", ...).
OpenFile open_regular_file(const std::filesystem::path& path, const std::string& what,
                           const std::string& hint = {});

// Reads a whole regular file of at most kind.max_bytes.  Throws Error(io) as
// open_regular_file does or on a read error, Error(format) when it is larger
// than the limit (the message names the file, its size and the limit).
std::string read_file(const std::filesystem::path& path, const FileKind& kind, const std::string& hint = {});

}  // namespace reach
