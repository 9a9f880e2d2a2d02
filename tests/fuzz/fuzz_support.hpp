#pragma once
// Shared by the fuzz targets: the input as a file (the loaders take paths),
// and the one exception a parser may throw.
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenizer.hpp"

namespace reach::fuzz {

// True in the short runs of `meson test` (REACH_FUZZ_SKIP_OPEN=1): the targets
// then step around the open findings of tests/fuzz/crashes/, so CI stays green
// until their fixes land; tools/fuzz.sh runs without it and finds them.  Each
// use names its finding; remove it with the fix.
inline bool skip_open_findings() {
  static const bool skip = [] {
    const char* v = std::getenv("REACH_FUZZ_SKIP_OPEN");
    return v && v[0] == '1';
  }();
  return skip;
}

// A memory-backed file (memfd) reused by every run: the loaders read it through
// /proc/self/fd/N, so no disk I/O and nothing left behind.
class MemFile {
 public:
  explicit MemFile(const char* name) {
    fd_ = memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the content with [data, data + size).
  const std::string& write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// What every target does with a tokenizer that loaded: encode fixed texts (with
// and without specials), decode them both ways, decode the first 64 ids and
// out-of-range ones, and stream them.  Traps when encode emits an id outside the
// vocabulary; reach::Error from a refused id is the caller's to catch.
inline void exercise_tokenizer(const reach::Tokenizer& tok) {
  static constexpr std::string_view kTexts[] = {
      "", " ", "Hello, world!", "  two  spaces\n\tand tabs ", "123 4567 ünïcödé 日本語 🙂",
      "<s></s><|endoftext|><|im_start|>", "\xff\xfe invalid \xc3", "▁metaspace▁text",
  };
  const int32_t vocab = tok.vocab_size();
  if (vocab < 0) __builtin_trap();
  for (std::string_view text : kTexts) {
    for (bool add_special : {false, true}) {
      const std::vector<int32_t> ids = tok.encode(text, add_special);
      for (int32_t id : ids)
        if (id < 0 || id >= vocab) __builtin_trap();   // encode only emits ids of the vocabulary
      (void)tok.decode(ids, true);
      (void)tok.decode(ids, false);
    }
  }
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab && id < 64; ++id) ids.push_back(id);
  for (int64_t id : {int64_t{-1}, int64_t{vocab}, int64_t{vocab} + 1, int64_t{INT_MAX}, int64_t{INT_MIN}})
    if (id <= INT_MAX) ids.push_back(static_cast<int32_t>(id));
  (void)tok.decode(ids, false);
  reach::Tokenizer::StreamDecoder stream(tok, true);
  for (int32_t id : ids) (void)stream.push(id);
  (void)stream.flush();
  (void)tok.bos_id();
  (void)tok.eos_id();
}

}  // namespace reach::fuzz
