// The C API (include/reach.h) from C++: an adopted host device generates the
// same tokens as a device reach owns (sync, step_async and record_decode into
// a host command buffer), misuse returns codes with messages, replies split
// harmony's channels, and chat prompts follow the model's template.
#include <doctest/doctest.h>
#include <reach.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

namespace {

std::atomic<int> g_vulkan_errors{0};

void on_log(void*, int level, const char* message) {
  if (level == REACH_LOG_ERROR && std::strncmp(message, "vulkan:", 7) == 0) {
    g_vulkan_errors++;
    MESSAGE("validation: " << message);
  }
}

#define REQUIRE_OK(call)                                                                      \
  do {                                                                                        \
    reach_status st_ = (call);                                                                \
    INFO(#call << " -> " << reach_status_name(st_) << ": " << reach_last_error());           \
    REQUIRE(st_ == REACH_OK);                                                                 \
  } while (0)

// A failing call: the expected code and a message that is not empty.
#define CHECK_FAILS(call, want)                                                               \
  do {                                                                                        \
    reach_status st_ = (call);                                                                \
    INFO(#call << " -> " << reach_status_name(st_) << ": " << reach_last_error());           \
    CHECK(st_ == (want));                                                                     \
    CHECK(std::strlen(reach_last_error()) > 0);                                               \
  } while (0)

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

using reach::test::HostVulkan;

struct Counts {
  std::atomic<int> locks{0}, unlocks{0};
};
void count_lock(void* user, int lock) {
  auto* c = static_cast<Counts*>(user);
  (lock ? c->locks : c->unlocks)++;
}

std::vector<int32_t> prompt_ids(reach_model* m) {
  const char* text = "Once upon a time, there was a little girl";
  size_t n = 0;
  REQUIRE_OK(reach_tokenize(m, text, std::strlen(text), 1, nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  REQUIRE_OK(reach_tokenize(m, text, std::strlen(text), 1, ids.data(), ids.size(), &n));
  return ids;
}

reach_session* greedy_session(reach_model* m) {
  reach_session_params sp = reach_session_default_params();
  sp.context = 64;
  sp.sampling.temperature = 0;
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create(m, &sp, &s));
  return s;
}

// Prefill, then n greedy tokens with reach_session_step.
std::vector<int32_t> generate_sync(reach_session* s, const std::vector<int32_t>& ids, int n) {
  REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
  std::vector<int32_t> out(1);
  REQUIRE_OK(reach_session_sample(s, &out[0], nullptr));
  while (int(out.size()) < n) {
    int32_t next = 0;
    REQUIRE_OK(reach_session_step(s, out.back(), &next, nullptr));
    out.push_back(next);
  }
  return out;
}

}  // namespace

TEST_CASE("capi: adopted device generates the same tokens as an owned one (sync, async, host command buffer)") {
  reach_set_log_callback(on_log, nullptr);
  g_vulkan_errors = 0;
  const std::string dir = tiny();
  const int n = 16;

  // Once per process (doctest re-runs the case body for each SUBCASE).
  static std::vector<int32_t> owned_tokens;
  if (owned_tokens.empty()) {
    reach_device* dev = nullptr;
    REQUIRE_OK(reach_device_create(env_params(), &dev));
    reach_model* m = nullptr;
    REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));
    reach_session* s = greedy_session(m);
    owned_tokens = generate_sync(s, prompt_ids(m), n);
    REQUIRE_OK(reach_session_free(s));
    REQUIRE_OK(reach_model_free(m));
    REQUIRE_OK(reach_device_free(dev));
  }
  REQUIRE(owned_tokens.size() == size_t(n));

  HostVulkan host;
  Counts counts;
  {
    reach_adopt_params ap = reach_adopt_default_params();
    ap.use_environment = 1;
    ap.get_instance_proc_addr = reinterpret_cast<void*>(host.get_instance_proc_addr);
    ap.instance = host.instance;
    ap.physical_device = host.phys;
    ap.device = host.device;
    ap.queue_family = host.family;
    ap.queue = host.queue;
    ap.queue_lock = count_lock;
    ap.queue_lock_user = &counts;
    reach_device* dev = nullptr;
    REQUIRE_OK(reach_device_adopt(&ap, &dev));
    reach_model* m = nullptr;
    REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));
    const std::vector<int32_t> ids = prompt_ids(m);

