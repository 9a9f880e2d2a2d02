#pragma once
// Paths, temporary directories, files and shell commands for the test suites.
#include <filesystem>
#include <optional>
#include <string>

namespace reach::test {

// Repository root (REACH_SOURCE_ROOT, set by meson test) and build root (REACH_BUILD_ROOT).
std::filesystem::path source_root();
std::filesystem::path build_root();
// The Python that runs tools/make_tiny_model.py and tools/reference_forward.py (numpy):
// $REACH_TEST_PYTHON, else Debian's /usr/bin/python3 (what tools/setup.sh installs numpy into).
std::string python();
// The model cache tools/get_*.sh install into: ${REACH_MODELS:-$HOME/.cache/reach/models}.
std::filesystem::path models_dir();
// Gemma 3 270M Q4_K_M: $REACH_GEMMA3_GGUF, else where tools/get_gemma3.sh puts it; nullopt
// (after a SKIP message) when absent.
std::optional<std::filesystem::path> gemma3_gguf();

// A directory under the process's own temp root, /tmp/reach-test-<pid>/<name>;
// it stays after the run (tiny models and reference outputs live there).
std::filesystem::path temp_dir(const std::string& name);

// A fresh, empty directory /tmp/reach_test_<tag>_<pid>_<n>, removed with the object.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "tmp");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

// The whole file; fails the test (REQUIRE) when it cannot be opened.
std::string read_text(const std::filesystem::path& p);

// Runs a shell command; fails the test with its output on a non-zero exit.
std::string run_command(const std::string& cmd);
// Runs a shell command and returns its exit status (-1 when it cannot start) and standard output,
// for callers that decide themselves what a failure means (a reference that may be absent: skip).
struct CommandResult {
  int status = -1;
  std::string out;
};
CommandResult capture_command(const std::string& cmd);

}  // namespace reach::test
