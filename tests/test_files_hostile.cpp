// Files that are not what their name says, generated here: a directory, a FIFO,
// a link to /dev/zero, a socket, a file past its size limit, in every place reach
// reads a whole file (runtime/formats/file_read.hpp, the pipeline cache) or maps one
// (safetensors).  Each
// case runs in a child process with a time limit and an address-space ceiling
// (tests/support/isolated_run.hpp): reading /dev/zero or waiting on a FIFO
// fails it promptly instead of hanging the suite.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/pipeline.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/safetensors.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/isolated_run.hpp"

namespace fs = std::filesystem;
using reach::ErrorCode;
using reach::test::Outcome;
using reach::test::run_isolated;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("reach_test_files_" + std::to_string(getpid()) + "_" +
                                        std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& name) const { return path / name; }
};

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// A file of `size` bytes that takes no disk space.
void make_sparse(const fs::path& p, uint64_t size) {
  write_text(p, "");
  fs::resize_file(p, size);
}

void make_fifo(const fs::path& p) { REQUIRE(::mkfifo(p.c_str(), 0600) == 0); }

void make_socket(const fs::path& p) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  REQUIRE(p.string().size() < sizeof a.sun_path);
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", p.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  ::close(fd);  // the socket file stays
}

// The kinds of non-regular file a path can be, each with the words its error names.
struct Impostor {
  const char* name;
  std::function<void(const fs::path&)> make;
  const char* words;  // what the message says
};
const Impostor kImpostors[] = {
    {"directory", [](const fs::path& p) { fs::create_directory(p); }, "is a directory, not a regular file"},
    {"fifo", make_fifo, "is a FIFO (named pipe), not a regular file"},
    {"link to /dev/zero", [](const fs::path& p) { fs::create_symlink("/dev/zero", p); },
     "is a character device (a symbolic link to /dev/zero), not a regular file"},
    {"socket", make_socket, "is a socket, not a regular file"},
};

void expect_error(const Outcome& o, ErrorCode code, std::initializer_list<std::string> words,
                  std::initializer_list<std::string> absent = {}) {
  INFO(o.describe());
  CHECK(o.kind == Outcome::error);
  if (o.kind != Outcome::error) return;  // one failure per case, the cases after it still run
  CHECK(reach::error_code_name(o.code) == std::string(reach::error_code_name(code)));
  for (const std::string& w : words) CHECK_MESSAGE(o.message.find(w) != std::string::npos, "missing: " << w);
  for (const std::string& w : absent) CHECK_MESSAGE(o.message.find(w) == std::string::npos, "present: " << w);
}

template <class F>
Outcome isolated(F&& f) {
  return run_isolated([&] {
    f();
    return std::string();
  });
}

const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-5, "max_position_embeddings": 256, "vocab_size": 100})";

}  // namespace

TEST_CASE("files_hostile: read_file refuses what is not a regular file and says what it is") {
  TempDir dir;
  const reach::FileKind kind{"test file", 1 << 20, "small"};
  for (const Impostor& imp : kImpostors) {
    CAPTURE(std::string(imp.name));
    const fs::path p = dir / (std::string("x_") + std::to_string(&imp - kImpostors));
    imp.make(p);
    Outcome o = isolated([&] { reach::read_file(p, kind); });
    expect_error(o, ErrorCode::io, {"test file " + p.string() + ": "});
    CHECK_MESSAGE(o.message.find(imp.words) != std::string::npos, o.message);
  }
  // The real errno of the call that failed.
  expect_error(isolated([&] { reach::read_file(dir / "missing", kind); }), ErrorCode::io,
               {"missing: cannot open: No such file or directory"});
  write_text(dir / "plain", "x");
  expect_error(isolated([&] { reach::read_file(dir / "plain" / "below", kind); }), ErrorCode::io,
               {"cannot open: Not a directory"});
  // The limit, exactly; a file past it is refused before it is read.
  const reach::FileKind ten{"test file", 10, "tiny"};
  write_text(dir / "ten", std::string(10, 'a'));
  CHECK(reach::read_file(dir / "ten", ten) == std::string(10, 'a'));
  write_text(dir / "eleven", std::string(11, 'a'));
  expect_error(isolated([&] { reach::read_file(dir / "eleven", ten); }), ErrorCode::format,
               {(dir / "eleven").string(), "11 bytes exceeds the 10 bytes limit for a test file (real ones: tiny)"});
  // Files whose size says 0 (procfs) are read to their end.
  CHECK(reach::read_file("/proc/self/status", kind).find("Name:") != std::string::npos);
}

TEST_CASE("files_hostile: tokenizer.json") {
  TempDir dir;
  for (const Impostor& imp : kImpostors) {
    CAPTURE(std::string(imp.name));
    TempDir model;
    imp.make(model / "tokenizer.json");
    // Both ways in: the model directory, and the file's own path.
    for (const fs::path& arg : {model.path, model / "tokenizer.json"}) {
      Outcome o = isolated([&] { reach::Tokenizer::load(arg); });
      expect_error(o, ErrorCode::io,
                   {"tokenizer file " + (model / "tokenizer.json").string() + ": is ", "Hugging Face"},
                   {"tokenizer.json/tokenizer.json"});
      CHECK_MESSAGE(o.message.find(imp.words) != std::string::npos, o.message);
    }
  }
  make_sparse(dir / "tokenizer.json", reach::file_kinds::tokenizer_json.max_bytes + 1);
  expect_error(isolated([&] { reach::Tokenizer::load(dir.path); }), ErrorCode::format,
               {"tokenizer.json", "exceeds the 128 MiB limit for a tokenizer file"});
}

