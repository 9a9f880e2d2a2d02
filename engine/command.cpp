#include <algorithm>

#include "engine/command.hpp"

#include "engine/device.hpp"
#include "engine/vk_check.hpp"

namespace reach {

namespace {
constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kDescriptorsPerPool = kSetsPerPool * 8;
constexpr uint32_t kMaxTimestamps = 4096;
}  // namespace

CommandList::CommandList(Device& device, bool profile, bool timed) : device_(device) {
  profile_ = profile && device.caps().timestamps;
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = device.queue_family();
  vk_check(device_.vk().vkCreateCommandPool(device.handle(), &pi, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult r = device_.vk().vkAllocateCommandBuffers(device.handle(), &ai, &cmd_);
  if (r < 0) { device_.vk().vkDestroyCommandPool(device.handle(), pool_, nullptr); vk_check(r, "vkAllocateCommandBuffers"); }
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  r = device_.vk().vkCreateFence(device.handle(), &fi, nullptr, &fence_);
  if (r < 0) { device_.vk().vkDestroyCommandPool(device.handle(), pool_, nullptr); vk_check(r, "vkCreateFence"); }
  if (profile_) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = kMaxTimestamps;
    if (device_.vk().vkCreateQueryPool(device.handle(), &qi, nullptr, &query_pool_) == VK_SUCCESS) query_capacity_ = kMaxTimestamps;
    else profile_ = false;
  }
  if (timed && device.caps().timestamps) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2;
    timed_ = device_.vk().vkCreateQueryPool(device.handle(), &qi, nullptr, &time_pool_) == VK_SUCCESS;
  }
}

CommandList::CommandList(Device& device, VkCommandBuffer external) : device_(device), external_(true), cmd_(external) {}

CommandList::~CommandList() {
  VkDevice d = device_.handle();
  // The GPU may still read the descriptor sets and the command buffer: let it finish.  On a lost device
  // the wait returns VK_ERROR_DEVICE_LOST at once, which changes nothing here: never throw.
  if (pending_) device_.vk().vkWaitForFences(d, 1, &fence_, VK_TRUE, UINT64_MAX);
  for (auto p : desc_pools_) device_.vk().vkDestroyDescriptorPool(d, p, nullptr);
  for (auto v : views_) device_.vk().vkDestroyBufferView(d, v, nullptr);
  if (query_pool_) device_.vk().vkDestroyQueryPool(d, query_pool_, nullptr);
  if (time_pool_) device_.vk().vkDestroyQueryPool(d, time_pool_, nullptr);
  if (fence_) device_.vk().vkDestroyFence(d, fence_, nullptr);
  if (pool_) device_.vk().vkDestroyCommandPool(d, pool_, nullptr);
}

const Buffer& CommandList::keep(Buffer b) {
  kept_.push_back(std::make_unique<Buffer>(std::move(b)));
  return *kept_.back();
}

void CommandList::begin() {
  if (pending_) wait();
  for (auto p : desc_pools_) device_.vk().vkResetDescriptorPool(device_.handle(), p, 0);
  for (auto v : views_) device_.vk().vkDestroyBufferView(device_.handle(), v, nullptr);
  views_.clear();
  kept_.clear();
  desc_pool_used_ = 0;
  labels_.clear();
  dispatches_ = 0;
  barriers_ = 0;
  clear_indirect();
  indirect_grids_.clear();
  if (!external_) {
    vk_check(device_.vk().vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk_check(device_.vk().vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    if (profile_) {
      device_.vk().vkCmdResetQueryPool(cmd_, query_pool_, 0, query_capacity_);
      device_.vk().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, query_pool_, 0);
    }
    if (timed_) {
      // Bottom of pipe: written once everything submitted before has finished, so a list queued behind
      // another is timed from when that one ends.
      device_.vk().vkCmdResetQueryPool(cmd_, time_pool_, 0, 2);
      device_.vk().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, time_pool_, 0);
    }
  }
}

VkDescriptorSet CommandList::allocate_set(VkDescriptorSetLayout layout) {
  for (;;) {
    if (desc_pool_used_ == desc_pools_.size()) {
      const VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kDescriptorsPerPool},
                                             {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, kSetsPerPool * 2}};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.maxSets = kSetsPerPool;
      ci.poolSizeCount = 2;
      ci.pPoolSizes = sizes;
      VkDescriptorPool pool;
      vk_check(device_.vk().vkCreateDescriptorPool(device_.handle(), &ci, nullptr, &pool), "vkCreateDescriptorPool");
      desc_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = desc_pools_[desc_pool_used_];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set;
    VkResult r = device_.vk().vkAllocateDescriptorSets(device_.handle(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) vk_check(r, "vkAllocateDescriptorSets");
    desc_pool_used_++;
  }
}

static uint32_t texel_bytes(VkFormat f) {
  switch (f) {
    case VK_FORMAT_R32G32B32A32_SFLOAT:
    case VK_FORMAT_R32G32B32A32_UINT: return 16;
    case VK_FORMAT_R16G16B16A16_SFLOAT:
    case VK_FORMAT_R16G16B16A16_UINT: return 8;
    case VK_FORMAT_R32_SFLOAT:
    case VK_FORMAT_R32_UINT: return 4;
    case VK_FORMAT_R16_SFLOAT:
    case VK_FORMAT_R16_UINT: return 2;
    default: return 0;
  }
}

VkBufferView CommandList::texel_view(const Pipeline& p, uint32_t binding, const BufferRange& b) {
  const uint64_t texel_align = device_.caps().min_texel_buffer_offset_alignment;
  const uint64_t max_texels = device_.caps().max_texel_buffer_elements;
  const VkFormat format = p.texel_formats.at(binding);
  const uint32_t tb = texel_bytes(format);
  const std::string where = p.name + ": texel binding " + std::to_string(binding);
  if (tb == 0) throw Error(ErrorCode::internal, where + ": unsupported texel format");
  if (b.offset % texel_align)
    throw Error(ErrorCode::internal, where + " offset " + std::to_string(b.offset) +
                                         " is not aligned to minTexelBufferOffsetAlignment");
  if (b.size == 0 || b.size % tb || b.size / tb > max_texels)
    throw Error(ErrorCode::internal, where + " spans " + std::to_string(b.size) +
                                         " bytes: not a whole number of texels or more than maxTexelBufferElements");
  VkBufferViewCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  ci.buffer = b.buffer;
  ci.format = format;
  ci.offset = b.offset;
  ci.range = b.size;
  VkBufferView view;
  vk_check(device_.vk().vkCreateBufferView(device_.handle(), &ci, nullptr, &view), "vkCreateBufferView");
  views_.push_back(view);
  return view;
}

void CommandList::dispatch(const Pipeline& p, std::span<const BufferRange> buffers, const void* push,
                           uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz, const char* label) {
  if (buffers.size() != p.buffers)
    throw Error(ErrorCode::internal, p.name + ": " + std::to_string(buffers.size()) + " buffers bound, pipeline has " +
                                         std::to_string(p.buffers));
  if (push_bytes != p.push_bytes)
    throw Error(ErrorCode::internal, p.name + ": push constants of " + std::to_string(push_bytes) + " bytes, pipeline expects " +
                                         std::to_string(p.push_bytes));
  const auto& caps = device_.caps();
  if (gx == 0 || gy == 0 || gz == 0) return;   // nothing to do
  if (gx > caps.max_workgroup_count[0] || gy > caps.max_workgroup_count[1] || gz > caps.max_workgroup_count[2])
    throw Error(ErrorCode::internal, p.name + ": dispatch of " + std::to_string(gx) + "x" + std::to_string(gy) + "x" +
                                         std::to_string(gz) + " groups exceeds maxComputeWorkGroupCount");
  VkDescriptorSet set = allocate_set(p.set_layout);
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  std::vector<VkBufferView> views(buffers.size(), VK_NULL_HANDLE);
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto& b = buffers[i];
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    if (p.texel_buffers >> i & 1) {
      views[i] = texel_view(p, static_cast<uint32_t>(i), b);
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
      writes[i].pTexelBufferView = &views[i];
      continue;
    }
    if (b.size > caps.max_storage_buffer_range)
      throw Error(ErrorCode::internal, p.name + ": binding " + std::to_string(i) + " spans " + std::to_string(b.size) +
                                           " bytes, more than maxStorageBufferRange; split it into ranges");
    if (b.offset % caps.min_storage_buffer_offset_alignment)
      throw Error(ErrorCode::internal, p.name + ": binding " + std::to_string(i) + " offset " + std::to_string(b.offset) +
                                           " is not aligned to minStorageBufferOffsetAlignment");
    infos[i] = {b.buffer, b.offset, b.size};
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  device_.vk().vkUpdateDescriptorSets(device_.handle(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  device_.vk().vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  device_.vk().vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes) device_.vk().vkCmdPushConstants(cmd_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  if (indirect_.size) {
    if (uint64_t(indirect_used_ + 1) * 12 > indirect_.size)
      throw Error(ErrorCode::internal, p.name + ": more indirect dispatches than set_indirect's range holds");
    indirect_grids_.push_back({gx, gy, gz});
    device_.vk().vkCmdDispatchIndirect(cmd_, indirect_.buffer, indirect_.offset + uint64_t(indirect_used_++) * 12);
  } else {
    device_.vk().vkCmdDispatch(cmd_, gx, gy, gz);
  }
  dispatches_++;
  if (profile_ && labels_.size() + 1 < query_capacity_) {
    labels_.push_back(label ? label : p.name);
    device_.vk().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, query_pool_, static_cast<uint32_t>(labels_.size()));
  }
}

void CommandList::set_indirect(const BufferRange& args) {
  indirect_ = args;
  indirect_used_ = 0;
  indirect_grids_.clear();
}

void CommandList::barrier() {
  ++barriers_;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT;
  device_.vk().vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                           VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
                       0, 1, &mb, 0, nullptr, 0, nullptr);
}

void CommandList::copy(const BufferRange& src, const BufferRange& dst) {
  if (src.size != dst.size) throw Error(ErrorCode::internal, "copy between ranges of different sizes");
  VkBufferCopy region{src.offset, dst.offset, src.size};
  device_.vk().vkCmdCopyBuffer(cmd_, src.buffer, dst.buffer, 1, &region);
}

void CommandList::fill(const BufferRange& dst, uint32_t word) {
  device_.vk().vkCmdFillBuffer(cmd_, dst.buffer, dst.offset, dst.size, word);
}

void CommandList::end() {
  if (external_) return;
  barrier();   // results visible to the host and to whatever runs next
  if (timed_) device_.vk().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, time_pool_, 1);
  vk_check(device_.vk().vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
}

void CommandList::submit() { submit_waiting(VK_NULL_HANDLE, 0); }

void CommandList::submit_after(VkSemaphore timeline, uint64_t value) {
  if (!device_.caps().timeline_semaphore)
    throw Error(ErrorCode::unsupported, "waiting on a timeline semaphore needs the device's timelineSemaphore feature");
  submit_waiting(timeline, value);
}

void CommandList::submit_waiting(VkSemaphore timeline, uint64_t value) {
  if (external_) throw Error(ErrorCode::invalid_argument, "a command list over a host command buffer is submitted by the host");
  if (pending_) wait();
  device_.check_not_lost();
  vk_check(device_.vk().vkResetFences(device_.handle(), 1, &fence_), "vkResetFences");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  if (timeline != VK_NULL_HANDLE) {
    ti.waitSemaphoreValueCount = 1;
    ti.pWaitSemaphoreValues = &value;
    si.pNext = &ti;
    si.waitSemaphoreCount = 1;
    si.pWaitSemaphores = &timeline;
    si.pWaitDstStageMask = &stage;
  }
  device_.submit(si, fence_);
  pending_ = true;
}

bool CommandList::poll() {
  if (!pending_) return true;
  // Lost already: the fence is not asked again (pending_ stays, so the destructor still waits on it).
  device_.check_not_lost();
  VkResult r = device_.vk().vkGetFenceStatus(device_.handle(), fence_);
  if (r == VK_NOT_READY) return false;
  // An injected fault comes once the work is done, so nothing still runs over what the caller frees.
  if (r == VK_SUCCESS) r = device_.faults().next(FaultPoint::wait);
  pending_ = false;   // also on failure: the submission is over either way
  device_.check(r, "vkGetFenceStatus");
  return true;
}

bool CommandList::wait_for(uint64_t timeout_ns) {
  if (!pending_) return true;
  device_.check_not_lost();
  VkResult r = device_.vk().vkWaitForFences(device_.handle(), 1, &fence_, VK_TRUE, timeout_ns);
  if (r == VK_TIMEOUT) return false;
  if (r == VK_SUCCESS) r = device_.faults().next(FaultPoint::wait);
  pending_ = false;
  device_.check(r, "vkWaitForFences");
  return true;
}

std::vector<KernelTiming> CommandList::timings() const {
  std::vector<KernelTiming> out;
  if (!profile_ || labels_.empty()) return out;
  std::vector<uint64_t> ts(labels_.size() + 1);
  VkResult r = device_.vk().vkGetQueryPoolResults(device_.handle(), query_pool_, 0, static_cast<uint32_t>(ts.size()),
                                     ts.size() * sizeof(uint64_t), ts.data(), sizeof(uint64_t),
                                     VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  vk_check(r, "vkGetQueryPoolResults");
  const double period = device_.caps().timestamp_period_ns;
  for (size_t i = 0; i < labels_.size(); ++i) out.push_back({labels_[i], double(ts[i + 1] - ts[i]) * period});
  return out;
}

double CommandList::elapsed_ns() const {
  if (!timed_) return -1;
  uint64_t ts[2] = {0, 0};
  vk_check(device_.vk().vkGetQueryPoolResults(device_.handle(), time_pool_, 0, 2, sizeof ts, ts, sizeof(uint64_t),
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
           "vkGetQueryPoolResults");
  return ts[1] > ts[0] ? double(ts[1] - ts[0]) * device_.caps().timestamp_period_ns : 0.0;
}

}  // namespace reach
