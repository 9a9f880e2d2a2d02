// The C API (include/reach.h) from C++: an adopted host device generates the
// same tokens as a device reach owns (sync, step_async and record_decode into
// a host command buffer), misuse returns codes with messages, and batched decode
// steps sessions as each would step alone (the text side: test_capi_text.cpp).
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

#include "tests/support/capi_check.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach::test::capi;

namespace {

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

TEST_CASE("capi: sessions default to an f16 KV cache, as the CLI's; REACH_KV_F32 asks for f32") {
  const reach_session_params d = reach_session_default_params();
  CHECK(d.cache_type_k == REACH_KV_F16);
  CHECK(d.cache_type_v == REACH_KV_F16);
  reach_set_log_callback(on_log, nullptr);
  g_vulkan_errors = 0;
  const std::string dir = tiny();
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  reach_model* m = nullptr;
  REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));
  const std::vector<int32_t> ids = prompt_ids(m);
  // The logits after the prompt and two decode steps (which read the cache back), from a session made with
  // `params` (NULL: the defaults).
  auto logits_with = [&](const reach_session_params* params) {
    reach_session* s = nullptr;
    REQUIRE_OK(reach_session_create(m, params, &s));
    REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
    for (int32_t t : {5, 7}) REQUIRE_OK(reach_session_decode(s, t));
    const float* p = nullptr;
    size_t n = 0;
    REQUIRE_OK(reach_session_logits(s, &p, &n));
    std::vector<float> out(p, p + n);
    REQUIRE_OK(reach_session_free(s));
    return out;
  };
  auto with_types = [&](int32_t k, int32_t v) {
    reach_session_params p = reach_session_default_params();
    p.cache_type_k = k;
    p.cache_type_v = v;
    return logits_with(&p);
  };
  const std::vector<float> by_null = logits_with(nullptr), by_default = logits_with(&d);
  const std::vector<float> f16 = with_types(REACH_KV_F16, REACH_KV_F16), f32 = with_types(REACH_KV_F32, REACH_KV_F32);
  REQUIRE(f16.size() == f32.size());
  // Bit for bit the f16 cache's logits (one program, one rounding of K and V)...
  CHECK(std::memcmp(by_null.data(), f16.data(), f16.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(by_default.data(), f16.data(), f16.size() * sizeof(float)) == 0);
  // ... and not the f32 cache's: rounding K and V to 11-bit mantissas moves some logit of this random-weight
  // model, so the comparison above tells the two apart.
  CHECK(std::memcmp(f32.data(), f16.data(), f16.size() * sizeof(float)) != 0);
  CHECK(g_vulkan_errors == 0);
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
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
