// Hostile sizes: config.json values and scheme options that would size host
// vectors or device buffers beyond reason.  Each must end in one reach::Error
// naming the key or parameter, before anything large is allocated.
//
// Every case runs in a forked child (this process never opens Vulkan, so the
// child starts clean) whose address space is capped a few GiB above its size
// after creating the device: an unchecked size ends there as a failed
// allocation instead of taking the machine's memory.  The child reports the
// error and its peak RSS growth (VmHWM after a reset of the peak); the parent
// checks the child was not killed, the error code and message, and the ceiling.
#include <doctest/doctest.h>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
// Peak RSS growth allowed for a rejected input (a working tiny session stays well below it).
constexpr long kCeilingKiB = 256 * 1024;

const char* kTinyArgs = "--dtype f32 --hidden 32 --intermediate 64 --layers 1 --heads 2 --kv-heads 1 --vocab 270";

struct Outcome {
  bool exited = false;       // the child returned normally (not killed, no crash)
  bool reach_error = false;  // it threw reach::Error
  int code = 0;              // its ErrorCode
  std::string message;       // what() of whatever it threw; empty when nothing was thrown
  long base_kib = 0, peak_kib = 0;
  std::string validation;    // validation-layer messages
  long growth_kib() const { return peak_kib - base_kib; }
};

// "VmRSS" etc. of /proc/self/status, in KiB.
long proc_status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return std::atol(line.c_str() + prefix.size());
  return -1;
}

void write_all(int fd, const std::string& s) {
  for (size_t off = 0; off < s.size();) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += size_t(n);
  }
}

// Runs body(device, allocator) in a child capped at its size after creating
// the device + as_margin bytes of address space.
// Runs a sane tiny model (defined below, with the model helpers).
void warm_up(Device& device, Allocator& allocator);

Outcome run_isolated(const std::function<void(Device&, Allocator&)>& body, uint64_t as_margin = 3 * kGiB) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    // meson test sets MALLOC_PERTURB_, which fills every malloc (lavapipe's
    // device memory included) and so makes untouched blocks resident.
    mallopt(M_PERTURB, 0);
    json r;
    std::string validation;
    try {
      DeviceOptions opt;
      opt.validation = reach::test::validation_wanted();
      opt.on_validation = [&](int severity, const std::string& m) {
        if (severity >= 1) validation += m + "\n";
      };
      auto device = Device::create(opt);
      auto allocator = std::make_unique<Allocator>(*device);
      // A GPU driver's shader compiler stays resident once used (NVIDIA's: 260-560 MiB, seen on
      // an H100). That is paid once per process whatever the input, so on such a device a sane
      // tiny model runs first and the peak is measured from after it.
      if (!device->caps().is_cpu()) warm_up(*device, *allocator);
      const long vm_kib = proc_status_kib("VmSize");
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = rlim_t(vm_kib) * 1024 + as_margin;
      ::setrlimit(RLIMIT_AS, &lim);
      {
        std::ofstream("/proc/self/clear_refs") << "5";   // resets VmHWM to the current RSS
      }
      r["base"] = proc_status_kib("VmRSS");
      try {
        body(*device, *allocator);
        r["message"] = "";
      } catch (const Error& e) {
        r["reach_error"] = true;
        r["code"] = int(e.code());
        r["message"] = e.what();
      } catch (const std::exception& e) {
        r["message"] = std::string("not a reach::Error: ") + e.what();
      }
      r["peak"] = proc_status_kib("VmHWM");
      allocator.reset();
      device.reset();
    } catch (const std::exception& e) {
      r["message"] = std::string("setup failed: ") + e.what();
    }
    r["validation"] = validation;
    write_all(fds[1], r.dump());
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Outcome o;
  o.exited = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !text.empty();
  if (!o.exited) {
    o.message = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) : "no report";
    return o;
  }
  const json r = json::parse(text);
  o.reach_error = r.value("reach_error", false);
  o.code = r.value("code", 0);
  o.message = r.value("message", "");
  o.base_kib = r.value("base", 0L);
  o.peak_kib = r.value("peak", 0L);
  o.validation = r.value("validation", "");
  return o;
}

