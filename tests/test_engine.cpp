// Engine plumbing: device, memory, transfer, pipeline, command list and errors.
// The kernels themselves are tested in tests/test_kernels_<family>.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/pipeline.hpp"
#include "kernels/kernels.hpp"
#include "engine/vk_check.hpp"
#include "engine/vk_loader.hpp"
#include "tests/support/data.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/fixtures.hpp"

using namespace reach;
using reach::test::gpu;

TEST_CASE("device: capabilities are filled") {
  const auto& c = gpu().device->caps();
  INFO(c.summary());
  CHECK(!c.device_name.empty());
  CHECK(c.subgroup_size >= 1);
  CHECK(c.max_storage_buffer_range >= (1u << 20));
  CHECK(c.max_shared_memory >= 16384);
  CHECK(c.min_storage_buffer_offset_alignment >= 1);
  CHECK(c.max_buffer_size >= c.max_storage_buffer_range);
  // The minimums every Vulkan device must meet.
  CHECK(c.max_stage_storage_buffers >= 4);
  CHECK(c.max_stage_sampled >= 16);
  CHECK(c.max_stage_resources >= 128);
  CHECK(c.to_json().front() == '{');
}

TEST_CASE("device: list shows every device and bad selections are clear errors") {
  auto devs = Device::list();
  REQUIRE(!devs.empty());
  DeviceOptions opt;
  opt.name = "no-such-gpu-xyz";
  opt.on_validation = reach::test::on_validation_message;
  CHECK_HAS(reach::test::error_of([&] { Device::create(opt); }, ErrorCode::invalid_argument), "no-such-gpu-xyz");
  opt.name.clear();
  opt.index = 999;
  CHECK_THROWS_AS(Device::create(opt), Error);
}

