#include "engine/pipeline.hpp"

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "engine/device.hpp"
#include "engine/shader_registry.hpp"
#include "engine/vk_check.hpp"

namespace reach {

bool PipelineDesc::operator<(const PipelineDesc& o) const {
  return std::tie(kernel, buffers, push_bytes, spec, required_subgroup, texel_buffers, texel_formats) <
         std::tie(o.kernel, o.buffers, o.push_bytes, o.spec, o.required_subgroup, o.texel_buffers, o.texel_formats);
}

PipelineCache::PipelineCache(Device& device, const std::string& cache_dir)
    : device_(device), log_(device.settings().pipeline_log) {
  std::vector<char> initial;
  if (!cache_dir.empty() && cache_dir != "-") {
    const auto& c = device.caps();
    char key[128];
    std::snprintf(key, sizeof key, "pipelines-%04x-%04x-", c.vendor_id, c.device_id);
    std::string uuid;
    for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) {
      char h[3];
      std::snprintf(h, sizeof h, "%02x", c.pipeline_cache_uuid[i]);
      uuid += h;
    }
    file_ = cache_dir + "/" + key + uuid + ".bin";
    // Only a regular file of a sane size is read: a FIFO or a link to /dev/zero
    // in the cache directory would otherwise hang the start (the cache is an
    // optimisation: anything else is ignored).
    constexpr uintmax_t kMaxCacheBytes = uintmax_t{256} << 20;
    std::error_code ec;
    const uintmax_t size = std::filesystem::is_regular_file(file_, ec) ? std::filesystem::file_size(file_, ec) : 0;
    if (!ec && size > 0 && size <= kMaxCacheBytes) {
      std::ifstream in(file_, std::ios::binary);
      initial.resize(static_cast<size_t>(size));
      if (!in.read(initial.data(), static_cast<std::streamsize>(size))) initial.clear();
    }
    // The driver validates the header (vendor, device, UUID) and ignores a stale cache.
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  loaded_cache_bytes_ = initial.size();
  if (device_.vk().vkCreatePipelineCache(device.handle(), &ci, nullptr, &cache_) != VK_SUCCESS) {
    loaded_cache_bytes_ = 0;
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    vk_check(device_.vk().vkCreatePipelineCache(device.handle(), &ci, nullptr, &cache_), "vkCreatePipelineCache");
  }
}

void PipelineCache::save() const {
  if (file_.empty() || !cache_) return;
  size_t n = 0;
  if (device_.vk().vkGetPipelineCacheData(device_.handle(), cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
  std::vector<char> data(n);
  if (device_.vk().vkGetPipelineCacheData(device_.handle(), cache_, &n, data.data()) != VK_SUCCESS) return;
  // A cache is an optimisation: failing to write it is not an error.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file_).parent_path(), ec);
  const std::string tmp = file_ + ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(this));
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return;
    out.write(data.data(), static_cast<std::streamsize>(n));
  }
  std::filesystem::rename(tmp, file_, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

PipelineCache::~PipelineCache() {
  save();
  VkDevice d = device_.handle();
  for (auto& [desc, p] : pipelines_) {
    device_.vk().vkDestroyPipeline(d, p->pipeline, nullptr);
    device_.vk().vkDestroyPipelineLayout(d, p->layout, nullptr);
    device_.vk().vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
  }
  if (cache_) device_.vk().vkDestroyPipelineCache(d, cache_, nullptr);
}

bool pin_required_subgroup(const Capabilities& caps, uint32_t n, const std::string& kernel) {
  if (caps.can_pin_subgroup() && n >= caps.subgroup_min && n <= caps.subgroup_max) return true;
  if (caps.subgroup_min == n && caps.subgroup_max == n) return false;
  // Unpinned, the driver may run any width in [min, max]: a kernel sized for `n` lanes would be wrong.
  throw Error(ErrorCode::internal,
              kernel + " needs subgroups of " + std::to_string(n) + " lanes; this device runs " +
                  std::to_string(caps.subgroup_min) + "-" + std::to_string(caps.subgroup_max) +
                  (caps.can_pin_subgroup() ? "" : " and cannot pin a compute shader's size") +
                  " (its kernel planning should not have chosen this variant)");
}

const Pipeline& PipelineCache::get(const PipelineDesc& desc) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto it = pipelines_.find(desc); it != pipelines_.end()) return *it->second;

  const EmbeddedShader& code = embedded_shader(desc.kernel);
  const std::string name = code.name;
  if (!code.built())
    throw Error(ErrorCode::unsupported, name + " was not built (its compiler was missing when reach was built: "
                                               "run tools/setup.sh, then rebuild)");
  VkDevice d = device_.handle();
  auto p = std::make_unique<Pipeline>();
  p->name = name;
  p->buffers = desc.buffers;
  p->push_bytes = desc.push_bytes;
  p->texel_buffers = desc.texel_buffers;
  p->texel_formats = desc.texel_formats;
  for (uint32_t i = 0; i < 32; ++i)
    if ((desc.texel_buffers >> i & 1) &&
        (i >= PipelineDesc::kMaxTexelBindings || desc.texel_formats[i] == VK_FORMAT_UNDEFINED))
      throw Error(ErrorCode::internal, name + ": texel binding " + std::to_string(i) + " has no texel format");
  if (desc.push_bytes > device_.caps().max_push_constants)
    throw Error(ErrorCode::internal, name + ": push constants of " + std::to_string(desc.push_bytes) +
                                         " bytes exceed the device limit");

  const uint32_t texels = uint32_t(std::popcount(uint64_t(desc.texel_buffers) & ((uint64_t(1) << desc.buffers) - 1)));
  const Capabilities& caps = device_.caps();
  if (desc.buffers - texels > caps.max_stage_storage_buffers || texels > caps.max_stage_sampled ||
      desc.buffers > caps.max_stage_resources)
    throw Error(ErrorCode::unsupported,
                name + " binds " + std::to_string(desc.buffers - texels) + " storage and " + std::to_string(texels) +
                    " texel buffers; this device allows " + std::to_string(caps.max_stage_storage_buffers) + " and " +
                    std::to_string(caps.max_stage_sampled) + " per shader stage");
  std::vector<VkDescriptorSetLayoutBinding> bindings(desc.buffers);
  for (uint32_t i = 0; i < desc.buffers; ++i)
    bindings[i] = {i,
                   (desc.texel_buffers >> i & 1) ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                   1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo sl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  sl.bindingCount = desc.buffers;
  sl.pBindings = bindings.data();
  vk_check(device_.vk().vkCreateDescriptorSetLayout(d, &sl, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");

  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, desc.push_bytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p->set_layout;
  pl.pushConstantRangeCount = desc.push_bytes ? 1 : 0;
  pl.pPushConstantRanges = &pcr;
  VkResult r = device_.vk().vkCreatePipelineLayout(d, &pl, nullptr, &p->layout);
  if (r < 0) {
    device_.vk().vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
    vk_check(r, "vkCreatePipelineLayout");
  }

  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = code.words * 4;
  mi.pCode = code.code;
  VkShaderModule module = VK_NULL_HANDLE;
  r = device_.vk().vkCreateShaderModule(d, &mi, nullptr, &module);
  if (r < 0) {
    device_.vk().vkDestroyPipelineLayout(d, p->layout, nullptr);
    device_.vk().vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
    vk_check(r, ("vkCreateShaderModule(" + name + ")").c_str());
  }

  std::vector<VkSpecializationMapEntry> entries(desc.spec.size());
  std::vector<uint32_t> values(desc.spec.size());
  for (uint32_t i = 0; i < desc.spec.size(); ++i) {
    entries[i] = {desc.spec[i].id, i * 4u, 4};
    values[i] = desc.spec[i].value;
  }
  VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), values.size() * 4, values.data()};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  rss.requiredSubgroupSize = desc.required_subgroup;
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  if (desc.required_subgroup && pin_required_subgroup(caps, desc.required_subgroup, name)) {
    ci.stage.pNext = &rss;
    ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = desc.spec.empty() ? nullptr : &si;
  ci.layout = p->layout;
  const auto t0 = std::chrono::steady_clock::now();
  r = device_.vk().vkCreateComputePipelines(d, cache_, 1, &ci, nullptr, &p->pipeline);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  create_seconds_ += dt;
  // Settings::pipeline_log (REACH_PIPELINE_LOG=1): one line per pipeline created, to find the
  // variant a driver's compiler is slow on (a cold start is the sum of these).
  if (log_) {
    std::string spec;
    for (const auto& e : desc.spec) spec += " " + std::to_string(e.id) + "=" + std::to_string(e.value);
    std::fprintf(stderr, "pipeline %s [%s ] %.1f ms\n", name.c_str(), spec.c_str(), dt * 1e3);
  }
  device_.vk().vkDestroyShaderModule(d, module, nullptr);
  if (r < 0) {
    device_.vk().vkDestroyPipelineLayout(d, p->layout, nullptr);
    device_.vk().vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
    device_.check(r, ("vkCreateComputePipelines(" + name + ")").c_str());   // a lost device stays lost
  }
  auto& ref = *p;
  pipelines_.emplace(desc, std::move(p));
  return ref;
}

}  // namespace reach
