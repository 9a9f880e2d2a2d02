// Hostile model folders, one table: each case copies a tiny valid model,
// breaks one thing the way a downloaded folder might be broken, runs the real
// `reach` binary on it in a child process, and asserts that the child
//  * exits with a non-zero status (never a signal: no crash, no abort),
//  * within a time limit (no hang),
//  * with a message on stderr that names the file / key / flag at fault,
//  * below a peak-RSS ceiling (nothing sized from an unchecked value).
// Every row was a hang, a crash, a multi-GB allocation or a misleading
// message before it was fixed.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/files.hpp"
#include "tests/support/model_fixture.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using reach::test::temp_dir;
using reach::test::tiny_model;

namespace {

constexpr int kTimeLimitSeconds = 60;
// lavapipe + the validation layer + a tiny model stay well under 400 MiB; a
// value-sized allocation would pass this long before failing.
constexpr long kRssCeilingKiB = 1024 * 1024;

struct Outcome {
  int exit_code = -1;   // -1: killed by a signal
  int signal = 0;
  bool timed_out = false;
  long max_rss_kib = 0;
  std::string err;
};

fs::path reach_binary() {
  const char* b = std::getenv("REACH_BUILD_ROOT");
  return fs::path(b ? b : "build") / "cli" / "reach";
}

// Runs `reach args...` with stderr captured, a wall-clock limit, and the peak RSS of the child.
Outcome run_reach(const std::vector<std::string>& args) {
  const fs::path err_file = temp_dir("hostile-out") / "stderr.txt";
  const std::string bin = reach_binary().string();
  std::vector<std::string> argv_s = {bin};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(fd, 2);
    // Protects the machine, not the assertion: a regression that allocates
    // without bound fails here instead of swapping (the RSS check is below).
    const rlim_t as_limit = rlim_t(8) << 30;
    rlimit rl{as_limit, as_limit};
    setrlimit(RLIMIT_AS, &rl);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  Outcome o;
  int status = 0;
  rusage ru{};
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const pid_t r = wait4(pid, &status, WNOHANG, &ru);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(kTimeLimitSeconds)) {
      o.timed_out = true;
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  o.max_rss_kib = ru.ru_maxrss;
  std::ifstream in(err_file);
  o.err.assign(std::istreambuf_iterator<char>(in), {});
  return o;
}

fs::path fresh_copy(const std::string& name) {
  const fs::path src =
      tiny_model("--dtype f32 --hidden 32 --intermediate 64 --layers 1 --heads 2 --kv-heads 1 --vocab 300");
  const fs::path dst = temp_dir("hostile-" + name);
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

void edit_json(const fs::path& file, const std::function<void(json&)>& f) {
  json j;
  {
    std::ifstream in(file);
    in >> j;
  }
  f(j);
  std::ofstream(file) << j.dump();
}

struct Case {
  const char* name;
  std::function<void(const fs::path& dir)> break_it;   // makes the folder hostile
  std::vector<std::string> extra_args;                 // beyond `run -m DIR -p ... -n 2`
  std::vector<const char*> message;                    // substrings stderr must hold
};

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

const std::vector<Case>& cases() {
  static const std::vector<Case> table = {
      {"truncated safetensors",
       [](const fs::path& d) { fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") / 2); },
       {},
       {"model.safetensors"}},
      {"safetensors is a directory",
       [](const fs::path& d) {
         fs::remove(d / "model.safetensors");
         fs::create_directory(d / "model.safetensors");
       },
       {},
       {"model.safetensors", "regular file"}},
      {"config.json is a directory",
       [](const fs::path& d) {
         fs::remove(d / "config.json");
         fs::create_directory(d / "config.json");
       },
       {},
       {"config.json", "regular file"}},
      {"tokenizer.json is /dev/zero",
       [](const fs::path& d) {
         fs::remove(d / "tokenizer.json");
         fs::create_symlink("/dev/zero", d / "tokenizer.json");
       },
       {},
       {"tokenizer.json"}},
      {"tokenizer.json nested 100000 deep",
       [](const fs::path& d) { std::ofstream(d / "tokenizer.json") << nested_arrays(100000); },
       {},
       {"tokenizer.json", "deep"}},
      {"Metaspace replacement is empty",
       [](const fs::path& d) {
         edit_json(d / "tokenizer.json", [](json& j) {
           j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", ""}, {"prepend_scheme", "always"},
                                 {"split", true}};
         });
       },
       {},
       {"tokenizer.json", "replacement"}},
      {"Strip decoder with empty content and a huge start",
       [](const fs::path& d) {
         edit_json(d / "tokenizer.json", [](json& j) {
           j["decoder"] = {{"type", "Strip"}, {"content", ""}, {"start", 1ull << 62}, {"stop", 0}};
         });
       },
       {},
       {"tokenizer.json", "decoder.content"}},
      {"post-processor id 1e30",
       [](const fs::path& d) {
         edit_json(d / "tokenizer.json", [](json& j) {
           auto& st = j["post_processor"]["special_tokens"];
           for (auto& [k, v] : st.items()) v["ids"] = json::array({1e30});
         });
       },
       {},
       {"tokenizer.json", "ids"}},
      {"post-processor id beyond the vocabulary",
       [](const fs::path& d) {
         edit_json(d / "tokenizer.json", [](json& j) {
           auto& st = j["post_processor"]["special_tokens"];
           for (auto& [k, v] : st.items()) v["ids"] = json::array({7655});
         });
       },
       {},
       {"tokenizer.json", "not in the vocabulary"}},
      {"num_hidden_layers 3000000",
       [](const fs::path& d) { edit_json(d / "config.json", [](json& j) { j["num_hidden_layers"] = 3000000; }); },
       {},
       {"num_hidden_layers"}},
      {"num_hidden_layers 2^40",
       [](const fs::path& d) { edit_json(d / "config.json", [](json& j) { j["num_hidden_layers"] = 1ll << 40; }); },
       {},
       {"num_hidden_layers"}},
      {"heads x head_dim overflows",
       [](const fs::path& d) {
         edit_json(d / "config.json", [](json& j) {
           j["num_attention_heads"] = 1ll << 40;
           j["head_dim"] = 1ll << 40;
         });
       },
       {},
       {"num_attention_heads"}},
      {"ReRoPE window 10^8 in config.json",
       [](const fs::path& d) {
         edit_json(d / "config.json", [](json& j) {
           j["rope_scaling"] = {{"rope_type", "rerope"}, {"window", 100000000}};
         });
       },
       {},
       {"window"}},
      // Tables no device binds (a binding is at most 4 GiB: 2^26 positions of
      // the tiny model's 8 pairs); 2e7 positions fit one of 4 GiB.
      {"--rerope-window 2000000000", [](const fs::path&) {}, {"--rerope-window", "2000000000"}, {"window"}},
      {"--leaky-k 50000000", [](const fs::path&) {}, {"--rerope-window", "16", "--leaky-k", "50000000"}, {"leaky"}},
      {"--leaky-k 1e9", [](const fs::path&) {}, {"--rerope-window", "16", "--leaky-k", "1e9"}, {"leaky", "2^31"}},
      {"--temp nan", [](const fs::path&) {}, {"--temp", "nan"}, {"--temp"}},
      {"--top-p nan", [](const fs::path&) {}, {"--top-p", "nan"}, {"--top-p"}},
      {"--attn-sinks without a window", [](const fs::path&) {}, {"--attn-sinks", "4"}, {"window"}},
  };
  return table;
}

}  // namespace

TEST_CASE("hostile model folders: a clear error, no crash, no hang, bounded memory") {
  long worst_rss = 0;
  std::string worst;
  for (const Case& c : cases()) {
    const std::string name = c.name;
    CAPTURE(name);
    const fs::path dir = fresh_copy("case");
    c.break_it(dir);
    std::vector<std::string> args = {"run", "-m", dir.string(), "-p", "hello", "-n", "2", "--temp", "0"};
    args.insert(args.end(), c.extra_args.begin(), c.extra_args.end());
    const Outcome o = run_reach(args);
    CAPTURE(o.err);
    CHECK_FALSE(o.timed_out);
    CHECK(o.signal == 0);
    CHECK(o.exit_code > 0);
    CHECK(o.exit_code != 127);   // the binary ran
    for (const char* m : c.message) CHECK_MESSAGE(o.err.find(m) != std::string::npos, "stderr lacks '" << std::string(m) << "'");
    CHECK(o.err.find("bad_alloc") == std::string::npos);
    CHECK(o.max_rss_kib < kRssCeilingKiB);
    if (o.max_rss_kib > worst_rss) {
      worst_rss = o.max_rss_kib;
      worst = c.name;
    }
  }
  MESSAGE("cases: " << cases().size() << ", worst peak RSS " << worst_rss / 1024 << " MiB (" << worst << ")");
}