namespace {

// Settings as the edges read them (settings_from), from the variables given here only.
Settings settings_with(const std::map<std::string, std::string>& env) {
  return settings_from([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// A vkGetInstanceProcAddr that forwards to the loader's but lacks vkCreateDevice and vkGetDeviceProcAddr.
PFN_vkGetInstanceProcAddr g_real_gipa = nullptr;
VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL gipa_without_create_device(VkInstance instance, const char* name) {
  if (std::strcmp(name, "vkCreateDevice") == 0 || std::strcmp(name, "vkGetDeviceProcAddr") == 0) return nullptr;
  return g_real_gipa(instance, name);
}

}  // namespace

TEST_CASE("vulkan loader: the system's is found once per process and lists the device") {
  CHECK(default_vulkan_libraries() == std::vector<std::string>{"libvulkan.so.1"});
  // From several threads at once: one load, one table.
  std::vector<const VkGlobalTable*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (auto& p : seen) threads.emplace_back([&p] { p = &vulkan_loader(Settings{}); });
  for (auto& t : threads) t.join();
  for (const VkGlobalTable* p : seen) CHECK(p == seen[0]);
  const VkGlobalTable& g = *seen[0];
  CHECK(bool(g.vkGetInstanceProcAddr));
  CHECK(bool(g.vkCreateInstance));
  CHECK(bool(g.vkEnumerateInstanceVersion));   // lavapipe's loader is 1.3

  // The normal path lists the device, and naming the same loader in REACH_VULKAN_LIBRARY does too.
  const auto by_name = [](const std::vector<PhysicalDeviceInfo>& devs) {
    std::set<std::string> names;
    for (const auto& d : devs) names.insert(d.caps.device_name);
    return names;
  };
  const auto devs = Device::list();
  CHECK(std::any_of(devs.begin(), devs.end(), [](const PhysicalDeviceInfo& d) {
    return d.caps.device_name.find("llvmpipe") != std::string::npos || d.caps.type != VK_PHYSICAL_DEVICE_TYPE_CPU;
  }));
  const Settings named = settings_with({{"REACH_VULKAN_LIBRARY", "libvulkan.so.1"}});
  CHECK(named.vulkan_library == "libvulkan.so.1");
  CHECK(by_name(Device::list(false, {}, named)) == by_name(devs));
}

TEST_CASE("vulkan loader: a missing library or one that is not a loader is an error naming it") {
  DeviceOptions opt;
  opt.on_validation = reach::test::on_validation_message;
  opt.settings = settings_with({{"REACH_VULKAN_LIBRARY", "/nonexistent/libvulkan.so.1"}});
  std::string msg = reach::test::error_of([&] { Device::create(opt); }, ErrorCode::unsupported);
  CHECK_HAS(msg, "REACH_VULKAN_LIBRARY=/nonexistent/libvulkan.so.1");
  CHECK_HAS(msg, "No such file");   // the system's reason
  CHECK_HAS(msg, "set REACH_VULKAN_LIBRARY to the path of a Vulkan loader, or unset it");
  // Not cached: the same again, and Device::list and the validation-layer query say it too.
  CHECK_HAS(reach::test::error_of([&] { Device::list(false, {}, opt.settings); }, ErrorCode::unsupported),
            "/nonexistent/libvulkan.so.1");
  CHECK_HAS(reach::test::error_of([&] { validation_layer_installed(opt.settings); }, ErrorCode::unsupported),
            "/nonexistent/libvulkan.so.1");

  // A library that opens but is no Vulkan loader.
  opt.settings = settings_with({{"REACH_VULKAN_LIBRARY", "libm.so.6"}});
  msg = reach::test::error_of([&] { Device::create(opt); }, ErrorCode::unsupported);
  CHECK_HAS(msg, "libm.so.6");
  CHECK_HAS(msg, "not a Vulkan loader: it has no vkGetInstanceProcAddr");

  // An adopted device gets the same error: the loader is needed when the host passes no vkGetInstanceProcAddr.
  AdoptedDevice h;
  h.instance = reinterpret_cast<VkInstance>(uintptr_t(1));   // never reached: the loader fails first
  h.physical_device = reinterpret_cast<VkPhysicalDevice>(uintptr_t(1));
  h.device = reinterpret_cast<VkDevice>(uintptr_t(1));
  h.queue = reinterpret_cast<VkQueue>(uintptr_t(1));
  h.settings = opt.settings;
  CHECK_HAS(reach::test::error_of([&] { Device::adopt(h); }, ErrorCode::unsupported), "vkGetInstanceProcAddr");
}

TEST_CASE("vulkan loader: a table missing required entry points names each one") {
  g_real_gipa = vulkan_loader(Settings{}).vkGetInstanceProcAddr;
  const std::string msg = reach::test::error_of(
      [] { load_instance_table(&gipa_without_create_device, gpu().device->instance(), "the test's vkGetInstanceProcAddr"); },
      ErrorCode::unsupported);
  CHECK_HAS(msg, "the test's vkGetInstanceProcAddr has no vkCreateDevice, vkGetDeviceProcAddr");
  CHECK(msg.find("vkEnumeratePhysicalDevices") == std::string::npos);   // only the missing ones
  CHECK_HAS(reach::test::error_of([] { load_global_table(nullptr, "the host's vkGetInstanceProcAddr"); },
                                  ErrorCode::invalid_argument),
            "the host's vkGetInstanceProcAddr is NULL");
}

TEST_CASE("memory: suballocation reuses freed space and keeps arenas apart") {
  auto& g = gpu();
  Allocator alloc(*g.device, 8 << 20);
  {
    Buffer a = alloc.allocate(Arena::weights, 1 << 20, "a");
    Buffer b = alloc.allocate(Arena::weights, 1 << 20, "b");
    Buffer c = alloc.allocate(Arena::cache, 1 << 20, "c");
    CHECK(alloc.stats(Arena::weights).blocks == 1);
    CHECK(alloc.stats(Arena::weights).buffers == 2);
    CHECK(alloc.stats(Arena::cache).blocks == 1);
    a = Buffer();
    Buffer d = alloc.allocate(Arena::weights, 1 << 20, "d");
    CHECK(alloc.stats(Arena::weights).blocks == 1);
    CHECK(alloc.stats(Arena::weights).buffers == 2);
  }
  CHECK(alloc.stats(Arena::weights).buffers == 0);
  CHECK(alloc.stats(Arena::weights).used_bytes == 0);
  alloc.trim();
  CHECK(alloc.stats(Arena::weights).blocks == 0);
}

TEST_CASE("memory: an injected allocation failure is an error, not a crash") {
  auto& g = gpu();
  Allocator alloc(*g.device, 4 << 20);
  Buffer first = alloc.allocate(Arena::scratch, 1024, "first");
  alloc.inject_allocation_failure(0);
  CHECK_HAS(reach::test::error_of([&] { alloc.allocate(Arena::weights, 16 << 20, "model.embed_tokens.weight"); },
                                   ErrorCode::out_of_memory),
            "model.embed_tokens.weight");
  // The allocator still works afterwards.
  Buffer again = alloc.allocate(Arena::weights, 16 << 20, "again");
  CHECK(again.size() == (16u << 20));
}

TEST_CASE("memory: a real device out-of-memory is an error") {
  auto& g = gpu();
  Allocator alloc(*g.device);
  // Larger than any allocation the device allows: must be refused cleanly.
  const uint64_t huge = g.device->caps().max_buffer_size + 1;
  CHECK_THROWS_AS(alloc.allocate(Arena::weights, huge, "huge"), Error);
}

TEST_CASE("transfer: staged and mapped paths round-trip") {
  auto& g = gpu();
  for (bool staged : {false, true}) {
    CAPTURE(staged);
    Transfer t(*g.allocator, 1 << 16);   // small staging buffer forces many chunks
    t.set_force_staging(staged);
    std::vector<uint8_t> data(300000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 131 + 7);
    Buffer b = g.allocator->allocate(Arena::weights, data.size() + 100, "roundtrip");
    uint64_t last = 0;
    t.upload(b, 100, data.data(), data.size(), [&](uint64_t done) { last = done; });
    CHECK(last == data.size());
    std::vector<uint8_t> back(data.size());
    t.download(b, 100, back.data(), back.size());
    CHECK(back == data);
  }
}

TEST_CASE("pipeline: embedded SPIR-V, lazy creation, cache reuse") {
  auto& g = gpu();
  auto& cache = g.device->pipelines();
  const auto& p1 = cache.get({ShaderId::elementwise_add, 3, 8, {{0, 64}}});
  const auto& p2 = cache.get({ShaderId::elementwise_add, 3, 8, {{0, 64}}});
  CHECK(&p1 == &p2);
  CHECK(p1.name == "elementwise_add");
  const auto& p3 = cache.get({ShaderId::elementwise_add, 3, 8, {{0, 128}}});
  CHECK(&p1 != &p3);
  // Every generated id names its own embedded module.
  for (uint32_t i = 0; i < kShaderCount; ++i) {
    const auto id = static_cast<ShaderId>(i);
    CHECK(embedded_shader(id).id == id);
    CHECK(embedded_shader(id).words > 5);
  }
  CHECK_THROWS_AS(embedded_shader(static_cast<ShaderId>(kShaderCount)), Error);
}

TEST_CASE("command list: record once, submit many times") {
  auto& g = gpu();
  const uint32_t n = 1000;
  auto a = reach::test::random_floats(n, 1), b = reach::test::random_floats(n, 2);
  Buffer ba = g.upload_f32(a), bb = g.upload_f32(b), by = g.zeros(n * 4);
  CommandList cmd(*g.device);
  cmd.begin();
  g.kernels->elementwise_add(cmd, ba.range(), bb.range(), by.range(), n, n);
  cmd.end();
  for (int rep = 0; rep < 3; ++rep) {
    // Change the input between submissions: the recorded commands read it afresh.
    for (auto& x : a) x += 1.0f;
    g.transfer->upload(ba, 0, a.data(), n * 4);
    cmd.run();
    auto y = g.download_f32(by, n);
    for (uint32_t i = 0; i < n; ++i) REQUIRE(y[i] == doctest::Approx(a[i] + b[i]).epsilon(1e-6));
  }
}

namespace {

// A timeline semaphore the host signals: a command list submitted after it (CommandList::submit_after)
// stays in flight until then, so "still running" is certain rather than a race with the GPU.  (A host-set
// VkEvent that a pending command buffer waits on is invalid: VUID-vkSetEvent-event-09543.)
struct HostGate {
  VkDevice device;
  PFN_vkDestroySemaphore destroy;
  PFN_vkSignalSemaphore signal;
  VkSemaphore semaphore = VK_NULL_HANDLE;
  explicit HostGate(Device& d) : device(d.handle()) {
    REQUIRE_MESSAGE(d.caps().timeline_semaphore, "the device has no timeline semaphores");
    auto proc = [&](const char* name) { return d.vki().vkGetDeviceProcAddr(device, name); };
    auto create = reinterpret_cast<PFN_vkCreateSemaphore>(proc("vkCreateSemaphore"));
    destroy = reinterpret_cast<PFN_vkDestroySemaphore>(proc("vkDestroySemaphore"));
    signal = reinterpret_cast<PFN_vkSignalSemaphore>(proc("vkSignalSemaphore"));
    REQUIRE((create && destroy && signal));
    VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkSemaphoreCreateInfo ci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &type};
    REQUIRE(create(device, &ci, nullptr, &semaphore) == VK_SUCCESS);
  }
  ~HostGate() { destroy(device, semaphore, nullptr); }
  // No doctest assertion here: a host thread calls it too.
  VkResult open() {
    VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
    si.semaphore = semaphore;
    si.value = 1;
    return signal(device, &si);
  }
};

}  // namespace

TEST_CASE("command list: poll and wait_for see a submission through, and time out while it runs") {
  auto& g = gpu();
  const uint32_t n = 4096;
  auto a = reach::test::random_floats(n, 11), b = reach::test::random_floats(n, 12);
  Buffer ba = g.upload_f32(a), bb = g.upload_f32(b), by = g.zeros(n * 4);
  HostGate gate(*g.device);
  CommandList cmd(*g.device);
  // Nothing submitted yet: nothing pending, and polling or waiting is a no-op that reports done.
  CHECK(!cmd.pending());
  CHECK(cmd.poll());
  CHECK(cmd.wait_for(0));
  CHECK(cmd.fence() != VK_NULL_HANDLE);
  cmd.begin();
  g.kernels->elementwise_add(cmd, ba.range(), bb.range(), by.range(), n, n);
  cmd.end();
  cmd.submit_after(gate.semaphore, 1);
  CHECK(cmd.pending());
  // Held by the gate: poll and wait_for report "not yet" and leave the submission pending.
  CHECK(!cmd.poll());
  CHECK(!cmd.wait_for(0));
  CHECK(!cmd.wait_for(2'000'000));   // 2 ms
  CHECK(cmd.pending());
  CHECK(g.device->vk().vkGetFenceStatus(g.device->handle(), cmd.fence()) == VK_NOT_READY);
  REQUIRE(gate.open() == VK_SUCCESS);
  bool done = false;
  for (int i = 0; i < 1000000 && !done; ++i) done = cmd.poll();
  if (!done) done = cmd.wait_for(UINT64_MAX);
  CHECK(done);
  CHECK(!cmd.pending());
  CHECK(g.device->vk().vkGetFenceStatus(g.device->handle(), cmd.fence()) == VK_SUCCESS);
  // A finished list: wait_for(0) and poll report done at once.
  CHECK(cmd.wait_for(0));
  CHECK(cmd.poll());
  auto y = g.download_f32(by, n);
  for (uint32_t i = 0; i < n; ++i) REQUIRE(y[i] == a[i] + b[i]);
  // Resubmitted, the host waits on the fence itself; poll then ends the submission.
  for (auto& x : a) x *= 2.0f;
  g.transfer->upload(ba, 0, a.data(), n * 4);
  cmd.submit();
  CHECK(cmd.pending());
  VkFence f = cmd.fence();
  REQUIRE(g.device->vk().vkWaitForFences(g.device->handle(), 1, &f, VK_TRUE, UINT64_MAX) == VK_SUCCESS);
  CHECK(cmd.pending());   // the list learns of it only when asked
  CHECK(cmd.poll());
  CHECK(!cmd.pending());
  y = g.download_f32(by, n);
  for (uint32_t i = 0; i < n; ++i) REQUIRE(y[i] == a[i] + b[i]);
}

TEST_CASE("command list: destroying one with a submission in flight waits for it") {
  auto& g = gpu();
  const uint32_t n = 4096;
  auto a = reach::test::random_floats(n, 21), b = reach::test::random_floats(n, 22);
  Buffer ba = g.upload_f32(a), bb = g.upload_f32(b), by = g.zeros(n * 4);
  HostGate gate(*g.device);
  std::atomic<bool> released{false};
  VkResult opened = VK_NOT_READY;   // written by the host thread, read after join
  std::thread host;
  {
    CommandList cmd(*g.device);
    cmd.begin();
    g.kernels->elementwise_add(cmd, ba.range(), bb.range(), by.range(), n, n);
    cmd.end();
    cmd.submit_after(gate.semaphore, 1);
    REQUIRE(cmd.pending());
    host = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      released = true;   // before the GPU may go on
      opened = gate.open();
    });
  }   // ~CommandList: blocks until the GPU is through (validation reports anything destroyed in use)
  CHECK(released);
  host.join();
  CHECK(opened == VK_SUCCESS);
  auto y = g.download_f32(by, n);
  for (uint32_t i = 0; i < n; ++i) REQUIRE(y[i] == a[i] + b[i]);
}

