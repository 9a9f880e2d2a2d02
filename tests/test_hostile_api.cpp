// Hostile use of the C API and of the flags: rejected calls change nothing,
// non-finite and out-of-range parameters are refused naming the field or
// flag, Vulkan validation messages reach the log (or stderr), and a call
// racing the *_free of its handle is either completed first or rejected.
#include <doctest/doctest.h>
#include <reach.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "runtime/session/sampler.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/capi_check.hpp"
#include "tests/support/model_fixture.hpp"

namespace {

namespace fs = std::filesystem;

// A failing call: the expected code and a message that contains `needle`.
#define CHECK_FAILS_WITH(call, want, needle)                                                  \
  do {                                                                                        \
    reach_status st_ = (call);                                                                \
    const std::string msg_ = reach_last_error();                                              \
    INFO(#call << " -> " << reach_status_name(st_) << ": " << msg_);                          \
    CHECK(st_ == (want));                                                                     \
    CHECK(msg_.find(needle) != std::string::npos);                                            \
  } while (0)

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The suite's environment (REACH_VALIDATION=1, REACH_TUNING_FILE: tests/meson.build) applies to its devices:
// the C API reads it only when asked (use_environment).
const reach_device_params* env_params() {
  static const reach_device_params p = [] {
    reach_device_params d = reach_device_default_params();
    d.use_environment = 1;
    return d;
  }();
  return &p;
}

std::string tiny() { return reach::test::tiny_model("").string(); }

// Owned device + tiny model, freed in order.
struct Loaded {
  reach_device* dev = nullptr;
  reach_model* model = nullptr;
  int32_t vocab = 0;
  Loaded() {
    REQUIRE_OK(reach_device_create(env_params(), &dev));
    REQUIRE_OK(reach_model_load(dev, tiny().c_str(), nullptr, &model));
    reach_model_info info{};
    info.size = sizeof info;
    REQUIRE_OK(reach_model_get_info(model, &info));
    vocab = info.vocab_size;
  }
  ~Loaded() {
    CHECK(reach_model_free(model) == REACH_OK);
    CHECK(reach_device_free(dev) == REACH_OK);
  }
  reach_session* session(uint32_t context, uint32_t chunk = 0) {
    reach_session_params sp = reach_session_default_params();
    sp.context = context;
    if (chunk) sp.chunk = chunk;
    sp.sampling.temperature = 0;
    reach_session* s = nullptr;
    REQUIRE_OK(reach_session_create(model, &sp, &s));
    return s;
  }
};

std::vector<float> logits_of(reach_session* s) {
  const float* p = nullptr;
  size_t n = 0;
  REQUIRE_OK(reach_session_logits(s, &p, &n));
  return std::vector<float>(p, p + n);
}

uint32_t position_of(reach_session* s) {
  uint32_t pos = 0;
  REQUIRE_OK(reach_session_position(s, &pos, nullptr));
  return pos;
}

// The logits and the position are exactly those before the rejected call.
void check_unchanged(reach_session* s, const std::vector<float>& logits, uint32_t pos) {
  const std::vector<float> now = logits_of(s);
  REQUIRE(now.size() == logits.size());
  CHECK(std::memcmp(now.data(), logits.data(), now.size() * sizeof(float)) == 0);
  CHECK(position_of(s) == pos);
}

// Runs a shell command; returns its exit status and its stdout (+ stderr unless stdout_only).
std::pair<int, std::string> shell(const std::string& cmd, bool stdout_only = false) {
  std::string out;
  FILE* p = popen((stdout_only ? cmd : cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

std::string reach_cli() { return (reach::test::build_root() / "cli" / "reach").string(); }

// Log messages captured from the C API's log callback.
struct LogCapture {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> messages;
  static void callback(void* user, int level, const char* message) {
    auto* self = static_cast<LogCapture*>(user);
    std::lock_guard<std::mutex> l(self->mu);
    self->messages.emplace_back(level, message);
  }
  bool has(int level, const std::string& needle) {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [lv, m] : messages)
      if (lv == level && m.find(needle) != std::string::npos) return true;
    return false;
  }
};

// A buffer with usage 0 breaks VUID-VkBufferCreateInfo-usage-requiredbitmask;
// drivers still create it, so this provokes a validation error safely.
void provoke_validation_error(const reach::VkDeviceTable& vk, VkDevice device) {
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = 256;
  bi.usage = 0;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer b = VK_NULL_HANDLE;
  if (vk.vkCreateBuffer(device, &bi, nullptr, &b) == VK_SUCCESS && b) vk.vkDestroyBuffer(device, b, nullptr);
}

// Adopt parameters for a host's raw Vulkan objects.
reach_adopt_params adopt_params(const reach::test::HostVulkan& host, bool debug_utils) {
  reach_adopt_params ap = reach_adopt_default_params();
  ap.use_environment = 1;
  ap.get_instance_proc_addr = reinterpret_cast<void*>(host.get_instance_proc_addr);
  ap.instance = host.instance;
  ap.physical_device = host.phys;
  ap.device = host.device;
  ap.queue_family = host.family;
  ap.queue = host.queue;
  ap.debug_utils_enabled = debug_utils;
  return ap;
}

// Everything written to stderr (fd 2) while f runs.
template <class F>
std::string capture_stderr(F&& f) {
  std::fflush(stderr);
  char path[] = "/tmp/reach-stderr-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const int saved = dup(2);
  dup2(fd, 2);
  f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  return text;
}

}  // namespace

TEST_SUITE("hostile_api") {

TEST_CASE("a rejected prefill / decode / step changes nothing: logits bit-identical, position unchanged") {
  Loaded L;
  reach_session* s = L.session(8, 2);   // chunk 2: a long prompt runs in several chunks
  const std::vector<int32_t> ids = {1, 5, 9};
  REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
  std::vector<float> before = logits_of(s);
  uint32_t pos = position_of(s);
  REQUIRE(pos == 3);

  SUBCASE("decode: ids outside the vocabulary") {
    for (int32_t bad : {-1, L.vocab, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()}) {
      CHECK_FAILS_WITH(reach_session_decode(s, bad), REACH_ERROR_INVALID_ARGUMENT, "vocabulary");
      check_unchanged(s, before, pos);
      int32_t next = 0;
      CHECK_FAILS_WITH(reach_session_step(s, bad, &next, nullptr), REACH_ERROR_INVALID_ARGUMENT, "vocabulary");
      check_unchanged(s, before, pos);
    }
    int32_t tok = -1;
    REQUIRE_OK(reach_session_sample(s, &tok, nullptr));   // the previous logits can still be sampled
    CHECK(tok >= 0);
  }
  SUBCASE("prefill: a bad id in a later chunk appends nothing") {
    const std::vector<int32_t> more = {2, 3, 4, L.vocab};   // chunks {2,3} {4,bad}
    CHECK_FAILS_WITH(reach_session_prefill(s, more.data(), more.size()), REACH_ERROR_INVALID_ARGUMENT, "vocabulary");
    check_unchanged(s, before, pos);
    const std::vector<int32_t> negative = {-7};
    CHECK_FAILS_WITH(reach_session_prefill(s, negative.data(), 1), REACH_ERROR_INVALID_ARGUMENT, "-7");
    check_unchanged(s, before, pos);
    CHECK_FAILS_WITH(reach_session_prefill(s, ids.data(), 0), REACH_ERROR_INVALID_ARGUMENT, "empty");
    check_unchanged(s, before, pos);
    CHECK_FAILS_WITH(reach_session_prefill(s, nullptr, 2), REACH_ERROR_INVALID_ARGUMENT, "NULL");
    check_unchanged(s, before, pos);
  }
  SUBCASE("context overflow: prefill, decode, step_async, begin_decode") {
    const std::vector<int32_t> six(6, 5);
    CHECK_FAILS_WITH(reach_session_prefill(s, six.data(), six.size()), REACH_ERROR_CONTEXT_OVERFLOW, "context");
    check_unchanged(s, before, pos);
    const std::vector<int32_t> five(5, 5);
    REQUIRE_OK(reach_session_prefill(s, five.data(), five.size()));   // full: 8 of 8
    before = logits_of(s);
    pos = position_of(s);
    REQUIRE(pos == 8);
    CHECK_FAILS_WITH(reach_session_decode(s, 5), REACH_ERROR_CONTEXT_OVERFLOW, "full");
    check_unchanged(s, before, pos);
    CHECK_FAILS_WITH(reach_session_step_async(s, 5), REACH_ERROR_CONTEXT_OVERFLOW, "full");
    check_unchanged(s, before, pos);
    CHECK_FAILS_WITH(reach_session_begin_decode(s, 5), REACH_ERROR_INVALID_STATE, "record");   // nothing recorded
    check_unchanged(s, before, pos);
    CHECK_FAILS_WITH(reach_session_prefill(s, ids.data(), 1), REACH_ERROR_CONTEXT_OVERFLOW, "context");
    check_unchanged(s, before, pos);
  }
  SUBCASE("step_async with a bad id submits nothing") {
    CHECK_FAILS_WITH(reach_session_step_async(s, L.vocab + 3), REACH_ERROR_INVALID_ARGUMENT, "vocabulary");
    int done = 0;
    REQUIRE_OK(reach_session_poll(s, &done));
    CHECK(done == 1);
    check_unchanged(s, before, pos);
  }
  SUBCASE("a rejected rewind keeps the logits too") {
    CHECK_FAILS_WITH(reach_session_rewind(s, pos + 1), REACH_ERROR_INVALID_ARGUMENT, "rewind");
    check_unchanged(s, before, pos);
  }
  SUBCASE("a valid decode after rejected ones gives what it gives without them") {
    CHECK(reach_session_decode(s, -1) == REACH_ERROR_INVALID_ARGUMENT);
    REQUIRE_OK(reach_session_decode(s, 7));
    const std::vector<float> after_rejects = logits_of(s);
    reach_session* t = L.session(8, 2);
    REQUIRE_OK(reach_session_prefill(t, ids.data(), ids.size()));
    REQUIRE_OK(reach_session_decode(t, 7));
    const std::vector<float> clean = logits_of(t);
    CHECK(std::memcmp(after_rejects.data(), clean.data(), clean.size() * sizeof(float)) == 0);
    REQUIRE_OK(reach_session_free(t));
  }
  REQUIRE_OK(reach_session_free(s));
}

TEST_CASE("sampling parameters: NaN, infinities and out-of-range values are INVALID_ARGUMENT naming the field") {
  // The library: validate_sampler_params / Sampler.
  auto rejects = [](reach::SamplerParams p, const char* field) {
    try {
      reach::Sampler sampler(p);
      FAIL("accepted " << field);
    } catch (const reach::Error& e) {
      CHECK(e.code() == reach::ErrorCode::invalid_argument);
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  };
  for (float t : {kNan, kInf, -kInf, -0.5f}) {
    reach::SamplerParams p;
    p.temperature = t;
    rejects(p, "temperature");
  }
  for (float t : {kNan, kInf, -kInf, 0.0f, -0.1f, 1.5f}) {
    reach::SamplerParams p;
    p.top_p = t;
    rejects(p, "top_p");
  }
  {
    reach::SamplerParams p;
    p.top_k = -1;
    rejects(p, "top_k");
  }
  reach::SamplerParams edge;
  edge.temperature = 0;
  edge.top_k = 0;
  edge.top_p = 1;
  CHECK_NOTHROW(reach::validate_sampler_params(edge));

  // The C API: reach_session_set_sampling and reach_session_create.
  Loaded L;
  reach_session* s = L.session(16);
  const std::vector<int32_t> ids = {1, 5, 9};
  REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
  int32_t greedy = -1;
  REQUIRE_OK(reach_session_sample(s, &greedy, nullptr));
  struct Case {
    float temperature, top_p;
    int32_t top_k;
    const char* field;
  };
  const Case cases[] = {{kNan, 0.9f, 40, "temperature"}, {kInf, 0.9f, 40, "temperature"},
                        {-1.0f, 0.9f, 40, "temperature"}, {0.8f, kNan, 40, "top_p"},
                        {0.8f, kInf, 40, "top_p"},       {0.8f, 0.0f, 40, "top_p"},
                        {0.8f, 2.0f, 40, "top_p"},       {0.8f, 0.9f, -1, "top_k"}};
  for (const Case& c : cases) {
    reach_sampling_params p = reach_sampling_default_params();
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.top_k = c.top_k;
    CHECK_FAILS_WITH(reach_session_set_sampling(s, &p), REACH_ERROR_INVALID_ARGUMENT, c.field);
    int32_t tok = -1;
    REQUIRE_OK(reach_session_sample(s, &tok, nullptr));   // the greedy sampler stayed
    CHECK(tok == greedy);
    reach_session_params sp = reach_session_default_params();
    sp.sampling = p;
    reach_session* bad = reinterpret_cast<reach_session*>(&sp);
    CHECK_FAILS_WITH(reach_session_create(L.model, &sp, &bad), REACH_ERROR_INVALID_ARGUMENT, c.field);
    CHECK(bad == nullptr);
  }
  reach_sampling_params ok = reach_sampling_default_params();
  ok.temperature = 0;
  ok.top_k = 0;
  ok.top_p = 1;
  REQUIRE_OK(reach_session_set_sampling(s, &ok));
  REQUIRE_OK(reach_session_free(s));
}

TEST_CASE("session, device and scheme parameters: non-finite, negative and ignored values are refused") {
  Loaded L;
  struct Case {
    const char* what;
    void (*set)(reach_session_params&);
    const char* needle;
  };
  const Case cases[] = {
      {"rope_factor NaN", [](reach_session_params& p) { p.rope_scaling = "linear"; p.rope_factor = NAN; },
       "--rope-factor"},
      {"rope_factor inf", [](reach_session_params& p) { p.rope_scaling = "linear"; p.rope_factor = INFINITY; },
       "--rope-factor"},
      {"rope_factor < 0", [](reach_session_params& p) { p.rope_scaling = "linear"; p.rope_factor = -2; },
       "--rope-factor"},
      {"leaky_k inf", [](reach_session_params& p) { p.rerope_window = 8; p.leaky_k = INFINITY; }, "--leaky-k"},
      {"cos_n NaN", [](reach_session_params& p) { p.qk_norm = "cos"; p.cos_n = NAN; }, "--cos-n"},
      {"original_ctx -5", [](reach_session_params& p) { p.original_ctx = -5; }, "--original-ctx"},
      {"rerope_window -2", [](reach_session_params& p) { p.rerope_window = -2; }, "--rerope-window"},
      {"attn_window -3", [](reach_session_params& p) { p.attn_window = -3; }, "--attn-window"},
      {"logn -9", [](reach_session_params& p) { p.logn = -9; }, "--logn"},
      {"l_test -1", [](reach_session_params& p) { p.l_test = -1; }, "l_test"},
      {"attn_sinks without a window", [](reach_session_params& p) { p.attn_sinks = 4; }, "--attn-sinks"},
      {"--attn-sinks without a window", [](reach_session_params& p) { p.scheme_flags = "--attn-sinks 4"; },
       "window"},
      {"--rope-factor nan", [](reach_session_params& p) { p.scheme_flags = "--rope-scaling linear --rope-factor nan"; },
       "--rope-factor"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    reach_session_params p = reach_session_default_params();
    p.context = 16;
    c.set(p);
    reach_session* s = nullptr;
    CHECK_FAILS_WITH(reach_session_create(L.model, &p, &s), REACH_ERROR_INVALID_ARGUMENT, c.needle);
    CHECK(s == nullptr);
  }
  // Sinks with a window are fine, from the fields and from the flags.
  for (int flags = 0; flags < 2; ++flags) {
    reach_session_params p = reach_session_default_params();
    p.context = 16;
    if (flags) p.scheme_flags = "--attn-window 4 --attn-sinks 2";
    else p.attn_window = 4, p.attn_sinks = 2;
    reach_session* s = nullptr;
    REQUIRE_OK(reach_session_create(L.model, &p, &s));
    REQUIRE_OK(reach_session_free(s));
  }
  reach_device_params dp = reach_device_default_params();
  dp.index = -2;
  reach_device* d = nullptr;
  CHECK_FAILS_WITH(reach_device_create(&dp, &d), REACH_ERROR_INVALID_ARGUMENT, "index");
  CHECK(d == nullptr);
}

TEST_CASE("config.json: reach_attention.sinks without a window is a format error naming the key") {
  const fs::path dir = reach::test::temp_dir("sinks-without-window");
  fs::copy(tiny(), dir, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  nlohmann::json cfg;
  std::ifstream(dir / "config.json") >> cfg;
  cfg["reach_attention"] = {{"sinks", 4}};
  std::ofstream(dir / "config.json") << cfg.dump();
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  reach_model* m = nullptr;
  CHECK_FAILS_WITH(reach_model_load(dev, dir.string().c_str(), nullptr, &m), REACH_ERROR_FORMAT, "'sinks'");
  CHECK(std::string(reach_last_error()).find("window") != std::string::npos);
  CHECK(m == nullptr);
  // A layer's window is a window: HWFA-style sinks stay valid.
  cfg["reach_attention"] = {{"sinks", 4}, {"layers", {{"0", {{"window", 8}}}}}};
  std::ofstream(dir / "config.json") << cfg.dump();
  REQUIRE_OK(reach_model_load(dev, dir.string().c_str(), nullptr, &m));
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
}

TEST_CASE("CLI flags: --temp / --top-p NaN, inf and out of range, --attn-sinks without a window, ignored eval flags") {
  const std::string model = tiny();
  struct Case {
    std::string flags, needle;
  };
  const Case cases[] = {
      {"--temp nan", "--temp"},        {"--temp inf", "--temp"},      {"--temp -1", "--temp"},
      {"--temp 1e39", "--temp"},       {"--top-p nan", "--top-p"},    {"--top-p 0", "--top-p"},
      {"--top-p 1.5", "--top-p"},      {"--top-p -inf", "--top-p"},   {"--top-k -1", "--top-k"},
      {"--attn-sinks 4", "--attn-sinks"}, {"--attn-window 0 --attn-sinks 2", "window"},
      {"--rope-scaling linear --rope-factor nan", "--rope-factor"},
  };
  for (const Case& c : cases) {
    const auto [rc, out] = shell(reach_cli() + " run -m " + model + " -p hello -n 1 " + c.flags);
    INFO(c.flags << " -> exit " << rc << ":\n" << out);
    CHECK(rc == 1);
    CHECK(out.find(c.needle) != std::string::npos);
  }
  const auto [rc, out] = shell(reach_cli() + " run -m " + model + " -p hello -n 1 --temp 0 --top-p 1 --top-k 0");
  INFO(out);
  CHECK(rc == 0);
  // reach eval: the passkey-only flags would be ignored by the other modes.
  for (const char* flag : {"--depths 0.5", "--trials 3", "--seed 7"}) {
    for (const char* mode : {"", "--mode ppl", "--repeat"}) {
      const auto [erc, eout] = shell(reach_cli() + " eval -m " + model + " -f /dev/null " + mode + " " + flag);
      INFO(flag << " " << mode << " -> exit " << erc << ":\n" << eout);
      CHECK(erc == 1);
      CHECK(eout.find(std::string(flag).substr(0, std::string(flag).find(' '))) != std::string::npos);
      CHECK(eout.find("--passkey") != std::string::npos);
    }
  }
}

TEST_CASE("validation messages: an adopted device routes them to the log callback") {
  if (!reach::validation_layer_installed()) {
    MESSAGE("VK_LAYER_KHRONOS_validation is not installed on this machine: nothing to check");
    return;
  }
  reach::test::HostVulkan host(/*debug_utils=*/true);
  LogCapture log;
  reach_set_log_callback(&LogCapture::callback, &log);
  const reach_adopt_params ap = adopt_params(host, true);
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_adopt(&ap, &dev));
  provoke_validation_error(host.vk, host.device);
  CHECK(log.has(REACH_LOG_ERROR, "VUID-VkBufferCreateInfo-usage"));
  CHECK(log.has(REACH_LOG_ERROR, "vulkan: "));
  REQUIRE_OK(reach_device_free(dev));   // and the messenger goes with it
  reach_set_log_callback(nullptr, nullptr);
}

TEST_CASE("validation messages: a device with no callback writes each one to stderr, one line with its severity") {
  if (!reach::validation_layer_installed()) {
    MESSAGE("VK_LAYER_KHRONOS_validation is not installed on this machine: nothing to check");
    return;
  }
  reach::DeviceOptions opt;
  opt.validation = true;   // no on_validation
  auto dev = reach::Device::create(opt);
  CHECK(dev->validation_enabled());
  const std::string err = capture_stderr([&] { provoke_validation_error(dev->vk(), dev->handle()); });
  INFO(err);
  CHECK(err.find("reach: vulkan validation error: ") != std::string::npos);
  CHECK(err.find("VUID-VkBufferCreateInfo-usage") != std::string::npos);
  CHECK(dev->validation_errors() >= 1);
  // One line per message (the message's own newlines are folded), each with the prefix.
  size_t start = 0, lines = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(start, end - start);
    INFO(line);
    CHECK((line.rfind("reach: vulkan validation error: ", 0) == 0 ||
           line.rfind("reach: vulkan validation warning: ", 0) == 0));
    start = end + 1;
    ++lines;
  }
  CHECK(lines >= dev->validation_errors());
}

TEST_CASE("reach info says whether the validation layer is on (text and --json)") {
  if (!reach::validation_layer_installed()) {
    MESSAGE("VK_LAYER_KHRONOS_validation is not installed on this machine: nothing to check");
    return;
  }
  const std::string cli = reach_cli();
  auto [rc_on, on] = shell("REACH_VALIDATION=1 " + cli + " info");
  INFO(on);
  CHECK(rc_on == 0);
  CHECK(on.find("validation: on") != std::string::npos);
  auto [rc_off, off] = shell("REACH_VALIDATION=0 " + cli + " info");
  INFO(off);
  CHECK(rc_off == 0);
  CHECK(off.find("validation: off") != std::string::npos);
  auto [rc_json_on, json_on] = shell("REACH_VALIDATION=1 " + cli + " info --json", true);
  CHECK(rc_json_on == 0);
  const auto j_on = nlohmann::json::parse(json_on);
  REQUIRE(j_on.is_array());
  REQUIRE(!j_on.empty());
  for (const auto& d : j_on) CHECK(d.at("validation") == true);
  auto [rc_json_off, json_off] = shell("env -u REACH_VALIDATION " + cli + " info --json", true);
  CHECK(rc_json_off == 0);
  for (const auto& d : nlohmann::json::parse(json_off)) CHECK(d.at("validation") == false);
}

TEST_CASE("freeing a handle while calls on it run in other threads: they complete first, new ones are refused") {
  Loaded L;
  reach_session* s = L.session(16);
  const std::vector<int32_t> ids = {1, 5, 9};
  REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));

  // A model load whose progress callback blocks holds the device lock, so
  // calls on s queue behind it: one already running (pinned) and one frees s.
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, release = false;
    reach_status free_inside = REACH_OK;
    reach_session* session = nullptr;
  } gate;
  gate.session = s;
  reach_model_params mp = reach_model_default_params();
  mp.progress_user = &gate;
  mp.progress = [](void* user, uint64_t, uint64_t) -> int {
    auto* g = static_cast<Gate*>(user);
    std::unique_lock<std::mutex> l(g->mu);
    if (!g->entered) {
      // Freeing from inside a callback is refused (this call holds the device lock).
      g->free_inside = reach_session_free(g->session);
      g->entered = true;
      g->cv.notify_all();
      g->cv.wait_for(l, std::chrono::seconds(60), [&] { return g->release; });
    }
    return 1;
  };
  reach_model* m2 = nullptr;
  std::thread loader([&] { CHECK(reach_model_load(L.dev, tiny().c_str(), &mp, &m2) == REACH_OK); });
  {
    std::unique_lock<std::mutex> l(gate.mu);
    REQUIRE(gate.cv.wait_for(l, std::chrono::seconds(60), [&] { return gate.entered; }));
  }
  CHECK(gate.free_inside == REACH_ERROR_INVALID_STATE);

  std::atomic<int> order{0};
  std::atomic<int> reader_done{0}, freer_done{0};
  uint32_t reader_pos = 0;
  reach_status reader_status = REACH_ERROR_INTERNAL, freer_status = REACH_ERROR_INTERNAL;
  std::thread reader([&] {   // pinned s, then waits for the device lock
    reader_status = reach_session_position(s, &reader_pos, nullptr);
    reader_done = ++order;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::thread freer([&] {   // claims s, waits for the reader
    freer_status = reach_session_free(s);
    freer_done = ++order;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // While the free waits, a new call on s is refused at once (it must not
  // queue up behind the lock and then use freed memory).
  uint32_t pos = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const reach_status late = reach_session_position(s, &pos, nullptr);
  const std::string late_msg = reach_last_error();
  const bool quick = std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5);
  {
    std::lock_guard<std::mutex> l(gate.mu);
    gate.release = true;
  }
  gate.cv.notify_all();
  loader.join();
  reader.join();
  freer.join();
  INFO("late call: " << reach_status_name(late) << ": " << late_msg);
  CHECK(quick);
  CHECK(late == REACH_ERROR_INVALID_ARGUMENT);
  CHECK(late_msg.find("being freed") != std::string::npos);
  CHECK(reader_status == REACH_OK);
  CHECK(reader_pos == 3);
  CHECK(freer_status == REACH_OK);
  CHECK(reader_done < freer_done);   // the free waited for the call in flight
  CHECK(reach_session_position(s, &pos, nullptr) == REACH_ERROR_INVALID_ARGUMENT);   // freed now
  if (m2) REQUIRE_OK(reach_model_free(m2));
}

TEST_CASE("threads hammering calls while another frees the handles never crash") {
  Loaded L;
  for (int round = 0; round < 20; ++round) {
    reach_session* s = L.session(8);
    reach_stream* st = nullptr;
    REQUIRE_OK(reach_stream_create(L.model, 1, &st));
    std::atomic<bool> stop{false};
    std::vector<std::thread> callers;
    for (int t = 0; t < 3; ++t)
      callers.emplace_back([&] {
        uint32_t pos = 0;
        const char* text = nullptr;
        size_t len = 0;
        while (!stop) {
          const reach_status a = reach_session_position(s, &pos, nullptr);
          const reach_status b = reach_stream_push(st, 5, &text, &len);
          if (a != REACH_OK && b != REACH_OK) break;   // both freed
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(reach_session_free(s) == REACH_OK);
    CHECK(reach_stream_free(st) == REACH_OK);
    stop = true;
    for (auto& c : callers) c.join();
  }
}

}  // TEST_SUITE
