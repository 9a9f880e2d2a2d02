// base/platform/: file handles and mappings, UTF-8 file names, the process, stop signals.  Each case
// checks the OS's answer against one found another way (the bytes written, std::filesystem, the
// shell's exit code, /proc).
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/platform/file.hpp"
#include "base/platform/file_map.hpp"
#include "base/platform/file_names.hpp"
#include "base/platform/process.hpp"
#include "base/platform/signals.hpp"
#include "runtime/formats/file_read.hpp"
#include "tests/support/files.hpp"

namespace fs = std::filesystem;
namespace platform = reach::platform;
using reach::test::TempDir;

namespace {

// Writes `bytes` through the platform's fopen (binary: no newline translation).
void write_bytes(const fs::path& p, const std::string& bytes) {
  std::FILE* f = platform::open_file(p, "wb");
  REQUIRE_MESSAGE(f, "cannot create " << platform::path_to_utf8(p));
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  REQUIRE(std::fclose(f) == 0);
}

// Every byte value, then a pattern over `n` bytes: a file whose mapping must match it byte for byte.
std::string pattern(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    s[i] = char(i < 256 ? i : x & 0xff);
  }
  return s;
}

std::string mapped_bytes(const fs::path& p) {
  platform::ReadOnlyFile f;
  std::string error;
  REQUIRE_MESSAGE(f.open(p, error), error);
  platform::FileType type{};
  uint64_t size = 0;
  REQUIRE_MESSAGE(f.status(type, size, error), error);
  CHECK(type == platform::FileType::regular);
  platform::FileMapping m;
  REQUIRE_MESSAGE(m.map(f, size, error), error);
  f.close();   // the mapping outlives the handle
  CHECK(m.size() == size);
  return std::string(reinterpret_cast<const char*>(m.data()), size_t(m.size()));
}

std::string read_in_chunks(const fs::path& p, size_t chunk) {
  platform::ReadOnlyFile f;
  std::string error, out;
  REQUIRE_MESSAGE(f.open(p, error), error);
  std::vector<char> buf(chunk);
  for (;;) {
    const int64_t n = f.read(buf.data(), buf.size(), error);
    REQUIRE_MESSAGE(n >= 0, error);
    if (n == 0) break;
    out.append(buf.data(), size_t(n));
  }
  return out;
}

}  // namespace

TEST_CASE("platform: a mapped file holds the bytes written, across pages") {
  TempDir dir("platform_map");
  const size_t page = platform::page_size();
  for (size_t n : {size_t(1), size_t(255), page, 3 * page + 17}) {
    CAPTURE(n);
    const std::string bytes = pattern(n);
    write_bytes(dir / "f.bin", bytes);
    CHECK(fs::file_size(dir / "f.bin") == n);
    CHECK(mapped_bytes(dir / "f.bin") == bytes);
  }
}

TEST_CASE("platform: a moved mapping keeps the view; an empty file is refused") {
  TempDir dir("platform_move");
  write_bytes(dir / "f.bin", "abcdef");
  platform::ReadOnlyFile f;
  std::string error;
  REQUIRE(f.open(dir / "f.bin", error));
  platform::FileMapping a;
  REQUIRE(a.map(f, 6, error));
  const std::byte* at = a.data();
  platform::FileMapping b = std::move(a);
  CHECK_FALSE(a.mapped());
  CHECK(b.data() == at);
  CHECK(std::memcmp(b.data(), "abcdef", 6) == 0);
  b.unmap();
  CHECK_FALSE(b.mapped());
  CHECK_FALSE(b.map(f, 0, error));
  CHECK(error.find("cannot map 0 bytes") != std::string::npos);
}

TEST_CASE("platform: the page size is a power of two of at least 4 KiB") {
  const size_t page = platform::page_size();
  CHECK(page >= 4096);
  CHECK((page & (page - 1)) == 0);
}

TEST_CASE("platform: a file named with spaces and non-ASCII characters is created, opened, mapped, read, listed") {
  TempDir tmp("platform_names");
  const std::string folder = "m\xc3\xb3" "del dir";                       // "módel dir"
  const std::string name = "\xc3\xbcn\xc3\xaf \xe6\x96\x87.json";         // "ünï 文.json"
  const fs::path dir = tmp.path / platform::path_from_utf8(folder);
  const fs::path file = dir / platform::path_from_utf8(name);
  fs::create_directories(dir);
  const std::string text = "{\"hidden_size\": 64}\n";
  write_bytes(file, text);

  CHECK(fs::is_regular_file(file));
  CHECK(reach::read_file(file, reach::file_kinds::config_json) == text);
  CHECK(mapped_bytes(file) == text);
  CHECK(read_in_chunks(file, 3) == text);
  platform::FileType type{};
  REQUIRE(platform::path_type(file, type));
  CHECK(type == platform::FileType::regular);

  // Listed under the name it was given, as UTF-8.
  std::vector<std::string> listed;
  for (const auto& e : fs::directory_iterator(dir)) listed.push_back(platform::path_to_utf8(e.path().filename()));
  CHECK(listed == std::vector<std::string>{name});
  CHECK(platform::path_to_utf8(file).find(folder + "/" + name) != std::string::npos);
  // An error names the path in UTF-8 too.
  try {
    (void)reach::read_file(dir / platform::path_from_utf8("n\xc3\xb6ne.json"), reach::file_kinds::config_json);
    FAIL("a missing file was read");
  } catch (const reach::Error& e) {
    CHECK(std::string(e.what()).find(folder + "/n\xc3\xb6ne.json: cannot open") != std::string::npos);
  }
}