    SUBCASE("synchronous steps") {
      reach_session* s = greedy_session(m);
      CHECK(generate_sync(s, ids, n) == owned_tokens);
      REQUIRE_OK(reach_session_free(s));
    }
    SUBCASE("step_async + poll, one step per frame") {
      reach_session* s = greedy_session(m);
      REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
      std::vector<int32_t> out(1);
      REQUIRE_OK(reach_session_sample(s, &out[0], nullptr));
      while (int(out.size()) < n) {
        REQUIRE_OK(reach_session_step_async(s, out.back()));
        int done = 0;
        reach_status st = REACH_OK;
        for (int frame = 0; st == REACH_OK && !done && frame < 100000; ++frame) st = reach_session_poll(s, &done);
        REQUIRE_OK(st);
        if (!done) REQUIRE_OK(reach_session_wait(s, UINT64_MAX, &done));
        REQUIRE(done == 1);
        int32_t next = 0;
        REQUIRE_OK(reach_session_sample(s, &next, nullptr));
        out.push_back(next);
      }
      CHECK(out == owned_tokens);
      // Freeing with a step in flight waits for it.
      REQUIRE_OK(reach_session_step_async(s, out.back()));
      REQUIRE_OK(reach_session_free(s));
    }
    SUBCASE("record_decode into the host's command buffer") {
      reach_session* s = greedy_session(m);
      REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
      std::vector<int32_t> out(1);
      REQUIRE_OK(reach_session_sample(s, &out[0], nullptr));
      VkCommandBuffer cmd;
      VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      ai.commandPool = host.pool;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      REQUIRE(host.vk.vkAllocateCommandBuffers(host.device, &ai, &cmd) == VK_SUCCESS);
      VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
      VkFence fence;
      REQUIRE(host.vk.vkCreateFence(host.device, &fi, nullptr, &fence) == VK_SUCCESS);
      CHECK_FAILS(reach_session_end_decode(s), REACH_ERROR_INVALID_STATE);
      while (int(out.size()) < n) {
        // A fresh recording every "frame", as a game re-records its frame.
        REQUIRE(host.vk.vkResetCommandBuffer(cmd, 0) == VK_SUCCESS);
        VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        REQUIRE(host.vk.vkBeginCommandBuffer(cmd, &bi) == VK_SUCCESS);
        REQUIRE_OK(reach_session_record_decode(s, cmd));
        REQUIRE(host.vk.vkEndCommandBuffer(cmd) == VK_SUCCESS);
        REQUIRE_OK(reach_session_begin_decode(s, out.back()));
        CHECK_FAILS(reach_session_decode(s, out.back()), REACH_ERROR_INVALID_STATE);   // pending
        VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
        si.commandBufferCount = 1;
        si.pCommandBuffers = &cmd;
        REQUIRE(host.vk.vkQueueSubmit(host.queue, 1, &si, fence) == VK_SUCCESS);
        REQUIRE(host.vk.vkWaitForFences(host.device, 1, &fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS);
        REQUIRE(host.vk.vkResetFences(host.device, 1, &fence) == VK_SUCCESS);
        REQUIRE_OK(reach_session_end_decode(s));
        int32_t next = 0;
        REQUIRE_OK(reach_session_sample(s, &next, nullptr));
        out.push_back(next);
      }
      CHECK(out == owned_tokens);
      REQUIRE_OK(reach_session_release_recording(s, cmd));
      REQUIRE_OK(reach_session_free(s));
      host.vk.vkDestroyFence(host.device, fence, nullptr);
      host.vk.vkFreeCommandBuffers(host.device, host.pool, 1, &cmd);
    }
    REQUIRE_OK(reach_model_free(m));
    REQUIRE_OK(reach_device_free(dev));
  }
  CHECK(counts.locks > 0);
  CHECK(counts.locks == counts.unlocks);
  CHECK(host.vk.vkDeviceWaitIdle(host.device) == VK_SUCCESS);   // the host's device survived reach
  CHECK(g_vulkan_errors == 0);
  reach_set_log_callback(nullptr, nullptr);
}

namespace {

// A host's own vkGetInstanceProcAddr that counts what reach asks of it and forwards to the real
// one: vkGetDeviceProcAddr comes back wrapped too, and one instance function
// (vkGetPhysicalDeviceMemoryProperties) and one device function (vkQueueSubmit) count their calls.
struct LoaderSpy {
  static inline PFN_vkGetInstanceProcAddr real_gipa = nullptr;
  static inline PFN_vkGetDeviceProcAddr real_gdpa = nullptr;
  static inline PFN_vkGetPhysicalDeviceMemoryProperties real_memory_properties = nullptr;
  static inline PFN_vkQueueSubmit real_queue_submit = nullptr;
  static inline std::atomic<int> instance_lookups{0}, device_lookups{0}, memory_properties_calls{0},
      queue_submit_calls{0};

  static VKAPI_ATTR void VKAPI_CALL memory_properties(VkPhysicalDevice phys, VkPhysicalDeviceMemoryProperties* out) {
    memory_properties_calls++;
    real_memory_properties(phys, out);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL queue_submit(VkQueue q, uint32_t n, const VkSubmitInfo* s, VkFence f) {
    queue_submit_calls++;
    return real_queue_submit(q, n, s, f);
  }
  static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL gdpa(VkDevice device, const char* name) {
    device_lookups++;
    PFN_vkVoidFunction f = real_gdpa(device, name);
    if (f && std::strcmp(name, "vkQueueSubmit") == 0) {
      real_queue_submit = reinterpret_cast<PFN_vkQueueSubmit>(f);
      return reinterpret_cast<PFN_vkVoidFunction>(&queue_submit);
    }
    return f;
  }
  static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL gipa(VkInstance instance, const char* name) {
    instance_lookups++;
    PFN_vkVoidFunction f = real_gipa(instance, name);
    if (f && std::strcmp(name, "vkGetDeviceProcAddr") == 0) {
      real_gdpa = reinterpret_cast<PFN_vkGetDeviceProcAddr>(f);
      return reinterpret_cast<PFN_vkVoidFunction>(&gdpa);
    }
    if (f && std::strcmp(name, "vkGetPhysicalDeviceMemoryProperties") == 0) {
      real_memory_properties = reinterpret_cast<PFN_vkGetPhysicalDeviceMemoryProperties>(f);
      return reinterpret_cast<PFN_vkVoidFunction>(&memory_properties);
    }
    return f;
  }
};

}  // namespace

TEST_CASE("capi: an adopted device takes every Vulkan function from the host's vkGetInstanceProcAddr") {
  reach_set_log_callback(on_log, nullptr);
  g_vulkan_errors = 0;
  HostVulkan host;
  LoaderSpy::real_gipa = host.get_instance_proc_addr;
  const std::string dir = tiny();

  // The same greedy tokens on the host's device through the host's functions as through reach's own loader.
  auto tokens = [&](bool wrapped) {
    reach_adopt_params ap = reach_adopt_default_params();
    ap.use_environment = 1;
    ap.get_instance_proc_addr = wrapped ? reinterpret_cast<void*>(&LoaderSpy::gipa) : nullptr;
    ap.instance = host.instance;
    ap.physical_device = host.phys;
    ap.device = host.device;
    ap.queue_family = host.family;
    ap.queue = host.queue;
    reach_device* dev = nullptr;
    REQUIRE_OK(reach_device_adopt(&ap, &dev));
    reach_model* m = nullptr;
    REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));
    reach_session* s = greedy_session(m);
    std::vector<int32_t> out = generate_sync(s, prompt_ids(m), 6);
    REQUIRE_OK(reach_session_free(s));
    REQUIRE_OK(reach_model_free(m));
    REQUIRE_OK(reach_device_free(dev));
    return out;
  };
  const std::vector<int32_t> through_loader = tokens(false);
  CHECK(LoaderSpy::instance_lookups == 0);   // NULL: reach's own loader, the spy untouched
  const std::vector<int32_t> through_host = tokens(true);
  CHECK(through_host == through_loader);
  CHECK(LoaderSpy::instance_lookups > 0);
  CHECK(LoaderSpy::device_lookups > 0);
  CHECK(LoaderSpy::memory_properties_calls > 0);   // an instance function reach called through the host's
  CHECK(LoaderSpy::queue_submit_calls > 0);        // a device function, through the host's vkGetDeviceProcAddr
  CHECK(host.vk.vkDeviceWaitIdle(host.device) == VK_SUCCESS);
  CHECK(g_vulkan_errors == 0);
  reach_set_log_callback(nullptr, nullptr);
}

