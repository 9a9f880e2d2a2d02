#pragma once
// Compute pipelines from embedded SPIR-V, specialised by constants (tile
// sizes, subgroup size, head dim) and created lazily on first use.  The
// driver's VkPipelineCache is saved to disk, keyed by device and driver.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "engine/capabilities.hpp"
#include "engine/shader_registry.hpp"

namespace reach {

class Device;

// One specialization constant: its constant_id in the shader and its 32-bit
// value (bools as 0/1).  Kernels build these from typed structs generated from
// the same list the shader includes (kernels/spec.hpp), never by position.
struct SpecConstant {
  uint32_t id = 0;
  uint32_t value = 0;
  auto operator<=>(const SpecConstant&) const = default;
};
using SpecConstants = std::vector<SpecConstant>;

struct PipelineDesc {
  ShaderId kernel{};             // embedded kernel (generated enum)
  uint32_t buffers = 1;          // storage buffers at set 0, bindings 0..buffers-1
  uint32_t push_bytes = 0;       // push-constant block size (<= 128 bytes)
  SpecConstants spec;            // specialization constants by id
  // The subgroup size the kernel needs (0: it runs at any width).  Pinned where the device allows
  // (Capabilities::can_pin_subgroup), else the device must have only that width: never assumed.
  uint32_t required_subgroup = 0;
  // Bit i set: binding i is a uniform texel buffer (samplerBuffer) of
  // texel_formats[i] instead of a storage buffer; CommandList::dispatch makes
  // the VkBufferView from the BufferRange bound there.
  static constexpr uint32_t kMaxTexelBindings = 16;
  uint32_t texel_buffers = 0;
  std::array<VkFormat, kMaxTexelBindings> texel_formats{};
  PipelineDesc& texel(uint32_t binding, VkFormat format) {
    texel_buffers |= 1u << binding;
    texel_formats.at(binding) = format;
    return *this;
  }

  bool operator<(const PipelineDesc& o) const;
};

// How a pipeline that needs subgroups of `n` lanes (PipelineDesc::required_subgroup) is created: true,
// pinned (a required size with full subgroups); false, unpinned, where the device has only that width.
// Throws (ErrorCode::internal, naming `kernel`) where the driver could run another width.
bool pin_required_subgroup(const Capabilities& caps, uint32_t n, const std::string& kernel);

struct Pipeline {
  std::string name;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t buffers = 0;
  uint32_t push_bytes = 0;
  uint32_t texel_buffers = 0;   // see PipelineDesc
  std::array<VkFormat, PipelineDesc::kMaxTexelBindings> texel_formats{};
};

class PipelineCache {
 public:
  // cache_dir "" or "-": no cache on disk.  Logs pipeline creation times when the device's settings
  // ask (Settings::pipeline_log).
  PipelineCache(Device& device, const std::string& cache_dir);
  ~PipelineCache();   // saves the VkPipelineCache
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  const Pipeline& get(const PipelineDesc& desc);
  size_t size() const { return pipelines_.size(); }
  // Cold-start accounting: how long vkCreateComputePipelines took in all, and how
  // many bytes of an earlier run's cache were handed to the driver.
  double create_seconds() const { return create_seconds_; }
  size_t loaded_cache_bytes() const { return loaded_cache_bytes_; }
  const std::string& cache_file() const { return file_; }
  void save() const;

 private:
  Device& device_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::string file_;
  bool log_ = false;
  double create_seconds_ = 0;
  size_t loaded_cache_bytes_ = 0;
  std::map<PipelineDesc, std::unique_ptr<Pipeline>> pipelines_;
  std::mutex mutex_;
};

}  // namespace reach
