// host_app.cpp - a "game" that owns its Vulkan device and advances reach one
// token per frame on the same device and queue (the C API's adopted device).
//
//   host_app MODEL_DIR [PROMPT] [--frames N] [--mode record|async]
//
// Each frame the host does its own GPU work (fill a 4 MiB buffer, copy it) and:
//   record: reach's decode step is appended to the host's frame command buffer
//           (reach_session_record_decode), submitted once with the frame;
//   async:  reach submits its step on the shared queue under the host's queue
//           lock (reach_session_step_async) and the host polls it next frame.
// Prints the CPU time of every frame and the text as it is produced.
//
// Like many engines (volk, a game's own loader), the host loads Vulkan itself:
// it opens the loader library, looks every function up through its
// vkGetInstanceProcAddr, and hands that vkGetInstanceProcAddr to reach
// (reach_adopt_params.get_instance_proc_addr), which then calls Vulkan only
// through it.  Built with VK_NO_PROTOTYPES: the names below are the host's
// own function pointers, not libvulkan's symbols.
#include <reach.h>
#include <vulkan/vulkan.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

#define VK(call)                                                                    \
  do {                                                                              \
    VkResult r_ = (call);                                                           \
    if (r_ != VK_SUCCESS) {                                                         \
      std::fprintf(stderr, "%s failed: VkResult %d\n", #call, int(r_));             \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

#define REACH(call)                                                                  \
  do {                                                                               \
    reach_status s_ = (call);                                                        \
    if (s_ != REACH_OK) {                                                            \
      std::fprintf(stderr, "%s: %s\n  %s\n", #call, reach_status_name(s_), reach_last_error()); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// The host's Vulkan functions, by level: global (before an instance), instance, device.
#define HOST_GLOBAL(X) X(vkCreateInstance)
#define HOST_INSTANCE(X)                                                                      \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)           \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceFeatures2)                   \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
#define HOST_DEVICE(X)                                                                        \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                   \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)    \
  X(vkMapMemory) X(vkUnmapMemory) X(vkCreateCommandPool) X(vkDestroyCommandPool)                \
  X(vkAllocateCommandBuffers) X(vkResetCommandBuffer) X(vkBeginCommandBuffer)                   \
  X(vkEndCommandBuffer) X(vkCmdFillBuffer) X(vkCmdCopyBuffer) X(vkCmdPipelineBarrier)           \
  X(vkCreateFence) X(vkDestroyFence) X(vkResetFences) X(vkWaitForFences) X(vkQueueSubmit)
#define HOST_DECLARE(name) PFN_##name name = nullptr;
PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
HOST_GLOBAL(HOST_DECLARE)
HOST_INSTANCE(HOST_DECLARE)
HOST_DEVICE(HOST_DECLARE)

template <class F>
void lookup(F& fn, PFN_vkVoidFunction found, const char* name) {
  if (!found) {
    std::fprintf(stderr, "the Vulkan loader has no %s\n", name);
    std::exit(1);
  }
  fn = reinterpret_cast<F>(found);
}
#define HOST_LOAD_GLOBAL(name) lookup(name, vkGetInstanceProcAddr(VK_NULL_HANDLE, #name), #name);
#define HOST_LOAD_INSTANCE(name) lookup(name, vkGetInstanceProcAddr(instance, #name), #name);
#define HOST_LOAD_DEVICE(name) lookup(name, vkGetDeviceProcAddr(device, #name), #name);

// Opens the system's Vulkan loader (kept open until exit) and takes its vkGetInstanceProcAddr.
void load_vulkan() {
#if defined(_WIN32)
  HMODULE lib = LoadLibraryA("vulkan-1.dll");
  void* gipa = lib ? reinterpret_cast<void*>(GetProcAddress(lib, "vkGetInstanceProcAddr")) : nullptr;
  const char* name = "vulkan-1.dll";
#else
#if defined(__APPLE__)
  const char* name = "libvulkan.1.dylib";
#else
  const char* name = "libvulkan.so.1";
#endif
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  void* gipa = lib ? dlsym(lib, "vkGetInstanceProcAddr") : nullptr;
#endif
  if (!gipa) {
    std::fprintf(stderr, "no Vulkan loader (%s) with vkGetInstanceProcAddr: install the GPU's Vulkan driver\n", name);
    std::exit(1);
  }
  vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(gipa);
  HOST_GLOBAL(HOST_LOAD_GLOBAL)
}

std::mutex g_queue_mutex;   // the host's queue lock, shared with reach

void queue_lock(void*, int lock) {
  if (lock) g_queue_mutex.lock();
  else g_queue_mutex.unlock();
}

uint32_t find_memory(VkPhysicalDevice phys, uint32_t bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(phys, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
  std::fprintf(stderr, "no suitable memory type\n");
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [PROMPT] [--frames N] [--mode record|async]\n", argv[0]);
    return 2;
  }
  std::string model_dir = argv[1], prompt = "Once upon a time", mode = "record";
  int frames = 24;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--frames" && i + 1 < argc) frames = std::atoi(argv[++i]);
    else if (a == "--mode" && i + 1 < argc) mode = argv[++i];
    else prompt = a;
  }
  if (mode != "record" && mode != "async") { std::fprintf(stderr, "--mode record|async\n"); return 2; }

  // ---- The host's own Vulkan setup (what a game engine already has).
  load_vulkan();
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "reach host_app";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  VkInstance instance;
  VK(vkCreateInstance(&ici, nullptr, &instance));
  HOST_INSTANCE(HOST_LOAD_INSTANCE)
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(instance, &n, nullptr);
  if (n == 0) { std::fprintf(stderr, "no Vulkan device\n"); return 1; }
  std::vector<VkPhysicalDevice> physs(n);
  vkEnumeratePhysicalDevices(instance, &n, physs.data());
  VkPhysicalDevice phys = physs[0];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(phys, &props);

  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qfs(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &qn, qfs.data());
  uint32_t family = 0;
  while (family < qn && !(qfs[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
  if (family == qn) { std::fprintf(stderr, "no compute queue\n"); return 1; }

  // Enable 16-bit storage when the device has it, and tell reach.
  VkPhysicalDeviceVulkan11Features have11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 have{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &have11};
  vkGetPhysicalDeviceFeatures2(phys, &have);
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.storageBuffer16BitAccess = have11.storageBuffer16BitAccess;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};

  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  VkDevice device;
  VK(vkCreateDevice(phys, &dci, nullptr, &device));
  HOST_DEVICE(HOST_LOAD_DEVICE)
  VkQueue queue;
  vkGetDeviceQueue(device, family, 0, &queue);

  // The host's per-frame workload: a 4 MiB buffer filled with the frame number, copied to another.
  const VkDeviceSize bytes = 4u << 20;
  VkBuffer bufs[2];
  VkDeviceMemory mems[2];
  for (int i = 0; i < 2; ++i) {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VK(vkCreateBuffer(device, &bci, nullptr, &bufs[i]));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, bufs[i], &req);
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = find_memory(phys, req.memoryTypeBits,
                                      i == 1 ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                             : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VK(vkAllocateMemory(device, &mai, nullptr, &mems[i]));
    VK(vkBindBufferMemory(device, bufs[i], mems[i], 0));
  }
  void* readback = nullptr;
  VK(vkMapMemory(device, mems[1], 0, bytes, 0, &readback));

  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = family;
  VkCommandPool pool;
  VK(vkCreateCommandPool(device, &cpi, nullptr, &pool));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = pool;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  VkCommandBuffer cmd;
  VK(vkAllocateCommandBuffers(device, &cai, &cmd));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  fci.flags = VK_FENCE_CREATE_SIGNALED_BIT;
  VkFence frame_fence;
  VK(vkCreateFence(device, &fci, nullptr, &frame_fence));

  // ---- reach on the host's device and queue.
  reach_adopt_params ap = reach_adopt_default_params();
  ap.get_instance_proc_addr = reinterpret_cast<void*>(vkGetInstanceProcAddr);   // reach calls Vulkan through it
  ap.instance = instance;
  ap.physical_device = phys;
  ap.device = device;
  ap.queue_family = family;
  ap.queue = queue;
  ap.queue_lock = queue_lock;
  ap.storage_16bit_enabled = f11.storageBuffer16BitAccess;
  reach_device* rdev = nullptr;
  REACH(reach_device_adopt(&ap, &rdev));
  reach_model* model = nullptr;
  REACH(reach_model_load(rdev, model_dir.c_str(), nullptr, &model));
  std::vector<int32_t> ids(prompt.size() + 8);
  size_t n_ids = 0;
  REACH(reach_tokenize(model, prompt.data(), prompt.size(), 1, ids.data(), ids.size(), &n_ids));
  reach_session_params sp = reach_session_default_params();
  sp.context = uint32_t(n_ids + frames + 1);
  sp.sampling.temperature = 0;   // greedy: the output is reproducible
  reach_session* session = nullptr;
  REACH(reach_session_create(model, &sp, &session));
  reach_stream* stream = nullptr;
  REACH(reach_stream_create(model, 1, &stream));
  // Prefill once (a loading screen); then one token per frame.
  REACH(reach_session_prefill(session, ids.data(), n_ids));
  int32_t token = 0;
  int eos = 0;
  REACH(reach_session_sample(session, &token, &eos));

  std::printf("device: %s, mode %s, prompt %zu tokens\n", props.deviceName, mode.c_str(), n_ids);
  std::string text;
  bool step_pending = false;
  int tokens_done = 0;
  auto emit = [&](int32_t t) {
    const char* piece;
    size_t len;
    REACH(reach_stream_push(stream, t, &piece, &len));
    text.append(piece, len);
    tokens_done++;
  };
  emit(token);   // the first token comes from the prefill
  double total_ms = 0;
  for (int frame = 0; frame < frames; ++frame) {
    auto t0 = std::chrono::steady_clock::now();
    VK(vkWaitForFences(device, 1, &frame_fence, VK_TRUE, UINT64_MAX));   // last frame done
    const uint32_t seen = frame ? static_cast<const uint32_t*>(readback)[bytes / 4 - 1] : 0;
    bool produced = false;
    if (step_pending) {   // last frame's reach step has finished with the frame
      int done = 1;
      if (mode == "record") REACH(reach_session_end_decode(session));
      else REACH(reach_session_poll(session, &done));
      if (done) {
        REACH(reach_session_sample(session, &token, &eos));
        emit(token);
        produced = true;
        step_pending = false;
      }
    }
    VK(vkResetFences(device, 1, &frame_fence));
    VK(vkResetCommandBuffer(cmd, 0));
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    VK(vkBeginCommandBuffer(cmd, &bi));
    // The host's own work.
    vkCmdFillBuffer(cmd, bufs[0], 0, bytes, uint32_t(frame + 1));
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                         nullptr);
    VkBufferCopy region{0, 0, bytes};
    vkCmdCopyBuffer(cmd, bufs[0], bufs[1], 1, &region);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0,
                         nullptr);
    const bool want_step = !eos && !step_pending && tokens_done < frames;
    if (want_step && mode == "record") {   // reach's dispatches go into the host's frame
      REACH(reach_session_record_decode(session, cmd));
      REACH(reach_session_begin_decode(session, token));
      step_pending = true;
    }
    VK(vkEndCommandBuffer(cmd));
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    {
      std::lock_guard<std::mutex> l(g_queue_mutex);
      VK(vkQueueSubmit(queue, 1, &si, frame_fence));
    }
    if (want_step && mode == "async") {   // reach submits on the shared queue itself
      REACH(reach_session_step_async(session, token));
      step_pending = true;
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total_ms += ms;
    std::printf("frame %2d: %6.2f ms  host buffer check %s%s%s\n", frame, ms,
                frame == 0 || seen == uint32_t(frame) ? "ok" : "BAD", produced ? "  token " : "",
                produced ? std::to_string(token).c_str() : "");
  }
  VK(vkWaitForFences(device, 1, &frame_fence, VK_TRUE, UINT64_MAX));
  if (step_pending) {
    if (mode == "record") REACH(reach_session_end_decode(session));
    else { int done = 0; REACH(reach_session_wait(session, UINT64_MAX, &done)); }
    REACH(reach_session_sample(session, &token, &eos));
    emit(token);
  }
  const char* rest;
  size_t len;
  REACH(reach_stream_flush(stream, &rest, &len));
  text.append(rest, len);
  std::printf("text: %s%s\n", prompt.c_str(), text.c_str());
  std::printf("%d frames, %.2f ms per frame on average, %d tokens\n", frames, total_ms / frames, tokens_done);

  // reach first (it waits for its work), then the host's objects.
  REACH(reach_stream_free(stream));
  REACH(reach_session_free(session));
  REACH(reach_model_free(model));
  REACH(reach_device_free(rdev));
  vkDestroyFence(device, frame_fence, nullptr);
  vkDestroyCommandPool(device, pool, nullptr);
  vkUnmapMemory(device, mems[1]);
  for (int i = 0; i < 2; ++i) {
    vkDestroyBuffer(device, bufs[i], nullptr);
    vkFreeMemory(device, mems[i], nullptr);
  }
  vkDestroyDevice(device, nullptr);
  vkDestroyInstance(instance, nullptr);
  return 0;
}