TEST_CASE("capi: bad calls return codes with messages and never abort") {
  reach_set_log_callback(on_log, nullptr);
  int32_t tok = 0;
  int flag = 0;
  size_t sz = 0;
  uint32_t u = 0;
  const float* lp = nullptr;
  const char* text = nullptr;
  reach_device* dev = nullptr;
  reach_model* m = nullptr;
  reach_session* s = nullptr;
  reach_stream* st = nullptr;

  SUBCASE("null handles") {
    CHECK_FAILS(reach_model_load(nullptr, "x", nullptr, &m), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_device_describe(nullptr, nullptr), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_model_get_info(nullptr, nullptr), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_model_is_eos(nullptr, 0, &flag), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_tokenize(nullptr, "a", 1, 1, nullptr, 0, &sz), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_detokenize(nullptr, &tok, 1, 1, nullptr, 0, &sz), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_stream_create(nullptr, 1, &st), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_stream_push(nullptr, 0, &text, &sz), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_create(nullptr, nullptr, &s), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_prefill(nullptr, &tok, 1), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_decode(nullptr, 0), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_sample(nullptr, &tok, &flag), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_step(nullptr, 0, &tok, &flag), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_logits(nullptr, &lp, &sz), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_position(nullptr, &u, &u), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_rewind(nullptr, 0), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_reset(nullptr), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_step_async(nullptr, 0), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_poll(nullptr, &flag), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_wait(nullptr, 0, &flag), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_record_decode(nullptr, nullptr), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_begin_decode(nullptr, 0), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_end_decode(nullptr), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_device_adopt(nullptr, &dev), REACH_ERROR_INVALID_ARGUMENT);
    reach_adopt_params ap = reach_adopt_default_params();
    CHECK_FAILS(reach_device_adopt(&ap, &dev), REACH_ERROR_INVALID_ARGUMENT);   // VK_NULL_HANDLEs
    CHECK(dev == nullptr);
    // A pointer that is not a handle is reported, not dereferenced.
    int not_a_handle = 0;
    CHECK_FAILS(reach_session_decode(reinterpret_cast<reach_session*>(&not_a_handle), 0),
                REACH_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(reach_last_error()).find("not a live handle") != std::string::npos);
  }

  SUBCASE("files: missing folder, malformed config, cancelled load") {
    REQUIRE_OK(reach_device_create(env_params(), &dev));
    CHECK_FAILS(reach_model_load(dev, "/no/such/model", nullptr, &m), REACH_ERROR_IO);
    CHECK(m == nullptr);
    const auto bad = reach::test::temp_dir("capi-bad-model");
    std::filesystem::copy(tiny(), bad, std::filesystem::copy_options::overwrite_existing);
    std::ofstream(bad / "config.json") << "{ \"hidden_size\": 64, oops";
    CHECK_FAILS(reach_model_load(dev, bad.string().c_str(), nullptr, &m), REACH_ERROR_FORMAT);
    reach_model_params mp = reach_model_default_params();
    mp.progress = [](void*, uint64_t, uint64_t) { return 0; };
    CHECK_FAILS(reach_model_load(dev, tiny().c_str(), &mp, &m), REACH_ERROR_CANCELLED);
    CHECK(m == nullptr);
    REQUIRE_OK(reach_device_free(dev));
  }

  SUBCASE("a sliding-window ring cannot rewind past what it overwrote; full_kv can") {
    REQUIRE_OK(reach_device_create(env_params(), &dev));
    REQUIRE_OK(reach_model_load(dev, tiny().c_str(), nullptr, &m));
    std::vector<int32_t> ids(40, 5);
    for (int32_t full : {0, 1}) {
      reach_session_params sp = reach_session_default_params();
      CHECK(sp.full_kv == 0);
      sp.context = 64;
      sp.chunk = 4;
      sp.attn_window = 8;   // a ring of 8 + 4 - 1 = 11 rows
      sp.full_kv = full;
      REQUIRE_OK(reach_session_create(m, &sp, &s));
      REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
      if (full) {
        REQUIRE_OK(reach_session_rewind(s, 5));
      } else {
        CHECK_FAILS(reach_session_rewind(s, 5), REACH_ERROR_INVALID_ARGUMENT);
        CHECK(std::string(reach_last_error()).find("full_kv") != std::string::npos);
        REQUIRE_OK(reach_session_rewind(s, 36));   // keys 29..39 are still in the ring
      }
      uint32_t pos = 0;
      REQUIRE_OK(reach_session_position(s, &pos, nullptr));
      CHECK(pos == (full ? 5u : 36u));
      REQUIRE_OK(reach_session_decode(s, 5));
      REQUIRE_OK(reach_session_free(s));
    }
    REQUIRE_OK(reach_model_free(m));
    REQUIRE_OK(reach_device_free(dev));
  }

  SUBCASE("wrong order, context overflow, freed handles") {
    REQUIRE_OK(reach_device_create(env_params(), &dev));
    REQUIRE_OK(reach_model_load(dev, tiny().c_str(), nullptr, &m));
    reach_session_params sp = reach_session_default_params();
    sp.context = 8;
    REQUIRE_OK(reach_session_create(m, &sp, &s));
    CHECK_FAILS(reach_session_decode(s, 1), REACH_ERROR_INVALID_STATE);
    CHECK_FAILS(reach_session_sample(s, &tok, &flag), REACH_ERROR_INVALID_STATE);
    CHECK_FAILS(reach_session_logits(s, &lp, &sz), REACH_ERROR_INVALID_STATE);
    CHECK_FAILS(reach_session_prefill(s, &tok, 0), REACH_ERROR_INVALID_ARGUMENT);   // empty prompt
    std::vector<int32_t> ids(9, 5);
    CHECK_FAILS(reach_session_prefill(s, ids.data(), 9), REACH_ERROR_CONTEXT_OVERFLOW);
    REQUIRE_OK(reach_session_prefill(s, ids.data(), 7));
    REQUIRE_OK(reach_session_decode(s, 5));
    CHECK_FAILS(reach_session_decode(s, 5), REACH_ERROR_CONTEXT_OVERFLOW);
    CHECK(std::string(reach_last_error()).find("context") != std::string::npos);
    CHECK_FAILS(reach_session_rewind(s, 100), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_model_free(m), REACH_ERROR_INVALID_STATE);
    CHECK_FAILS(reach_device_free(dev), REACH_ERROR_INVALID_STATE);
    reach_session_params zero{};
    reach_session* s2 = nullptr;
    CHECK_FAILS(reach_session_create(m, &zero, &s2), REACH_ERROR_INVALID_ARGUMENT);   // size 0
    reach_session_params bad = reach_session_default_params();
    bad.rope_scaling = "yarn";
    bad.leaky_k = 4;   // does not apply to yarn
    CHECK(reach_session_create(m, &bad, &s2) != REACH_OK);
    CHECK(s2 == nullptr);
    bad = reach_session_default_params();
    bad.scheme_flags = "--rope-scaling linear --rope-factor 2";
    REQUIRE_OK(reach_session_create(m, &bad, &s2));
    REQUIRE_OK(reach_session_free(s2));
    REQUIRE_OK(reach_session_free(s));
    CHECK_FAILS(reach_session_free(s), REACH_ERROR_INVALID_ARGUMENT);   // twice
    REQUIRE_OK(reach_model_free(m));
    CHECK_FAILS(reach_session_create(m, nullptr, &s2), REACH_ERROR_INVALID_ARGUMENT);   // freed model
    REQUIRE_OK(reach_device_free(dev));
    CHECK_FAILS(reach_model_load(dev, tiny().c_str(), nullptr, &m), REACH_ERROR_INVALID_ARGUMENT);
  }
  reach_set_log_callback(nullptr, nullptr);
}

