#pragma once
// Device memory: a block suballocator with separate arenas, so weights, the
// KV cache and per-step scratch never fragment each other, and allocation
// counts stay far below maxMemoryAllocationCount.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

namespace reach {

class Device;

enum class Arena : uint8_t { weights = 0, cache, scratch, staging, readback, count_ };
const char* arena_name(Arena a);
// Whether buffers of this arena may back uniform texel buffers (the device-local
// arenas: weights, caches, activations), for the kernels' texel variants.
bool arena_texel_readable(Arena a);

// A window of a buffer as a descriptor binding sees it: never VK_WHOLE_SIZE.
struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;
};

class Allocator;

// One VkBuffer over a suballocated range of a block.  Move-only; frees on destruction.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  // Host pointer when the memory is host-visible (unified memory, staging), else nullptr.
  void* mapped() const { return mapped_; }
  Arena arena() const { return arena_; }
  const std::string& label() const { return label_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
  // [offset, offset+size) of this buffer; size = rest when omitted.  Throws if out of bounds.
  BufferRange range(VkDeviceSize offset = 0, VkDeviceSize size = VK_WHOLE_SIZE) const;

 private:
  friend class Allocator;
  Allocator* owner_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  uint32_t block_ = 0;
  VkDeviceSize block_offset_ = 0;
  VkDeviceSize reserved_ = 0;
  void* mapped_ = nullptr;
  Arena arena_ = Arena::scratch;
  std::string label_;
};

struct ArenaStats {
  uint64_t blocks = 0;
  uint64_t reserved_bytes = 0;   // VkDeviceMemory held
  uint64_t used_bytes = 0;       // handed out to buffers
  uint64_t buffers = 0;
};

// What a request in one arena can still get, checked before anything is
// allocated (a model or KV cache too large for the device is refused with its
// sizes instead of failing halfway through an upload).
struct MemoryHeadroom {
  uint32_t heap = 0;
  uint64_t heap_size = 0;
  uint64_t limit = 0;        // the budget (VK_EXT_memory_budget) or the heap size; CPU devices: also host memory
  uint64_t available = 0;    // bytes a request may still take
  bool budget_reported = false;
  std::string describe() const;   // "heap 0 of 2048 MiB, budget 1800 MiB (VK_EXT_memory_budget)"
};

class Allocator {
 public:
  explicit Allocator(Device& device, VkDeviceSize block_size = 256ull << 20);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Device-local for weights/cache/scratch (host-visible too on unified memory);
  // host-visible for staging/readback.  Throws Error(out_of_memory) naming the label.
  Buffer allocate(Arena arena, VkDeviceSize size, const std::string& label);
  // Frees blocks that hold no buffer (e.g. after a model is unloaded).
  void trim();
  ArenaStats stats(Arena arena) const;
  Device& device() const { return device_; }

  // The heap `arena` allocates from and what is left on it: the budget minus
  // the process's usage where the device reports one, else the heap size minus
  // this allocator's use; free space in this allocator's blocks counts as left.
  MemoryHeadroom headroom(Arena arena) const;
  // Throws Error(out_of_memory) when `bytes` more in `arena` exceed headroom():
  // "<what> needs X MiB, but the device has only Y MiB left (...) - <advice>".
  void require(Arena arena, uint64_t bytes, const std::string& what, const std::string& advice) const;

  // Testing: make the n-th vkAllocateMemory from now fail (0 = the next one); -1 disables.
  void inject_allocation_failure(int after_n) { fail_after_ = after_n; }
  // Testing: headroom() reports at most `bytes` available (UINT64_MAX: the device's own figure).
  void limit_headroom(uint64_t bytes) { headroom_cap_ = bytes; }

 private:
  friend class Buffer;
  struct Range { VkDeviceSize offset, size; };
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceSize size = 0;
    Arena arena = Arena::scratch;
    uint32_t memory_type = 0;
    void* mapped = nullptr;
    std::vector<Range> free;   // sorted by offset, coalesced
    uint64_t live = 0;
  };
  bool suballocate(Block& b, VkDeviceSize size, VkDeviceSize align, VkDeviceSize& offset);
  void memory_flags(Arena arena, VkMemoryPropertyFlags& required, VkMemoryPropertyFlags& preferred) const;
  void release(Buffer& b);
  uint32_t new_block(Arena arena, uint32_t memory_type, VkDeviceSize size, const std::string& label);

  Device& device_;
  VkDeviceSize block_size_;
  std::vector<Block> blocks_;   // destroyed blocks keep their slot (memory = null)
  int fail_after_ = -1;
  uint64_t headroom_cap_ = UINT64_MAX;
};

}  // namespace reach
