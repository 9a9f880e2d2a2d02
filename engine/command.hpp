#pragma once
// Command recording: record once, submit many times.  A decode step is the
// same recorded command buffer every token; only buffer contents change.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "engine/memory.hpp"
#include "engine/pipeline.hpp"

namespace reach {

class Device;

struct KernelTiming {
  std::string label;
  double ns = 0;
};

class CommandList {
 public:
  // profile: write a timestamp after every dispatch (for `reach bench --profile`).
  // timed: a timestamp when the work before this list is done and one when this list's is (elapsed_ns()),
  // two queries per submission, for keeping each submission under a time bound.  Both need timestamps
  // (Capabilities::timestamps) and are off without them.
  explicit CommandList(Device& device, bool profile = false, bool timed = false);
  // Record into a command buffer the host owns (frame-budget embedding); reach
  // never submits it.  The buffer must be in the recording state.
  CommandList(Device& device, VkCommandBuffer external);
  ~CommandList();
  CommandList(const CommandList&) = delete;
  CommandList& operator=(const CommandList&) = delete;

  void begin();   // drops what was recorded and starts again
  // Bindings the pipeline marks as texel buffers (Pipeline::texel_buffers) get
  // a VkBufferView of p.texel_formats[binding] over their range, owned by this list
  // until the next begin() (offset: minTexelBufferOffsetAlignment; size: a
  // multiple of the texel size, at most maxTexelBufferElements texels).
  void dispatch(const Pipeline& p, std::span<const BufferRange> buffers, const void* push, uint32_t push_bytes,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1, const char* label = nullptr);
  void dispatch(const Pipeline& p, std::initializer_list<BufferRange> buffers, const void* push, uint32_t push_bytes,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1, const char* label = nullptr) {
    dispatch(p, std::span<const BufferRange>(buffers.begin(), buffers.size()), push, push_bytes, groups_x, groups_y,
             groups_z, label);
  }
  // The dispatches recorded from here until clear_indirect() take their group counts from `args` (one
  // VkDispatchIndirectCommand of 3 uint32 each, consecutive, in recording order; written by a kernel before a
  // barrier), not their own: a count of 0 skips the work on the device.  The counts they would have had are
  // kept (indirect_grids()) for the kernel that writes args.
  void set_indirect(const BufferRange& args);
  void clear_indirect() { indirect_ = {}; }
  const std::vector<std::array<uint32_t, 3>>& indirect_grids() const { return indirect_grids_; }
  // Compute/transfer writes before this point are visible to reads after it (indirect group counts too).
  void barrier();
  void copy(const BufferRange& src, const BufferRange& dst);
  void fill(const BufferRange& dst, uint32_t word);
  void end();
  // Keeps b (scratch a recorded dispatch uses) alive until the next begin() or the list's end.
  const Buffer& keep(Buffer b);

  // Submitting, polling and waiting (Kompute's eval / evalAsync / evalAwait).
  // A failed wait or poll (device lost ...) throws and ends the submission.
  void submit();   // may be called again after wait() without re-recording
  // As submit, the work starting only once `timeline` (a timeline semaphore) reaches `value`: a host or
  // another queue holds it back.  Needs Capabilities::timeline_semaphore.
  void submit_after(VkSemaphore timeline, uint64_t value);
  // Without blocking: true when nothing is in flight (a finished submission
  // is over: its results are visible to the host), false while it runs.
  bool poll();
  // As poll, waiting up to timeout_ns; false on timeout (nothing changed).
  bool wait_for(uint64_t timeout_ns);
  void wait() { wait_for(UINT64_MAX); }
  void run() { submit(); wait(); }
  bool pending() const { return pending_; }

  VkCommandBuffer handle() const { return cmd_; }
  // Signalled when a submission completes, for hosts that wait on it
  // themselves (then poll() to end the submission).  Never reset it:
  // submit() does.  VK_NULL_HANDLE over a host command buffer.
  VkFence fence() const { return fence_; }
  uint32_t dispatch_count() const { return dispatches_; }
  uint32_t barrier_count() const { return barriers_; }   // barrier() calls since begin()
  bool profiling() const { return profile_; }
  // After wait(): GPU time of each dispatch, in recording order.
  std::vector<KernelTiming> timings() const;
  bool timed() const { return timed_; }
  // After wait(): GPU ns of the last submission's work (its own, not time spent queued behind earlier
  // submissions); -1 when not timed.
  double elapsed_ns() const;

 private:
  void submit_waiting(VkSemaphore timeline, uint64_t value);
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);
  VkBufferView texel_view(const Pipeline& p, uint32_t binding, const BufferRange& b);

  Device& device_;
  bool external_ = false;
  bool profile_ = false;
  bool timed_ = false;
  VkQueryPool time_pool_ = VK_NULL_HANDLE;   // timed: [start, end]
  bool pending_ = false;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> desc_pools_;
  std::vector<VkBufferView> views_;   // texel-buffer views of what is recorded
  std::vector<std::unique_ptr<Buffer>> kept_;   // keep(): scratch of what is recorded
  size_t desc_pool_used_ = 0;     // index of the pool in use
  VkQueryPool query_pool_ = VK_NULL_HANDLE;
  uint32_t query_capacity_ = 0;
  std::vector<std::string> labels_;
  uint32_t dispatches_ = 0;
  uint32_t barriers_ = 0;
  BufferRange indirect_{};    // size 0: direct dispatches
  uint32_t indirect_used_ = 0;
  std::vector<std::array<uint32_t, 3>> indirect_grids_;
};

}  // namespace reach
