#pragma once
// Host <-> device copies.  Mapped (unified-memory) buffers are plain memcpy;
// otherwise data moves in chunks through one reusable staging buffer.
#include <cstdint>
#include <functional>
#include <memory>

#include "engine/memory.hpp"

namespace reach {

class CommandList;

class Transfer {
 public:
  Transfer(Allocator& allocator, VkDeviceSize staging_bytes = 32ull << 20);
  ~Transfer();
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  // progress (optional) receives the bytes done after each chunk.
  void upload(const Buffer& dst, VkDeviceSize dst_offset, const void* src, VkDeviceSize bytes,
              const std::function<void(uint64_t)>& progress = {});
  void download(const Buffer& src, VkDeviceSize src_offset, void* dst, VkDeviceSize bytes);
  // Always go through the staging buffer (tests exercise the discrete-GPU path on lavapipe).
  void set_force_staging(bool on) { force_staging_ = on; }

 private:
  void ensure_staging();
  Allocator& allocator_;
  VkDeviceSize staging_bytes_;
  Buffer staging_;
  std::unique_ptr<CommandList> cmd_;
  bool force_staging_ = false;
};

}  // namespace reach