TEST_CASE("capi: reach_batch_decode steps several sessions as each would step alone") {
  reach_set_log_callback(on_log, nullptr);
  g_vulkan_errors = 0;
  const std::string dir = tiny();
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  reach_model* m = nullptr;
  REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));
  const std::vector<int32_t> ids = prompt_ids(m);
  constexpr int kSeqs = 3, kSteps = 10;

  // Greedy chains alone, each from a different prompt prefix (different positions per row).
  std::vector<std::vector<int32_t>> alone(kSeqs), batched(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    reach_session* s = greedy_session(m);
    alone[i] = generate_sync(s, std::vector<int32_t>(ids.begin(), ids.end() - 2 * i), kSteps);
    REQUIRE_OK(reach_session_free(s));
  }
  std::vector<reach_session*> ss(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    ss[i] = greedy_session(m);
    REQUIRE_OK(reach_session_prefill(ss[i], ids.data(), ids.size() - 2 * i));
    batched[i].resize(1);
    REQUIRE_OK(reach_session_sample(ss[i], &batched[i][0], nullptr));
  }
  for (int t = 1; t < kSteps; ++t) {
    std::vector<int32_t> toks;
    for (int i = 0; i < kSeqs; ++i) toks.push_back(batched[i].back());
    REQUIRE_OK(reach_batch_decode(ss.data(), toks.data(), kSeqs));
    for (int i = 0; i < kSeqs; ++i) {
      int32_t next = 0;
      REQUIRE_OK(reach_session_sample(ss[i], &next, nullptr));
      batched[i].push_back(next);
    }
  }
  // Greedy tokens are equal; the logits of a batched row differ from decode alone by float rounding only.
  for (int i = 0; i < kSeqs; ++i) CHECK(batched[i] == alone[i]);
  uint32_t pos = 0;
  REQUIRE_OK(reach_session_position(ss[0], &pos, nullptr));
  CHECK(pos == ids.size() + kSteps - 1);

  // Bad input: a clear status, nothing changed.
  const int32_t two[2] = {1, 2};
  CHECK_FAILS(reach_batch_decode(nullptr, two, 2), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_batch_decode(ss.data(), nullptr, 2), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_batch_decode(ss.data(), two, 0), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_batch_decode(ss.data(), two, REACH_BATCH_MAX + 1), REACH_ERROR_INVALID_ARGUMENT);
  reach_session* dup[2] = {ss[0], ss[0]};
  CHECK_FAILS(reach_batch_decode(dup, two, 2), REACH_ERROR_INVALID_ARGUMENT);
  reach_session* with_null[2] = {ss[0], nullptr};
  CHECK_FAILS(reach_batch_decode(with_null, two, 2), REACH_ERROR_INVALID_ARGUMENT);
  int not_a_handle = 0;
  reach_session* bogus[2] = {ss[0], reinterpret_cast<reach_session*>(&not_a_handle)};
  CHECK_FAILS(reach_batch_decode(bogus, two, 2), REACH_ERROR_INVALID_ARGUMENT);
  const int32_t bad_id[2] = {1, 1 << 30};
  CHECK_FAILS(reach_batch_decode(ss.data(), bad_id, 2), REACH_ERROR_INVALID_ARGUMENT);

  reach_model* other = nullptr;
  REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &other));
  reach_session* foreign = greedy_session(other);
  REQUIRE_OK(reach_session_prefill(foreign, ids.data(), ids.size()));
  reach_session* mixed[2] = {ss[0], foreign};
  CHECK_FAILS(reach_batch_decode(mixed, two, 2), REACH_ERROR_INVALID_ARGUMENT);

  reach_session* empty = greedy_session(m);
  reach_session* with_empty[2] = {ss[0], empty};
  CHECK_FAILS(reach_batch_decode(with_empty, two, 2), REACH_ERROR_INVALID_STATE);

  REQUIRE_OK(reach_session_step_async(ss[1], 1));
  CHECK_FAILS(reach_batch_decode(ss.data(), two, 2), REACH_ERROR_INVALID_STATE);
  int done = 0;
  REQUIRE_OK(reach_session_wait(ss[1], UINT64_MAX, &done));
  CHECK(done == 1);

  // A full context (64 tokens): CONTEXT_OVERFLOW, the other session untouched.
  std::vector<int32_t> fill(64 - ids.size(), 1);
  REQUIRE_OK(reach_session_prefill(empty, ids.data(), ids.size()));
  REQUIRE_OK(reach_session_prefill(empty, fill.data(), fill.size()));
  REQUIRE_OK(reach_session_position(ss[0], &pos, nullptr));
  const uint32_t before = pos;
  CHECK_FAILS(reach_batch_decode(with_empty, two, 2), REACH_ERROR_CONTEXT_OVERFLOW);
  REQUIRE_OK(reach_session_position(ss[0], &pos, nullptr));
  CHECK(pos == before);
  const float* logits = nullptr;
  size_t count = 0;
  REQUIRE_OK(reach_session_logits(ss[0], &logits, &count));   // still readable after a rejected step

  // A freed session's slot in the batch goes to a new one.
  REQUIRE_OK(reach_session_free(ss[2]));
  ss[2] = greedy_session(m);
  REQUIRE_OK(reach_session_prefill(ss[2], ids.data(), ids.size()));
  const int32_t three[3] = {1, 2, 3};
  REQUIRE_OK(reach_batch_decode(ss.data(), three, 3));

  for (reach_session* s : ss) REQUIRE_OK(reach_session_free(s));
  REQUIRE_OK(reach_session_free(empty));
  REQUIRE_OK(reach_session_free(foreign));
  REQUIRE_OK(reach_model_free(other));
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
  CHECK(g_vulkan_errors == 0);
}

