#include "engine/memory.hpp"

#include <algorithm>

#include "base/checked.hpp"
#include "base/platform/process.hpp"
#include "engine/device.hpp"
#include "engine/vk_check.hpp"

namespace reach {

const char* arena_name(Arena a) {
  switch (a) {
    case Arena::weights: return "weights";
    case Arena::cache: return "kv-cache";
    case Arena::scratch: return "scratch";
    case Arena::staging: return "staging";
    case Arena::readback: return "readback";
    default: return "?";
  }
}

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

static std::string mib(VkDeviceSize b) { return std::to_string(mib_ceil(b)) + " MiB"; }
static std::string mib_floor(VkDeviceSize b) { return std::to_string(b >> 20) + " MiB"; }

Buffer::~Buffer() {
  if (owner_) owner_->release(*this);
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (owner_) owner_->release(*this);
    owner_ = o.owner_; buffer_ = o.buffer_; size_ = o.size_; block_ = o.block_;
    block_offset_ = o.block_offset_; reserved_ = o.reserved_; mapped_ = o.mapped_;
    arena_ = o.arena_; label_ = std::move(o.label_);
    o.owner_ = nullptr; o.buffer_ = VK_NULL_HANDLE; o.mapped_ = nullptr; o.size_ = 0;
  }
  return *this;
}

BufferRange Buffer::range(VkDeviceSize offset, VkDeviceSize size) const {
  if (size == VK_WHOLE_SIZE) size = offset <= size_ ? size_ - offset : 0;
  if (offset > size_ || size > size_ - offset)
    throw Error(ErrorCode::internal, "range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                                         ") is outside buffer '" + label_ + "' of " + std::to_string(size_) + " bytes");
  return {buffer_, offset, size};
}

Allocator::Allocator(Device& device, VkDeviceSize block_size) : device_(device), block_size_(block_size) {
  block_size_ = std::min<VkDeviceSize>(block_size_, device.caps().max_memory_allocation_size);
}

Allocator::~Allocator() {
  for (auto& b : blocks_)
    if (b.memory) device_.vk().vkFreeMemory(device_.handle(), b.memory, nullptr);
}

