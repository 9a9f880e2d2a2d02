#include "tests/support/files.hpp"

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/platform/process.hpp"


namespace reach::test {

namespace fs = std::filesystem;

fs::path source_root() {
  if (const char* s = std::getenv("REACH_SOURCE_ROOT"); s && *s) return s;
  return fs::current_path();
}

fs::path build_root() {
  if (const char* s = std::getenv("REACH_BUILD_ROOT"); s && *s) return s;
  return fs::current_path() / "build";
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("reach-test-" + std::to_string(reach::platform::process_id())) / name;
  fs::create_directories(d);
  return d;
}

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path = fs::temp_directory_path() /
         ("reach_test_" + tag + "_" + std::to_string(reach::platform::process_id()) + "_" + std::to_string(counter++));
  fs::remove_all(path);
  fs::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot open " << p.string() << " (REACH_SOURCE_ROOT is the repository root)");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE_MESSAGE(p != nullptr, "cannot run: " << cmd);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int rc = pclose(p);
  INFO("command: " << cmd << "\noutput:\n" << out);
  REQUIRE(rc == 0);
  return out;
}

CommandResult capture_command(const std::string& cmd) {
  CommandResult c;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) c.out.append(buf.data(), n);
    c.status = reach::platform::command_exit_code(pclose(p));
  }
  return c;
}

std::string python() {
  if (const char* s = std::getenv("REACH_TEST_PYTHON"); s && *s) return s;
  return "/usr/bin/python3";
}

fs::path models_dir() {
  if (const char* m = std::getenv("REACH_MODELS"); m && *m) return m;
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/") / ".cache/reach/models";
}

std::optional<fs::path> gemma3_gguf() {
  if (const char* e = std::getenv("REACH_GEMMA3_GGUF"); e && *e) return fs::path(e);
  const fs::path p = models_dir() / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf";
  if (fs::is_regular_file(p)) return p;
  MESSAGE("SKIP: " << p.string() << " is absent (tools/get_gemma3.sh fetches it; or set REACH_GEMMA3_GGUF)");
  return std::nullopt;
}

}  // namespace reach::test