TEST_CASE("adopted device: a host-created VkDevice runs reach kernels") {
  // Create a device with raw Vulkan, as a host application would.
  reach::test::HostVulkan host;

  int locks = 0, unlocks = 0;
  {
    AdoptedDevice h;
    h.instance = host.instance;
    h.physical_device = host.phys;
    h.device = host.device;
    h.queue_family = host.family;
    h.queue = host.queue;
    h.queue_lock = [&](bool lock) { (lock ? locks : unlocks)++; };
    auto dev = Device::adopt(h);
    CHECK(!dev->owns_device());
    CHECK(!dev->caps().storage_16bit);   // the host did not enable it
    Allocator alloc(*dev);
    Transfer t(alloc);
    Kernels k(*dev);
    std::vector<float> a{1, 2, 3}, b{10, 20, 30};
    Buffer ba = alloc.allocate(Arena::scratch, 12, "a"), bb = alloc.allocate(Arena::scratch, 12, "b"),
           by = alloc.allocate(Arena::scratch, 12, "y");
    t.upload(ba, 0, a.data(), 12);
    t.upload(bb, 0, b.data(), 12);
    CommandList cmd(*dev);
    cmd.begin();
    k.elementwise_add(cmd, ba.range(), bb.range(), by.range(), 3, 3);
    cmd.end();
    // reach cannot tell whether the host enabled timeline semaphores: submit_after refuses, naming the feature.
    CHECK(!dev->caps().timeline_semaphore);
    CHECK_THROWS_WITH(cmd.submit_after(VK_NULL_HANDLE, 1), doctest::Contains("timelineSemaphore"));
    CHECK(!cmd.pending());
    cmd.run();
    std::vector<float> y(3);
    t.download(by, 0, y.data(), 12);
    CHECK(y == std::vector<float>{11, 22, 33});
  }
  CHECK(locks > 0);
  CHECK(locks == unlocks);
  // reach destroyed nothing of the host's: the device is still usable.
  CHECK(host.vk.vkDeviceWaitIdle(host.device) == VK_SUCCESS);
}

TEST_CASE("errors: Vulkan failures name the call and the result") {
  const std::string msg = reach::test::error_of([] { vk_check(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory"); },
                                                ErrorCode::out_of_memory);
  CHECK_HAS(msg, "vkAllocateMemory");
  CHECK_HAS(msg, "VK_ERROR_OUT_OF_DEVICE_MEMORY");
}

TEST_CASE("kernel config: the fused mat-vec only where the per-stage descriptor limits hold its bindings") {
  Capabilities c = gpu().device->caps();
  c.max_stage_storage_buffers = 1u << 20;
  c.max_stage_sampled = 1u << 20;
  c.max_stage_resources = 1u << 20;
  CHECK(KernelConfig::from(c).matvec_fused);
  Capabilities few = c;
  few.max_stage_storage_buffers = 4;   // the spec's minimum (some mobile drivers are near it)
  CHECK_FALSE(KernelConfig::from(few).matvec_fused);
  few = c;
  few.max_stage_resources = 12;
  CHECK_FALSE(KernelConfig::from(few).matvec_fused);
}