TEST_CASE("files_hostile: config.json") {
  for (const Impostor& imp : kImpostors) {
    CAPTURE(std::string(imp.name));
    TempDir model;
    const fs::path p = model / "config.json";
    imp.make(p);
    for (const fs::path& arg : {model.path, p}) {
      Outcome o = isolated([&] { reach::load_model_config(arg); });
      // Was ".../config.json/config.json: No such file or directory" for a directory.
      expect_error(o, ErrorCode::io, {"config.json " + p.string() + ": is "}, {"config.json/config.json"});
      CHECK_MESSAGE(o.message.find(imp.words) != std::string::npos, o.message);
    }
  }
  TempDir dir;
  make_sparse(dir / "config.json", reach::file_kinds::config_json.max_bytes + 1);
  expect_error(isolated([&] { reach::load_model_config(dir.path); }), ErrorCode::format,
               {"exceeds the 4 MiB limit for a config.json"});
  write_text(dir / "config.json", kConfig);
  CHECK(reach::load_model_config(dir.path).hidden_size == 64);
}

TEST_CASE("files_hostile: safetensors files and the shard index") {
  for (const Impostor& imp : kImpostors) {
    CAPTURE(std::string(imp.name));
    TempDir model;
    const fs::path p = model / "model.safetensors";
    imp.make(p);
    // Was a stale errno ("No such file or directory") for a device, and a hang on a FIFO.
    Outcome o = isolated([&] { reach::SafeTensorsFile::open(p); });
    expect_error(o, ErrorCode::io, {"safetensors file " + p.string() + ": is "}, {"No such file"});
    CHECK_MESSAGE(o.message.find(imp.words) != std::string::npos, o.message);
    if (std::string(imp.name) != "directory") {
      expect_error(isolated([&] { reach::ModelWeights::open_dir(model.path); }), ErrorCode::io, {imp.words});
      fs::remove(p);
      imp.make(model / "model.safetensors.index.json");
      o = isolated([&] { reach::ModelWeights::open_dir(model.path); });
      expect_error(o, ErrorCode::io, {"shard index " + (model / "model.safetensors.index.json").string() + ": is "});
      CHECK_MESSAGE(o.message.find(imp.words) != std::string::npos, o.message);
    }
  }
  TempDir model;
  const fs::path index = model / "model.safetensors.index.json";
  make_sparse(index, reach::file_kinds::safetensors_index.max_bytes + 1);
  expect_error(isolated([&] { reach::ModelWeights::open_dir(model.path); }), ErrorCode::format,
               {"exceeds the 64 MiB limit for a shard index"});
  write_text(index, "{\"weight_map\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  expect_error(isolated([&] { reach::ModelWeights::open_dir(model.path); }), ErrorCode::format,
               {"nests deeper than 16 levels"});
}

TEST_CASE("files_hostile: reach eval -f / --tokens") {
  TempDir model;
  write_text(model / "config.json", kConfig);
  fs::copy_file(reach::test::source_root() / "tests/data/tokenizer/gpt2_bpe.json", model / "tokenizer.json");
  TempDir dir;
  fs::create_directory(dir / "a_directory");
  make_fifo(dir / "a_fifo");
  write_text(dir / "empty", "");
  write_text(dir / "blank", " \n\t\n");
  make_sparse(dir / "huge", reach::file_kinds::eval_text.max_bytes + 1);
  const std::string reach_bin = (reach::test::build_root() / "cli" / "reach").string();
  // Runs `reach eval -m MODEL ARGS`; returns its exit status and stderr.
  auto eval = [&](const std::string& args) {
    const std::string cmd = "REACH_PROGRESS=0 timeout 60 " + reach_bin + " eval -m " + model.path.string() + " " +
                            args + " 2>&1 >/dev/null";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    const int status = ::pclose(p);
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  struct Case {
    std::string args;
    std::vector<std::string> words;
  };
  const Case cases[] = {
      // Was "the sample has 1 tokens".
      {"-f " + (dir / "a_directory").string(), {"text file", "is a directory, not a regular file"}},
      {"-f " + (dir / "a_fifo").string(), {"is a FIFO"}},  // was a hang
      {"-f " + (dir / "empty").string(), {"text file", "is empty"}},
      {"-f " + (dir / "huge").string(), {"exceeds the 256 MiB limit for a text file"}},
      {"--tokens " + (dir / "a_directory").string(), {"token file", "is a directory"}},
      {"--tokens " + (dir / "a_fifo").string(), {"token file", "is a FIFO"}},
      {"--tokens " + (dir / "blank").string(), {"token file", "holds no ids"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    auto [rc, err] = eval(c.args);
    CAPTURE(err);
    CHECK(rc == 1);  // 124 would be the timeout
    for (const std::string& w : c.words) CHECK_MESSAGE(err.find(w) != std::string::npos, "missing: " << w);
  }
}

TEST_CASE("files_hostile: the pipeline cache file is read only when it is a regular file") {
  for (const Impostor& imp : kImpostors) {
    CAPTURE(std::string(imp.name));
    TempDir cache;
    // A FIFO planted under the cache file's name hung the start; /dev/zero was read until memory ran out.
    Outcome o = run_isolated([&] {
      reach::DeviceOptions opt;
      opt.pipeline_cache_dir = cache.path.string();
      const std::string file = reach::Device::create(opt)->pipelines().cache_file();
      fs::remove_all(file);
      imp.make(file);
      reach::Device::create(opt);
      return file;
    });
    INFO(o.describe());
    CHECK(o.kind == Outcome::returned);
    CHECK(o.message.rfind(cache.path.string(), 0) == 0);
  }
}