uint32_t Allocator::new_block(Arena arena, uint32_t memory_type, VkDeviceSize size, const std::string& label) {
  if (fail_after_ == 0) {
    fail_after_ = -1;
    throw Error(ErrorCode::out_of_memory, "out of device memory allocating " + mib(size) + " for '" + label +
                                              "' (" + arena_name(arena) + " arena, injected failure): "
                                              "use a smaller context or a smaller model");
  }
  if (fail_after_ > 0) --fail_after_;
  device_.check_not_lost();
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = size;
  ai.memoryTypeIndex = memory_type;
  Block b;
  // An injected fault (engine/fault_injection.hpp) stands for the allocation: nothing is allocated.
  VkResult r = device_.faults().next(FaultPoint::alloc);
  if (r == VK_SUCCESS) r = device_.vk().vkAllocateMemory(device_.handle(), &ai, nullptr, &b.memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    auto w = stats(Arena::weights), c = stats(Arena::cache), s = stats(Arena::scratch);
    throw Error(ErrorCode::out_of_memory,
                "out of device memory allocating " + mib(size) + " for '" + label + "' (" + arena_name(arena) +
                    " arena; held: weights " + mib(w.reserved_bytes) + ", kv-cache " + mib(c.reserved_bytes) +
                    ", scratch " + mib(s.reserved_bytes) + "): use a smaller context or a smaller model");
  }
  device_.check(r, "vkAllocateMemory");
  b.size = size;
  b.arena = arena;
  b.memory_type = memory_type;
  b.free.push_back({0, size});
  if (device_.memory_properties().memoryTypes[memory_type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    r = device_.vk().vkMapMemory(device_.handle(), b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
    if (r < 0) {
      device_.vk().vkFreeMemory(device_.handle(), b.memory, nullptr);
      device_.check(r, "vkMapMemory");
    }
  }
  for (uint32_t i = 0; i < blocks_.size(); ++i)
    if (!blocks_[i].memory) { blocks_[i] = std::move(b); return i; }
  blocks_.push_back(std::move(b));
  return static_cast<uint32_t>(blocks_.size() - 1);
}

bool Allocator::suballocate(Block& b, VkDeviceSize size, VkDeviceSize align, VkDeviceSize& offset) {
  for (size_t i = 0; i < b.free.size(); ++i) {
    Range& r = b.free[i];
    VkDeviceSize start = align_up(r.offset, align);
    if (start + size > r.offset + r.size) continue;
    VkDeviceSize end = start + size, r_end = r.offset + r.size;
    Range before{r.offset, start - r.offset}, after{end, r_end - end};
    b.free.erase(b.free.begin() + i);
    if (after.size) b.free.insert(b.free.begin() + i, after);
    if (before.size) b.free.insert(b.free.begin() + i, before);
    offset = start;
    return true;
  }
  return false;
}

void Allocator::memory_flags(Arena arena, VkMemoryPropertyFlags& required, VkMemoryPropertyFlags& preferred) const {
  preferred = 0;
  if (arena == Arena::staging || arena == Arena::readback) {
    required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    preferred = arena == Arena::readback ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0;
  } else {
    required = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    // On unified memory (integrated GPUs, lavapipe) uploads become plain memcpy.
    if (device_.caps().unified_memory)
      preferred = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  }
}

namespace {

uint64_t host_memory_bytes() { return platform::physical_memory(); }

}  // namespace

std::string MemoryHeadroom::describe() const {
  std::string d = "heap " + std::to_string(heap) + " of " + mib_floor(heap_size);
  if (budget_reported) d += ", budget " + mib_floor(limit) + " (VK_EXT_memory_budget)";
  else if (limit > heap_size) d += "; a CPU device, so host memory " + mib_floor(limit) + " is the limit";
  return d;
}

MemoryHeadroom Allocator::headroom(Arena arena) const {
  VkMemoryPropertyFlags required = 0, preferred = 0;
  memory_flags(arena, required, preferred);
  const uint32_t type = device_.memory_type_index(~0u, required, preferred);
  MemoryHeadroom h;
  h.heap = device_.memory_properties().memoryTypes[type].heapIndex;
  const HeapBudget b = device_.heap_budget(h.heap);
  h.heap_size = b.size;
  h.budget_reported = b.reported;
  // This allocator's blocks on the heap: what they hold and the free space inside them.
  uint64_t reserved = 0, free = 0;
  for (const auto& blk : blocks_) {
    if (!blk.memory || device_.memory_properties().memoryTypes[blk.memory_type].heapIndex != h.heap) continue;
    reserved += blk.size;
    for (const auto& r : blk.free) free += r.size;
  }
  if (b.reported) {
    h.limit = b.budget;
    h.available = (b.budget > b.usage ? b.budget - b.usage : 0) + free;
  } else {
    // lavapipe reports a fixed 2 GiB heap but allocates from host memory and
    // does not enforce the heap size: on a CPU device host memory is the limit.
    h.limit = b.size;
    if (device_.caps().is_cpu()) h.limit = std::max(h.limit, host_memory_bytes());
    const uint64_t used = reserved - free;
    h.available = h.limit > used ? h.limit - used : 0;
  }
  h.available = std::min(h.available, headroom_cap_);
  return h;
}

void Allocator::require(Arena arena, uint64_t bytes, const std::string& what, const std::string& advice) const {
  const MemoryHeadroom h = headroom(arena);
  if (bytes <= h.available) return;
  throw Error(ErrorCode::out_of_memory, what + " needs " + mib(bytes) + ", but the device has only " +
                                            mib_floor(h.available) + " left for the " + arena_name(arena) + " arena (" +
                                            h.describe() + ") - " + advice);
}

bool arena_texel_readable(Arena a) {
  return a == Arena::weights || a == Arena::cache || a == Arena::scratch;
}

Buffer Allocator::allocate(Arena arena, VkDeviceSize size, const std::string& label) {
  if (size == 0) size = 4;
  const auto& caps = device_.caps();
  if (size > caps.max_buffer_size)
    throw Error(ErrorCode::out_of_memory, "'" + label + "' needs " + mib(size) + ", more than the device's maxBufferSize " +
                                              mib(caps.max_buffer_size));
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  // Indirect: a kernel may write the group counts of later dispatches (CommandList::set_indirect).
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
             VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
  // The kernels' texel variants for CPU devices (KernelConfig::weights_texel,
  // AttentionTuning::texel) read these through uniform texel buffers.
  if (arena_texel_readable(arena)) bi.usage |= VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  Buffer out;
  vk_check(device_.vk().vkCreateBuffer(device_.handle(), &bi, nullptr, &out.buffer_), "vkCreateBuffer");
  out.owner_ = this;
  out.size_ = size;
  out.arena_ = arena;
  out.label_ = label;
  VkMemoryRequirements req;
  device_.vk().vkGetBufferMemoryRequirements(device_.handle(), out.buffer_, &req);
  const VkDeviceSize align = std::max<VkDeviceSize>(req.alignment, 256);

  VkMemoryPropertyFlags required = 0, preferred = 0;
  memory_flags(arena, required, preferred);
  const uint32_t type = device_.memory_type_index(req.memoryTypeBits, required, preferred);

  uint32_t block = UINT32_MAX;
  VkDeviceSize offset = 0;
  for (uint32_t i = 0; i < blocks_.size() && block == UINT32_MAX; ++i) {
    Block& b = blocks_[i];
    if (b.memory && b.arena == arena && b.memory_type == type && suballocate(b, req.size, align, offset)) block = i;
  }
  if (block == UINT32_MAX) {
    const VkDeviceSize bsize = std::max(block_size_, align_up(req.size, align));
    block = new_block(arena, type, bsize, label);   // throws on failure; out's destructor frees the VkBuffer
    suballocate(blocks_[block], req.size, align, offset);
  }
  Block& b = blocks_[block];
  out.block_ = block;
  out.block_offset_ = offset;
  out.reserved_ = req.size;
  b.live++;
  vk_check(device_.vk().vkBindBufferMemory(device_.handle(), out.buffer_, b.memory, offset), "vkBindBufferMemory");
  if (b.mapped) out.mapped_ = static_cast<char*>(b.mapped) + offset;
  return out;
}

void Allocator::release(Buffer& buf) {
  if (buf.buffer_) device_.vk().vkDestroyBuffer(device_.handle(), buf.buffer_, nullptr);
  if (buf.reserved_ && buf.block_ < blocks_.size()) {
    Block& b = blocks_[buf.block_];
    Range r{buf.block_offset_, buf.reserved_};
    auto it = std::lower_bound(b.free.begin(), b.free.end(), r,
                               [](const Range& a, const Range& c) { return a.offset < c.offset; });
    it = b.free.insert(it, r);
    if (it + 1 != b.free.end() && it->offset + it->size == (it + 1)->offset) {
      it->size += (it + 1)->size;
      b.free.erase(it + 1);
    }
    if (it != b.free.begin() && (it - 1)->offset + (it - 1)->size == it->offset) {
      (it - 1)->size += it->size;
      b.free.erase(it);
    }
    b.live--;
  }
  buf.buffer_ = VK_NULL_HANDLE;
  buf.owner_ = nullptr;
  buf.reserved_ = 0;
  buf.mapped_ = nullptr;
}

void Allocator::trim() {
  for (auto& b : blocks_)
    if (b.memory && b.live == 0) {
      device_.vk().vkFreeMemory(device_.handle(), b.memory, nullptr);
      b = Block{};
    }
}

ArenaStats Allocator::stats(Arena arena) const {
  ArenaStats s;
  for (const auto& b : blocks_) {
    if (!b.memory || b.arena != arena) continue;
    s.blocks++;
    s.reserved_bytes += b.size;
    VkDeviceSize free = 0;
    for (const auto& r : b.free) free += r.size;
    s.used_bytes += b.size - free;
    s.buffers += b.live;
  }
  return s;
}

}  // namespace reach