TEST_CASE("platform: CRLF and a Ctrl-Z are read byte-exact (no text-mode translation)") {
  TempDir dir("platform_crlf");
  const std::string bytes = "line one\r\nline two\r\n\x1a\r\rend\n";
  write_bytes(dir / "crlf.txt", bytes);
  CHECK(fs::file_size(dir / "crlf.txt") == bytes.size());
  CHECK(reach::read_file(dir / "crlf.txt", reach::file_kinds::eval_text) == bytes);
  CHECK(read_in_chunks(dir / "crlf.txt", 4) == bytes);
  CHECK(mapped_bytes(dir / "crlf.txt") == bytes);
}

TEST_CASE("platform: a directory is one, and a missing path is none") {
  TempDir dir("platform_types");
  platform::FileType type{};
  REQUIRE(platform::path_type(dir.path, type));
  CHECK(type == platform::FileType::directory);
  CHECK(std::string(platform::file_type_name(type)) == "a directory");
  CHECK_FALSE(platform::path_type(dir / "missing", type));
  platform::ReadOnlyFile f;
  std::string error;
  CHECK_FALSE(f.open(dir / "missing", error));
  CHECK_FALSE(error.empty());
  CHECK_FALSE(f.is_open());
}

TEST_CASE("platform: UTF-8 <-> path round trips, and the path holds the OS's own encoding") {
  const std::vector<std::string> names = {
      "plain.json", "with space", "m\xc3\xb3" "del",  "\xe6\x96\x87\xe4\xbb\xb6",  // 文件
      "\xf0\x9f\xa6\x99 llama",                                                      // an emoji (4 bytes)
      "a/b/c.gguf"};
  for (const std::string& s : names) {
    CAPTURE(s);
    const fs::path p = platform::path_from_utf8(s);
    CHECK(platform::path_to_utf8(p) == s);
#ifdef _WIN32
    CHECK(p.native() == platform::wide_from_utf8(s));
    CHECK(platform::utf8_from_wide(p.native()) == s);
#else
    CHECK(p.native() == s);   // POSIX paths are the bytes themselves
#endif
  }
  // Components survive: the filename of a UTF-8 path is the UTF-8 of its last part.
  CHECK(platform::path_to_utf8(platform::path_from_utf8("d\xc3\xafr/\xe6\x96\x87.gguf").filename()) ==
        "\xe6\x96\x87.gguf");
  CHECK(platform::path_to_utf8(platform::path_from_utf8("d\xc3\xafr/\xe6\x96\x87.gguf").stem()) == "\xe6\x96\x87");
}

TEST_CASE("platform: the arguments pass through as UTF-8") {
  char a0[] = "reach", a1[] = "run", a2[] = "-m", a3[] = "m\xc3\xb3" "del";
  char* argv[] = {a0, a1, a2, a3, nullptr};
#ifndef _WIN32
  CHECK(platform::utf8_arguments(4, argv) == std::vector<std::string>{"reach", "run", "-m", "m\xc3\xb3" "del"});
#else
  CHECK_FALSE(platform::utf8_arguments(4, argv).empty());   // this test program's own command line
#endif
}

TEST_CASE("platform: physical memory, resident memory, process id") {
  const uint64_t ram = platform::physical_memory();
  const uint64_t rss = platform::resident_memory();
  CHECK(ram > (uint64_t{64} << 20));
  CHECK(rss > 0);
  CHECK(rss < ram);
  // Touching 64 MiB raises the resident set by about that much.
  std::vector<char> block(size_t{64} << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = char(i);
  CHECK(platform::resident_memory() >= rss + (uint64_t{48} << 20));
  CHECK(block[4096] == char(4096));
  std::error_code ec;
  if (const fs::path self = fs::read_symlink("/proc/self", ec); !ec)
    CHECK(std::to_string(platform::process_id()) == self.filename().string());
  else
    CHECK(platform::process_id() > 0);
}

TEST_CASE("platform: command exit codes, as the shell returns them") {
  CHECK(platform::command_exit_code(std::system("exit 3")) == 3);
  CHECK(platform::command_exit_code(std::system("exit 0")) == 0);
  CHECK(platform::command_exit_code(std::system("exit 200")) == 200);
}

TEST_CASE("platform: stop signals: a deadline passes, wake() ends a wait early") {
  using Clock = std::chrono::steady_clock;
  // In threads of their own: the signals stay blocked in the thread that made the StopSignals.
  std::thread([] {
    platform::StopSignals s;
    const auto t0 = Clock::now();
    CHECK(s.wait(t0 + std::chrono::milliseconds(150)) == platform::StopSignal::none);
    CHECK(Clock::now() - t0 >= std::chrono::milliseconds(150));
  }).join();
  std::thread([] {
    platform::StopSignals s;
    const auto t0 = Clock::now();
    std::thread waker([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      s.wake();
    });
    CHECK(s.wait() == platform::StopSignal::none);   // no deadline: only wake() ends it
    CHECK(Clock::now() - t0 < std::chrono::seconds(10));
    waker.join();
    CHECK(s.wait(Clock::now() + std::chrono::seconds(10)) == platform::StopSignal::none);   // woken stays
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
  }).join();
#ifndef _WIN32
  // A signal raised in the waiting thread (blocked there, so pending until taken) is reported as itself.
  std::thread([] {
    platform::StopSignals s;
    std::raise(SIGTERM);
    CHECK(s.wait(std::chrono::steady_clock::now() + std::chrono::seconds(5)) == platform::StopSignal::terminate);
    std::raise(SIGINT);
    CHECK(s.wait() == platform::StopSignal::interrupt);
    CHECK(std::string(platform::stop_signal_name(platform::StopSignal::terminate)) == "SIGTERM");
  }).join();
#endif
}