fs::path copy_model(const std::string& name, const char* args = kTinyArgs) {
  const fs::path src = tiny_model(args);
  const fs::path dst = temp_dir("hostile-" + name);
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

void edit_config(const fs::path& dir, const std::function<void(json&)>& f) {
  json j;
  {
    std::ifstream in(dir / "config.json");
    in >> j;
  }
  f(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

// Loads the model, opens a session with `so` and feeds one token.
void load_and_run(Device& device, Allocator& allocator, const fs::path& dir, const SessionOptions& so) {
  LoadOptions lo;
  lo.require_tokenizer = false;
  auto model = Model::load(device, allocator, dir, lo);
  Session session(*model, so);
  const int32_t id = 1;
  session.prefill({&id, 1});
}

void check_rejected(const Outcome& o, ErrorCode code, const std::vector<std::string>& needles) {
  INFO("message: " << o.message);
  INFO("peak RSS growth: " << o.growth_kib() / 1024 << " MiB");
  REQUIRE(o.exited);
  CHECK(o.reach_error);
  CHECK(o.code == int(code));
  for (const auto& n : needles) CHECK_MESSAGE(o.message.find(n) != std::string::npos, "missing: " << n);
  CHECK(o.message.find("bad_alloc") == std::string::npos);
  CHECK(o.growth_kib() < kCeilingKiB);
  CHECK(o.validation.empty());
}

struct ConfigCase {
  const char* name;
  json patch;   // merged into config.json
  SessionOptions session;
  ErrorCode code;
  std::vector<std::string> needles;
};

SessionOptions with(const std::function<void(SessionOptions&)>& f) {
  SessionOptions so;
  so.context = 64;
  f(so);
  return so;
}

void warm_up(Device& device, Allocator& allocator) {
  SessionOptions so;
  so.context = 64;
  load_and_run(device, allocator, tiny_model(kTinyArgs), so);
}

}  // namespace

TEST_CASE("hostile sizes: a sane tiny model runs inside the ceiling (the harness measures)") {
  const fs::path dir = copy_model("sane");
  const Outcome o = run_isolated([&](Device& d, Allocator& a) { load_and_run(d, a, dir, with([](auto&) {})); });
  INFO("message: " << o.message);
  REQUIRE(o.exited);
  CHECK(o.message.empty());
  CHECK(o.peak_kib > 0);
  CHECK(o.growth_kib() < kCeilingKiB);
  MESSAGE("sane tiny model: peak RSS growth " << o.growth_kib() / 1024 << " MiB");
}

TEST_CASE("hostile sizes: config.json and scheme values, each refused before it is allocated") {
  const int64_t i64_max = INT64_MAX;
  const std::vector<ConfigCase> cases = {
      // num_hidden_layers sized the layer list before any tensor was looked up (2.4 GB; 2^40: std::bad_alloc).
      {"layers_3e6", {{"num_hidden_layers", 3000000}}, with([](auto&) {}), ErrorCode::format,
       {"num_hidden_layers=3000000", "hold 1 layer", "model.layers.1."}},
      {"layers_2p40", {{"num_hidden_layers", int64_t(1) << 40}}, with([](auto&) {}), ErrorCode::format,
       {"num_hidden_layers", "1099511627776"}},
      // num_attention_heads x head_dim overflowed int64 (undefined behaviour; "expected [0, 32]").
      {"heads_x_head_dim_overflow", {{"num_attention_heads", int64_t(1) << 32}, {"head_dim", int64_t(1) << 32},
                                     {"num_key_value_heads", 1}},
       with([](auto&) {}), ErrorCode::format, {"num_attention_heads"}},
      {"heads_x_head_dim_too_large", {{"num_attention_heads", 65536}, {"head_dim", 65536}, {"num_key_value_heads", 1}},
       with([](auto&) {}), ErrorCode::format, {"num_attention_heads 65536 x head_dim 65536"}},
      {"vocab_2p62", {{"vocab_size", int64_t(1) << 62}}, with([](auto&) {}), ErrorCode::format, {"'vocab_size'"}},
      {"max_position_2p62", {{"max_position_embeddings", int64_t(1) << 62}}, with([](auto&) {}), ErrorCode::format,
       {"'max_position_embeddings'"}},
      // The Self-Extend message suggested (W/G + 1)·G, which overflowed: "use e.g. window -9223372036854775808".
      {"self_extend_suggestion", {{"rope_scaling", {{"rope_type", "self_extend"}, {"group", 2}, {"window", i64_max}}}},
       with([](auto&) {}), ErrorCode::format, {"use e.g. window 9223372036854775806"}},
      // ReRoPE windows built host tables of 1.3 / 6.3 GB before a binding error.
      // (2e9: beyond any device's binding; 2e7 fits one of 4 GiB at the tiny model's 8 pairs.)
      {"rerope_window_2e9", {{"rope_scaling", {{"rope_type", "rerope"}, {"window", 2000000000}}}}, with([](auto&) {}),
       ErrorCode::unsupported, {"rerope window 2000000000", "use a window of at most"}},
      {"rerope_window_flag_1e8", json::object(), with([](auto& so) { so.overrides.rerope_window = 100000000; }),
       ErrorCode::unsupported, {"rerope window 100000000", "use a window of at most"}},
      // A Leaky ReRoPE k that shifts table 2 by 10^9 rows (std::bad_alloc).
      {"leaky_k_2e6", json::object(), with([](auto& so) {
         so.overrides.rerope_window = 512;
         so.overrides.leaky_k = 2000000;
       }),
       ErrorCode::unsupported, {"leaky_rerope window·(k−1)", "at most"}},
      // Self-Extend's grouped positions sized table 1 (std::bad_alloc).
      {"self_extend_window_2e9", json::object(), with([](auto& so) {
         so.overrides.se_group = 2;
         so.overrides.se_window = 2000000000;
       }),
       ErrorCode::unsupported, {"self_extend group 2, window 2000000000", "use a window of at most"}},
      // A context whose table and KV cache exceed one binding (2.1 GB at 2^24 before the kernel said
      // so).  2^30: an H100's 4 GiB bindings hold 2^24 positions of the tiny model.
      {"context_2p30", json::object(), with([](auto& so) { so.context = 1u << 30; }), ErrorCode::out_of_memory,
       {"a context of 1073741824 tokens", "use a context of at most"}},
  };
  for (const ConfigCase& c : cases) {
    SUBCASE(c.name) {
      const fs::path dir = copy_model(c.name);
      edit_config(dir, [&](json& j) { j.update(c.patch); });
      const Outcome o = run_isolated([&](Device& d, Allocator& a) { load_and_run(d, a, dir, c.session); });
      check_rejected(o, c.code, c.needles);
      MESSAGE(std::string(c.name) << ": peak RSS growth " << o.growth_kib() / 1024 << " MiB");
    }
  }
}

TEST_CASE("hostile sizes: a KV cache larger than one binding is refused before it is allocated") {
  // 4 kv heads x 16: 256 bytes of keys per token, 4x the 64-byte cos/sin row, so
  // the cache (not the table) is what does not fit.
  const fs::path dir =
      copy_model("kv", "--dtype f32 --hidden 64 --intermediate 64 --layers 1 --heads 4 --kv-heads 4 --vocab 270");
  const Outcome o = run_isolated([&](Device& d, Allocator& a) {
    const uint64_t limit = std::min<uint64_t>(d.caps().max_storage_buffer_range, d.caps().max_buffer_size);
    SessionOptions so;
    so.context = uint32_t(std::min<uint64_t>(limit / 256 + 1024, 1u << 24));   // the cache just past one binding
    load_and_run(d, a, dir, so);
  });
  check_rejected(o, ErrorCode::out_of_memory, {"needs a KV cache of", "use a context of at most"});
}

TEST_CASE("hostile sizes: weights and sessions beyond the memory left are refused with their sizes") {
  const fs::path dir = copy_model("budget");
  SUBCASE("weights") {
    const Outcome o = run_isolated([&](Device& d, Allocator& a) {
      a.limit_headroom(16 << 10);   // the tiny weights need ~60 KiB
      load_and_run(d, a, dir, with([](auto&) {}));
    });
    check_rejected(o, ErrorCode::out_of_memory, {"the weights of", "needs", "left for the weights arena"});
  }
  SUBCASE("session") {
    const Outcome o = run_isolated([&](Device& d, Allocator& a) {
      LoadOptions lo;
      lo.require_tokenizer = false;
      auto model = Model::load(d, a, dir, lo);
      a.limit_headroom(1 << 20);
      SessionOptions so;
      so.context = 1 << 16;   // 8 MiB of cache and table
      Session session(*model, so);
    });
    check_rejected(o, ErrorCode::out_of_memory, {"a session with a context of 65536 tokens", "KV cache"});
  }
}

TEST_CASE("hostile sizes: a (sparse) model larger than the device's memory is refused before the upload") {
  // How much the weights arena may take on this device: the budget of
  // VK_EXT_memory_budget, the heap, or on a CPU device the host's memory.
  const Outcome probe = run_isolated([](Device&, Allocator& a) {
    throw Error(ErrorCode::internal, std::to_string(a.headroom(Arena::weights).available));
  });
  REQUIRE(probe.exited);
  const uint64_t available = std::stoull(probe.message);
  // One layer of f32 [8192, 8192] q/k/v/o and [32768, 8192] gate/up/down is 4 GiB;
  // every tensor is at most 1 GiB, under any device's maxBufferSize.
  const int64_t H = 8192, I = 32768, V = 256;
  const uint64_t per_layer = 4 * uint64_t(H) * H * 4 + 3 * uint64_t(I) * H * 4;
  const int64_t layers = int64_t(available / per_layer) + 2;
  const fs::path dir = temp_dir("hostile-sparse");
  fs::remove_all(dir);
  fs::create_directories(dir);
  json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", H}, {"intermediate_size", I},
              {"num_hidden_layers", layers}, {"num_attention_heads", 64}, {"num_key_value_heads", 64},
              {"head_dim", 128}, {"vocab_size", V}, {"max_position_embeddings", 4096},
              {"tie_word_embeddings", true}};
  std::ofstream(dir / "config.json") << cfg.dump();
  // The header by hand and the data as a hole: the file takes no disk space.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t off = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    uint64_t bytes = 4;
    for (int64_t s : shape) bytes *= uint64_t(s);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {off, off + bytes}}};
    off += bytes;
  };
  add("model.embed_tokens.weight", {V, H});
  add("model.norm.weight", {H});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H});
    add(p + "post_attention_layernorm.weight", {H});
    for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"}) add(p + "self_attn." + m + ".weight", {H, H});
    add(p + "mlp.gate_proj.weight", {I, H});
    add(p + "mlp.up_proj.weight", {I, H});
    add(p + "mlp.down_proj.weight", {H, I});
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const fs::path file = dir / "model.safetensors";
  {
    std::ofstream out(file, std::ios::binary);
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) out.put(char(n >> (8 * i)));
    out << text;
  }
  const uint64_t file_size = 8 + text.size() + off;
  REQUIRE(::truncate(file.c_str(), off_t(file_size)) == 0);
  const Outcome o = run_isolated(
      [&](Device& d, Allocator& a) {
        LoadOptions lo;
        lo.require_tokenizer = false;
        Model::load(d, a, dir, lo);
      },
      file_size + 3 * kGiB);   // the mapping takes address space, not memory
  fs::remove_all(dir);
  check_rejected(o, ErrorCode::out_of_memory, {"the weights of", "but the device has only"});
  MESSAGE("sparse model of " << file_size / kGiB << " GiB vs " << available / kGiB << " GiB available: peak RSS growth "
                             << o.growth_kib() / 1024 << " MiB");
}