// reach_reply on gpt-oss's vocabulary, where harmony's markers are special tokens (dropped by the text
// decoder, restored for the channel split) and, with gpt-oss's chat template, REACH_REPLY_CHANNELS_AUTO
// finds the channels.  tests/test_capi.c checks the rest from C.
TEST_CASE("capi: reach_reply splits a gpt-oss reply into its channels and stops in the final one") {
  const std::filesystem::path fixture = reach::test::source_root() / "tests/data/families/gpt_oss/hf";
  reach::test::TempDir dir("capi_reply");
  for (const auto& e : std::filesystem::directory_iterator(fixture))
    std::filesystem::copy_file(e.path(), dir.path / e.path().filename());
  {
    // The fixture's tokenizer_config.json with gpt-oss's template in it, as the harmony serve test does.
    std::string config = reach::test::read_text(fixture / "tokenizer_config.json");
    std::string tmpl = reach::test::read_text(reach::test::source_root() / "tests/data/chat_templates/gpt_oss.jinja");
    std::string quoted = "\"";
    for (char c : tmpl) {
      if (c == '"' || c == '\\') quoted += '\\', quoted += c;
      else if (c == '\n') quoted += "\\n";
      else if (c == '\t') quoted += "\\t";
      else quoted += c;
    }
    quoted += "\"";
    const size_t brace = config.rfind('}');
    REQUIRE(brace != std::string::npos);
    config = config.substr(0, brace) + ", \"chat_template\": " + quoted + "}\n";
    std::ofstream(dir.path / "tokenizer_config.json") << config;
  }
  reach_device* dev = nullptr;
  reach_model* m = nullptr;
  REQUIRE_OK(reach_device_create(nullptr, &dev));
  REQUIRE_OK(reach_model_load(dev, dir.path.string().c_str(), nullptr, &m));

  const std::string reply_text =
      "<|channel|>analysis<|message|>Think: the answer is 4. STOP? No.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4. STOP here, not shown.";
  size_t n = 0;
  REQUIRE_OK(reach_tokenize(m, reply_text.data(), reply_text.size(), 0, nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  REQUIRE_OK(reach_tokenize(m, reply_text.data(), reply_text.size(), 0, ids.data(), ids.size(), &n));

  struct Got {
    std::string content, reasoning;
    bool stopped = false;
  };
  auto run = [&](int32_t channels, std::vector<const char*> stops) {
    reach_reply_params rp = reach_reply_default_params();
    rp.channels = channels;
    rp.stop = stops.data();
    rp.n_stop = stops.size();
    reach_reply* r = nullptr;
    REQUIRE_OK(reach_reply_create(m, &rp, &r));
    Got g;
    reach_reply_text t{};
    t.size = sizeof t;
    for (int32_t id : ids) {
      REQUIRE_OK(reach_reply_push(r, id, &t));
      g.content.append(t.content, t.content_len);
      g.reasoning.append(t.reasoning, t.reasoning_len);
      g.stopped = t.stopped != 0;
    }
    REQUIRE_OK(reach_reply_finish(r, &t));
    g.content.append(t.content, t.content_len);
    g.reasoning.append(t.reasoning, t.reasoning_len);
    REQUIRE_OK(reach_reply_free(r));
    return g;
  };
  Got g = run(REACH_REPLY_CHANNELS_AUTO, {"STOP"});
  CHECK(g.reasoning == "Think: the answer is 4. STOP? No.");   // stops are not looked for in the analysis
  CHECK(g.content == "2 + 2 = 4. ");
  CHECK(g.stopped);
  g = run(1, {"final", "assistant"});   // header words are not the reply's text
  CHECK(g.content == "2 + 2 = 4. STOP here, not shown.");
  CHECK(!g.stopped);
  g = run(0, {});   // no channels: the decoded text (special tokens dropped) is all content
  CHECK(g.reasoning.empty());
  CHECK(g.content.find("2 + 2 = 4.") != std::string::npos);
  CHECK(g.content.find("<|channel|>") == std::string::npos);

  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
}

TEST_CASE("capi: reach_chat_tokenize applies the model's chat template; reach_chat_end_tokens ends its turn") {
  // Qwen2's fixture: ChatML (its tokenizer_config.json's template), EOS </s> (2), <|im_end|> (5) not an EOS id.
  const std::string dir = (reach::test::source_root() / "tests/data/families/qwen2/hf").string();
  reach_device* dev = nullptr;
  reach_model* m = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));

  auto ids_of = [&](const std::string& text) {
    size_t n = 0;
    REQUIRE_OK(reach_tokenize(m, text.data(), text.size(), 1, nullptr, 0, &n));
    std::vector<int32_t> ids(n);
    REQUIRE_OK(reach_tokenize(m, text.data(), text.size(), 1, ids.data(), ids.size(), &n));
    return ids;
  };
  auto chat_ids = [&](const std::vector<reach_chat_message>& chat) {
    size_t n = 0;
    REQUIRE_OK(reach_chat_tokenize(m, chat.data(), chat.size(), nullptr, 0, &n));
    std::vector<int32_t> ids(n);
    REQUIRE_OK(reach_chat_tokenize(m, chat.data(), chat.size(), ids.data(), ids.size(), &n));
    CHECK(n == ids.size());
    return ids;
  };
  // The ChatML text written out by hand (Qwen 2.5's template: its default system turn when none is given).
  CHECK(chat_ids({{"system", "You are Brom, the smith."}, {"user", "Hello!"}}) ==
        ids_of("<|im_start|>system\nYou are Brom, the smith.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
               "<|im_start|>assistant\n"));
  CHECK(chat_ids({{"user", "Hi"}, {"assistant", "Well met."}, {"user", "Wares?"}}) ==
        ids_of("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
               "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nWell met.<|im_end|>\n"
               "<|im_start|>user\nWares?<|im_end|>\n<|im_start|>assistant\n"));

  // The end tokens: <|im_end|> and the EOS; is_eos knows only the latter.
  size_t n_end = 0;
  REQUIRE_OK(reach_chat_end_tokens(m, nullptr, 0, &n_end));
  std::vector<int32_t> ends(n_end);
  REQUIRE_OK(reach_chat_end_tokens(m, ends.data(), ends.size(), &n_end));
  CHECK(ends == std::vector<int32_t>{5, 2});
  int eos = -1;
  REQUIRE_OK(reach_model_is_eos(m, 5, &eos));
  CHECK(eos == 0);
  int32_t one = 0;
  CHECK_FAILS(reach_chat_end_tokens(m, &one, 1, &n_end), REACH_ERROR_BUFFER_TOO_SMALL);
  CHECK(n_end == 2);

  // Misuse: a code and a message, nothing written.
  const reach_chat_message hello[] = {{"user", "Hello!"}};
  size_t n = 0;
  int32_t small[2] = {-1, -1};
  CHECK_FAILS(reach_chat_tokenize(m, hello, 1, small, 2, &n), REACH_ERROR_BUFFER_TOO_SMALL);
  CHECK(n > 2);
  CHECK(small[0] == -1);
  CHECK_FAILS(reach_chat_tokenize(m, hello, 0, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_tokenize(m, nullptr, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_tokenize(m, hello, 1, nullptr, 0, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  const reach_chat_message no_role[] = {{nullptr, "Hello!"}};
  CHECK_FAILS(reach_chat_tokenize(m, no_role, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(reach_last_error()).find("messages[0].role") != std::string::npos);
  const reach_chat_message no_content[] = {{"user", nullptr}};
  CHECK_FAILS(reach_chat_tokenize(m, no_content, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_tokenize(nullptr, hello, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_end_tokens(nullptr, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  REQUIRE_OK(reach_model_free(m));

  // Token ids only (no tokenizer): no template to apply.
  reach_model_params mp = reach_model_default_params();
  mp.require_tokenizer = 0;
  reach::test::TempDir bare("capi_chat_bare");
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(std::filesystem::path(dir) / f, bare.path / f);
  REQUIRE_OK(reach_model_load(dev, bare.path.string().c_str(), &mp, &m));
  CHECK_FAILS(reach_chat_tokenize(m, hello, 1, nullptr, 0, &n), REACH_ERROR_UNSUPPORTED);
  CHECK_FAILS(reach_chat_end_tokens(m, nullptr, 0, &n), REACH_ERROR_UNSUPPORTED);
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
}

TEST_CASE("capi: reach_embed gives the fixture's float64 embeddings; mean and CLS on request; bad calls fail") {
  const auto fixture = reach::test::source_root() / "tests/data/embedding";
  const nlohmann::json ref = nlohmann::json::parse(reach::test::read_text(fixture / "reference.json"));
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  reach_model* m = nullptr;
  REQUIRE_OK(reach_model_load(dev, fixture.string().c_str(), nullptr, &m));
  size_t dims = 0;
  REQUIRE_OK(reach_embedding_dims(m, &dims));
  REQUIRE(dims == ref["dims"].get<size_t>());
  auto cosine = [&](const std::vector<float>& a, const nlohmann::json& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < dims; ++i) {
      const double y = b[i].get<double>();
      ab += a[i] * y, aa += double(a[i]) * a[i], bb += y * y;
    }
    return ab / std::sqrt(aa * bb);
  };
  std::vector<float> v(dims);
  for (const auto& in : ref["inputs"]) {
    CAPTURE(in["text"].get<std::string>());
    const std::vector<int32_t> ids = in["ids"].get<std::vector<int32_t>>();
    REQUIRE_OK(reach_embed(m, ids.data(), ids.size(), v.data(), dims, nullptr));
    CHECK(cosine(v, in["embedding"]) >= 0.9999);
    reach_embed_params p = reach_embed_default_params();
    p.pooling = REACH_POOLING_MEAN;
    REQUIRE_OK(reach_embed(m, ids.data(), ids.size(), v.data(), dims, &p));
    CHECK(cosine(v, in["mean_normalized"]) >= 0.9999);
    p.pooling = REACH_POOLING_CLS;
    p.normalize = 0;
    REQUIRE_OK(reach_embed(m, ids.data(), ids.size(), v.data(), dims, &p));
    CHECK(cosine(v, in["cls_normalized"]) >= 0.9999);
  }
  const int32_t one = 5, outside = 384;
  CHECK_FAILS(reach_embed(m, &one, 1, v.data(), dims - 1, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(std::strstr(reach_last_error(), "reach_embedding_dims") != nullptr);
  CHECK_FAILS(reach_embed(m, &one, 0, v.data(), dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_embed(m, &outside, 1, v.data(), dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_embed(m, &one, 1, nullptr, dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_embed(nullptr, &one, 1, v.data(), dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  reach_embed_params bad = reach_embed_default_params();
  bad.pooling = 7;
  CHECK_FAILS(reach_embed(m, &one, 1, v.data(), dims, &bad), REACH_ERROR_INVALID_ARGUMENT);
  REQUIRE_OK(reach_embed(m, &one, 1, v.data(), dims, nullptr));   // still usable after the failures
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
}

namespace {

const char* const kCapiTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "The weather for a city", )"
    R"("parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, )"
    R"("days": {"type": "integer"}, "alerts": {"type": "boolean"}}, "required": ["unit", "days"], )"
    R"("additionalProperties": false}}}, {"type": "function", "function": {"name": "clock", "description": )"
    R"("The time", "parameters": {"type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, )"
    R"("required": ["zone"]}}}])";

// The tools' schemas checked by hand (an independent reading of kCapiTools): why `arguments` breaks
// the named tool's schema, "" when it does not.
std::string schema_violation(const std::string& name, const std::string& arguments) {
  const nlohmann::json a = nlohmann::json::parse(arguments, nullptr, false);
  if (!a.is_object()) return "not a JSON object";
  if (name == "get_weather") {
    for (const auto& [k, v] : a.items())
      if (k != "unit" && k != "days" && k != "alerts") return "an extra key " + k;
    if (!a.contains("unit") || !a.contains("days")) return "a required key missing";
    if (a["unit"] != "celsius" && a["unit"] != "fahrenheit") return "unit out of its enum";
    if (!a["days"].is_number_integer()) return "days not an integer";
    if (a.contains("alerts") && !a["alerts"].is_boolean()) return "alerts not a boolean";
    return "";
  }
  if (name == "clock") {
    if (!a.contains("zone") || (a["zone"] != "utc" && a["zone"] != "local")) return "zone missing or out of its enum";
    return "";
  }
  return "no tool named " + name;
}

struct ToolReply {
  std::string content;
  nlohmann::json calls;
};

// One chat reply through the C API with the tools: prompt, constraint and reply parsing, sampled at
// temperature 1 with `seed` until an end token (or 300 tokens).
ToolReply tool_reply(reach_model* m, const char* choice, uint64_t seed) {
  const reach_chat_message chat[] = {{"user", "Weather in Paris for two days?"}};
  size_t n = 0;
  REQUIRE_OK(reach_chat_tokenize_tools(m, chat, 1, kCapiTools, choice, nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  REQUIRE_OK(reach_chat_tokenize_tools(m, chat, 1, kCapiTools, choice, ids.data(), ids.size(), &n));
  size_t n_end = 0;
  REQUIRE_OK(reach_chat_end_tokens(m, nullptr, 0, &n_end));
  std::vector<int32_t> ends(n_end);
  REQUIRE_OK(reach_chat_end_tokens(m, ends.data(), ends.size(), &n_end));

  reach_session_params sp = reach_session_default_params();
  sp.context = 2048;
  sp.sampling.temperature = 1;
  sp.sampling.seed = seed;
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create(m, &sp, &s));
  REQUIRE_OK(reach_session_set_tools(s, kCapiTools, choice));
  reach_reply_params rp = reach_reply_default_params();
  rp.channels = REACH_REPLY_CHANNELS_AUTO;
  reach_reply* r = nullptr;
  REQUIRE_OK(reach_reply_create(m, &rp, &r));
  REQUIRE_OK(reach_reply_set_tools(r, kCapiTools, choice));

  ToolReply out;
  reach_reply_text t{};
  t.size = sizeof t;
  REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
  int32_t tok = 0;
  int eos = 0;
  REQUIRE_OK(reach_session_sample(s, &tok, &eos));
  for (int i = 0; i < 300 && !eos && std::find(ends.begin(), ends.end(), tok) == ends.end(); ++i) {
    REQUIRE_OK(reach_reply_push(r, tok, &t));
    out.content.append(t.content, t.content_len);
    REQUIRE_OK(reach_session_step(s, tok, &tok, &eos));
  }
  REQUIRE_OK(reach_reply_finish(r, &t));
  out.content.append(t.content, t.content_len);
  size_t len = 0;
  REQUIRE_OK(reach_reply_tool_calls_json(r, nullptr, 0, &len));
  std::string json(len + 1, '\0');
  REQUIRE_OK(reach_reply_tool_calls_json(r, json.data(), json.size(), &len));
  json.resize(len);
  out.calls = nlohmann::json::parse(json);
  REQUIRE_OK(reach_reply_free(r));
  REQUIRE_OK(reach_session_free(s));
  return out;
}

}  // namespace

TEST_CASE("capi: tools: a forced call parses and follows its schema; auto's calls do too; misuse is named") {
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  // Qwen3's template (<tool_call>) and gpt-oss's harmony (its vocabulary's format).
  for (const char* family : {"qwen3", "gpt_oss"}) {
    INFO(family);
    const std::string dir = (reach::test::source_root() / "tests/data/families" / family / "hf").string();
    reach_model* m = nullptr;
    REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      for (const char* choice : {"required", "clock"}) {
        INFO(choice << " seed " << seed);
        const ToolReply r = tool_reply(m, choice, seed);
        CAPTURE(r.calls.dump());
        REQUIRE(r.calls.size() == 1);
        const std::string name = r.calls[0]["name"].get<std::string>();
        CHECK(name == (std::string(choice) == "clock" ? "clock" : name));
        CHECK(schema_violation(name, r.calls[0]["arguments"].get<std::string>()) == "");
      }
      // auto: the random model seldom calls; whatever it calls validates.
      const ToolReply a = tool_reply(m, "auto", seed);
      for (const auto& c : a.calls)
        CHECK(schema_violation(c["name"].get<std::string>(), c["arguments"].get<std::string>()) == "");
    }
    // "required" with one tool named: get_weather via the prompt's header / tag.
    const ToolReply w = tool_reply(m, "get_weather", 7);
    REQUIRE(w.calls.size() == 1);
    CHECK(w.calls[0]["name"] == "get_weather");
    CHECK(schema_violation("get_weather", w.calls[0]["arguments"].get<std::string>()) == "");

    // Misuse: a code and a message naming what is wrong.
    reach_session_params sp = reach_session_default_params();
    sp.context = 64;
    reach_session* s = nullptr;
    REQUIRE_OK(reach_session_create(m, &sp, &s));
    CHECK_FAILS(reach_session_set_tools(s, "{}", "auto"), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_set_tools(s, kCapiTools, "sometimes"), REACH_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(reach_last_error()).find("tool_choice 'sometimes'") != std::string::npos);
    CHECK_FAILS(reach_session_set_tools(s, R"([{"type": "function", "function": {"name": "f", "parameters": )"
                                           R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "a"}}}}}])",
                                        "required"),
                REACH_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(reach_last_error()).find("tools_json[0].function.parameters") != std::string::npos);
    REQUIRE_OK(reach_session_set_tools(s, nullptr, nullptr));   // removed
    REQUIRE_OK(reach_session_free(s));
    reach_reply* r = nullptr;
    REQUIRE_OK(reach_reply_create(m, nullptr, &r));
    if (std::string(family) == "gpt_oss")   // harmony's calls need the reply's channels
      CHECK_FAILS(reach_reply_set_tools(r, kCapiTools, "auto"), REACH_ERROR_INVALID_ARGUMENT);
    size_t len = 0;
    CHECK_FAILS(reach_reply_tool_calls_json(r, nullptr, 0, nullptr), REACH_ERROR_INVALID_ARGUMENT);
    REQUIRE_OK(reach_reply_tool_calls_json(r, nullptr, 0, &len));
    CHECK(len == 2);   // "[]"
    char one[2];
    CHECK_FAILS(reach_reply_tool_calls_json(r, one, sizeof one, &len), REACH_ERROR_BUFFER_TOO_SMALL);
    REQUIRE_OK(reach_reply_free(r));
    REQUIRE_OK(reach_model_free(m));
  }
  // A template without tool calls (Gemma 2's fixture): UNSUPPORTED, named.
  reach_model* g = nullptr;
  REQUIRE_OK(reach_model_load(dev, (reach::test::source_root() / "tests/data/families/gemma2/hf").string().c_str(),
                              nullptr, &g));
  const reach_chat_message hi[] = {{"user", "Hi"}};
  size_t n = 0;
  CHECK_FAILS(reach_chat_tokenize_tools(g, hi, 1, kCapiTools, "auto", nullptr, 0, &n), REACH_ERROR_UNSUPPORTED);
  REQUIRE_OK(reach_chat_tokenize_tools(g, hi, 1, kCapiTools, "none", nullptr, 0, &n));   // none: no tools written
  REQUIRE_OK(reach_model_free(g));
  REQUIRE_OK(reach_device_free(dev));
}
