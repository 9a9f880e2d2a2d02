#include "tests/support/files.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

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
  fs::path d = fs::temp_directory_path() / ("reach-test-" + std::to_string(getpid())) / name;
  fs::create_directories(d);
  return d;
}

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path = fs::temp_directory_path() /
         ("reach_test_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
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

}  // namespace reach::test