namespace {

// Runs the reach CLI under `sh -c` and returns its output (stdout and stderr).
std::string run_reach(const std::string& args, const std::string& prefix = "") {
  const fs::path reach_bin = build_root() / "cli" / "reach";
  REQUIRE(fs::exists(reach_bin));
  const std::string cmd = prefix + reach_bin.string() + " " + args + " 2>&1";
  std::string out;
  if (FILE* p = popen(("sh -c '" + cmd + "'").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

}  // namespace

TEST_CASE("hostile sizes: reach eval bounds its samples and prompts before building them") {
  // Both are sized before Vulkan starts; the cap turns an unchecked size into a
  // quick failure instead of gigabytes (a 4 GiB --repeat sample, 10^5 prompts of 16M tokens).
  const fs::path dir = copy_model("cli-eval");
  const fs::path tokens = temp_dir("hostile-cli") / "ids.txt";
  std::ofstream(tokens) << "1 2 3\n";
  const std::string cap = "ulimit -v 1048576; timeout 120 ";
  std::string out = run_reach("eval -m " + dir.string() + " --tokens " + tokens.string() +
                                  " --repeat --repeat-len 1 --ctx 1048576k --score-last 1",
                              cap);
  INFO(out);
  CHECK(out.find("context 1073741824 is more than reach eval handles") != std::string::npos);
  out = run_reach("eval -m " + dir.string() + " --passkey --trials 100000 --ctx 16384k", cap);
  INFO(out);
  CHECK(out.find("lower --trials, --depths or --ctx") != std::string::npos);
}

TEST_CASE("hostile sizes: the CLI reports a host allocation failure in words, not std::bad_alloc") {
  // --repeat builds a sample of the largest context (16M tokens, 64 MiB here)
  // before Vulkan starts; under a small address-space cap that allocation fails.
  const fs::path dir = copy_model("cli");
  const fs::path tokens = temp_dir("hostile-cli") / "ids.txt";
  std::ofstream(tokens) << "1 2 3\n";
  bool worded = false;
  for (int mib = 32; mib <= 128 && !worded; mib += 16) {
    const std::string out = run_reach("eval -m " + dir.string() + " --tokens " + tokens.string() +
                                          " --repeat --repeat-len 1 --ctx 16384k --score-last 1",
                                      "ulimit -v " + std::to_string(mib * 1024) + "; ");
    INFO("ulimit -v " << mib << " MiB: " << out);
    CHECK(out.find("bad_alloc") == std::string::npos);
    worded = out.find("out of host memory") != std::string::npos;
  }
  CHECK(worded);
}
