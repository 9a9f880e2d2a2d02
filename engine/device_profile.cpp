#include "engine/device_profile.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

// nlohmann's header directly: engine/ may not include runtime/formats (whose bounded parser is for
// untrusted downloads); a profile is a file the user names, read once, and capped in size below.
#include <nlohmann/json.hpp>

#include "base/error.hpp"

namespace reach {

namespace {

// ordered_json: "the file's first profile" is the first one written, not the first by name.
using Json = nlohmann::ordered_json;

// The gpuinfo.org reports are ~0.3 MB; a file 50x that is not a profile.
constexpr std::streamoff kMaxProfileBytes = 16ll << 20;

struct Reader {
  const std::string& file;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(ErrorCode::format, "device profile " + file + ": " + key + ": " + what +
                                       " (a Vulkan Profiles JSON file, e.g. from gpuinfo.org or the "
                                       "KhronosGroup/Vulkan-Profiles repository)");
  }
  const char* type_of(const Json& v) const { return v.type_name(); }
  const Json& object(const Json& v, const std::string& key) const {
    if (!v.is_object()) fail(key, std::string("expected an object, got ") + type_of(v));
    return v;
  }
  bool boolean(const Json& v, const std::string& key) const {
    if (!v.is_boolean()) fail(key, std::string("expected true or false, got ") + type_of(v));
    return v.get<bool>();
  }
  uint64_t number(const Json& v, const std::string& key) const {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(key, std::string("expected a whole number of 0 or more, got ") + (v.is_number() ? v.dump() : type_of(v)));
    return v.get<uint64_t>();
  }
  std::string string(const Json& v, const std::string& key) const {
    if (!v.is_string()) fail(key, std::string("expected a string, got ") + type_of(v));
    return v.get<std::string>();
  }
  // A flags member: a list of bit names (VK_SUBGROUP_FEATURE_*_BIT, VK_SHADER_STAGE_*).
  std::vector<std::string> names(const Json& v, const std::string& key) const {
    if (!v.is_array()) fail(key, std::string("expected a list of flag names, got ") + type_of(v));
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(string(v[i], key + "[" + std::to_string(i) + "]"));
    return out;
  }
  void dims(const Json& v, const std::string& key, uint32_t out[3]) const {
    if (!v.is_array() || v.size() != 3) fail(key, "expected a list of 3 whole numbers");
    for (size_t i = 0; i < 3; ++i)
      out[i] = std::max(out[i], uint32_t(std::min<uint64_t>(number(v[i], key + "[" + std::to_string(i) + "]"), UINT32_MAX)));
  }
};

VkSubgroupFeatureFlags subgroup_ops_of(const std::vector<std::string>& bits) {
  static const std::pair<const char*, VkSubgroupFeatureFlags> known[] = {
      {"VK_SUBGROUP_FEATURE_BASIC_BIT", VK_SUBGROUP_FEATURE_BASIC_BIT},
      {"VK_SUBGROUP_FEATURE_VOTE_BIT", VK_SUBGROUP_FEATURE_VOTE_BIT},
      {"VK_SUBGROUP_FEATURE_ARITHMETIC_BIT", VK_SUBGROUP_FEATURE_ARITHMETIC_BIT},
      {"VK_SUBGROUP_FEATURE_BALLOT_BIT", VK_SUBGROUP_FEATURE_BALLOT_BIT},
      {"VK_SUBGROUP_FEATURE_SHUFFLE_BIT", VK_SUBGROUP_FEATURE_SHUFFLE_BIT},
      {"VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT", VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT},
      {"VK_SUBGROUP_FEATURE_CLUSTERED_BIT", VK_SUBGROUP_FEATURE_CLUSTERED_BIT},
      {"VK_SUBGROUP_FEATURE_QUAD_BIT", VK_SUBGROUP_FEATURE_QUAD_BIT}};
  VkSubgroupFeatureFlags f = 0;
  for (const auto& b : bits)
    for (const auto& [name, bit] : known)
      if (b == name) f |= bit;
  return f;
}

// Whether compute is among the stages (VK_SHADER_STAGE_ALL includes it; ALL_GRAPHICS does not).
bool has_compute(const std::vector<std::string>& stages) {
  return std::find(stages.begin(), stages.end(), "VK_SHADER_STAGE_COMPUTE_BIT") != stages.end() ||
         std::find(stages.begin(), stages.end(), "VK_SHADER_STAGE_ALL") != stages.end();
}

uint32_t parse_api_version(const Reader& r, const Json& v, const std::string& key) {
  const std::string s = r.string(v, key);
  unsigned major = 0, minor = 0, patch = 0;
  if (std::sscanf(s.c_str(), "%u.%u.%u", &major, &minor, &patch) < 2)
    r.fail(key, "expected a version such as \"1.3.204\", got \"" + s + "\"");
  return VK_MAKE_API_VERSION(0, major, minor, patch);
}

void read_features(const Reader& r, const Json& feats, const std::string& key, DeviceProfile& p) {
  // A member counts wherever it appears: Vulkan12Features.shaderFloat16 and
  // ShaderFloat16Int8Features.shaderFloat16 say the same.  Features OR across blocks: a profile's
  // device has every block it requires.
  const std::pair<const char*, bool DeviceProfile::*> known[] = {
      {"shaderFloat16", &DeviceProfile::fp16_arithmetic},
      {"storageBuffer16BitAccess", &DeviceProfile::storage_16bit},
      {"storageBuffer8BitAccess", &DeviceProfile::storage_8bit},
      {"shaderInt8", &DeviceProfile::int8_arithmetic},
      {"shaderInt64", &DeviceProfile::int64},
      {"shaderIntegerDotProduct", &DeviceProfile::integer_dot},
      {"subgroupSizeControl", &DeviceProfile::subgroup_size_control_feature},
      {"computeFullSubgroups", &DeviceProfile::compute_full_subgroups},
      {"cooperativeMatrix", &DeviceProfile::cooperative_matrix_feature},
      {"vulkanMemoryModel", &DeviceProfile::vulkan_memory_model},
      {"vulkanMemoryModelDeviceScope", &DeviceProfile::vulkan_memory_model_device_scope},
      {"shaderBFloat16Type", &DeviceProfile::bf16}};
  for (const auto& [sname, sval] : r.object(feats, key).items()) {
    const std::string skey = key + "." + sname;
    for (const auto& [member, v] : r.object(sval, skey).items())
      for (const auto& [name, field] : known)
        if (member == name && r.boolean(v, skey + "." + member)) p.*field = true;
  }
}

void read_limits(const Reader& r, const Json& lim, const std::string& key, DeviceProfile& p) {
  const std::pair<const char*, uint32_t DeviceProfile::*> u32[] = {
      {"maxComputeSharedMemorySize", &DeviceProfile::max_shared_memory},
      {"maxComputeWorkGroupInvocations", &DeviceProfile::max_workgroup_invocations},
      {"maxPushConstantsSize", &DeviceProfile::max_push_constants},
      {"maxPerStageDescriptorStorageBuffers", &DeviceProfile::max_stage_storage_buffers},
      {"maxPerStageDescriptorSampledImages", &DeviceProfile::max_stage_sampled},
      {"maxPerStageResources", &DeviceProfile::max_stage_resources},
      {"maxDescriptorSetStorageBuffers", &DeviceProfile::max_set_storage_buffers}};
  const std::pair<const char*, uint64_t DeviceProfile::*> u64[] = {
      {"maxStorageBufferRange", &DeviceProfile::max_storage_buffer_range},
      {"maxTexelBufferElements", &DeviceProfile::max_texel_buffer_elements}};
  // Alignments: the smaller the better, so the smallest stated one holds.
  const std::pair<const char*, uint64_t DeviceProfile::*> align[] = {
      {"minStorageBufferOffsetAlignment", &DeviceProfile::min_storage_buffer_offset_alignment},
      {"minTexelBufferOffsetAlignment", &DeviceProfile::min_texel_buffer_offset_alignment}};
  for (const auto& [name, v] : r.object(lim, key).items()) {
    const std::string k = key + "." + name;
    for (const auto& [n, f] : u32)
      if (name == n) p.*f = std::max(p.*f, uint32_t(std::min<uint64_t>(r.number(v, k), UINT32_MAX)));
    for (const auto& [n, f] : u64)
      if (name == n) p.*f = std::max(p.*f, r.number(v, k));
    for (const auto& [n, f] : align)
      if (name == n) p.*f = std::max<uint64_t>(p.*f ? std::min(p.*f, r.number(v, k)) : r.number(v, k), 1);
    if (name == "maxComputeWorkGroupSize") r.dims(v, k, p.max_workgroup_size);
    if (name == "maxComputeWorkGroupCount") r.dims(v, k, p.max_workgroup_count);
  }
}

VkPhysicalDeviceType device_type_of(const std::string& s) {
  if (s == "VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU") return VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  if (s == "VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU") return VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  if (s == "VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU") return VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
  if (s == "VK_PHYSICAL_DEVICE_TYPE_CPU") return VK_PHYSICAL_DEVICE_TYPE_CPU;
  return VK_PHYSICAL_DEVICE_TYPE_OTHER;
}

void read_properties(const Reader& r, const Json& props, const std::string& key, DeviceProfile& p) {
  for (const auto& [sname, sval] : r.object(props, key).items()) {
    const std::string skey = key + "." + sname;
    for (const auto& [member, v] : r.object(sval, skey).items()) {
      const std::string k = skey + "." + member;
      if (member == "limits") read_limits(r, v, k, p);
      else if (member == "deviceName") p.device_name = r.string(v, k);
      else if (member == "deviceType") p.type = device_type_of(r.string(v, k));
      else if (member == "subgroupSize") p.subgroup_size = std::max<uint32_t>(p.subgroup_size, uint32_t(r.number(v, k)));
      else if (member == "minSubgroupSize") p.subgroup_min = uint32_t(r.number(v, k));
      else if (member == "maxSubgroupSize") p.subgroup_max = uint32_t(r.number(v, k));
      else if (member == "supportedOperations" || member == "subgroupSupportedOperations")
        p.subgroup_ops |= subgroup_ops_of(r.names(v, k));
      else if (member == "supportedStages" || member == "subgroupSupportedStages") {
        if (has_compute(r.names(v, k))) p.subgroup_stages |= VK_SHADER_STAGE_COMPUTE_BIT;
      } else if (member == "requiredSubgroupSizeStages") {
        p.required_subgroup_size_stages_stated = true;
        if (has_compute(r.names(v, k))) p.required_subgroup_size_stages |= VK_SHADER_STAGE_COMPUTE_BIT;
      } else if (member == "maxMemoryAllocationSize")
        p.max_memory_allocation_size = std::max(p.max_memory_allocation_size, r.number(v, k));
      else if (member == "maxBufferSize") p.max_buffer_size = std::max(p.max_buffer_size, r.number(v, k));
      else if (member == "integerDotProduct4x8BitPackedSignedAccelerated" && r.boolean(v, k))
        p.integer_dot_accelerated = true;
    }
  }
}

void read_formats(const Reader& r, const Json& formats, const std::string& key, DeviceProfile& p) {
  static const char* const names[6] = {"VK_FORMAT_R32G32B32A32_SFLOAT", "VK_FORMAT_R16G16B16A16_SFLOAT",
                                       "VK_FORMAT_R16G16B16A16_UINT", "VK_FORMAT_R32G32B32A32_UINT",
                                       "VK_FORMAT_R16_UINT", "VK_FORMAT_R32_UINT"};
  static_assert(std::size(names) == std::size(Capabilities::kTexelFormats));
  for (const auto& [fname, fval] : r.object(formats, key).items()) {
    for (size_t i = 0; i < std::size(names); ++i) {
      if (fname != names[i]) continue;
      const std::string fkey = key + "." + fname;
      bool uniform = false, stated = false;
      for (const auto& [sname, sval] : r.object(fval, fkey).items()) {
        if (sname != "VkFormatProperties" && sname != "VkFormatProperties2" && sname != "VkFormatProperties3") continue;
        const std::string skey = fkey + "." + sname;
        const auto it = r.object(sval, skey).find("bufferFeatures");
        if (it == sval.end()) continue;
        stated = true;
        for (const auto& b : r.names(*it, skey + ".bufferFeatures"))
          if (b == "VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT" || b == "VK_FORMAT_FEATURE_2_UNIFORM_TEXEL_BUFFER_BIT")
            uniform = true;
      }
      if (stated) p.uniform_texel[i] = uniform;
    }
  }
}

void read_capability(const Reader& r, const Json& cap, const std::string& key, DeviceProfile& p) {
  for (const auto& [section, v] : r.object(cap, key).items()) {
    const std::string k = key + "." + section;
    if (section == "extensions") {
      for (const auto& [ext, version] : r.object(v, k).items()) {
        r.number(version, k + "." + ext);
        p.extensions.push_back(ext);
      }
    } else if (section == "features") read_features(r, v, k, p);
    else if (section == "properties") read_properties(r, v, k, p);
    else if (section == "formats") read_formats(r, v, k, p);
  }
}

// The limits read_limits and read_properties raise from 0.
#define REACH_PROFILE_LIMITS(X)                                                                                     \
  X(max_shared_memory) X(max_workgroup_invocations) X(max_push_constants) X(max_stage_storage_buffers)              \
  X(max_stage_sampled) X(max_stage_resources) X(max_set_storage_buffers) X(max_storage_buffer_range)                \
  X(max_memory_allocation_size) X(max_buffer_size) X(min_storage_buffer_offset_alignment)                          \
  X(min_texel_buffer_offset_alignment) X(max_texel_buffer_elements)

void set_limits(DeviceProfile& p, uint32_t v) {
#define REACH_SET(f) p.f = v;
  REACH_PROFILE_LIMITS(REACH_SET)
#undef REACH_SET
  for (int i = 0; i < 3; ++i) p.max_workgroup_size[i] = p.max_workgroup_count[i] = v;
}

void fill_unstated(DeviceProfile& p, const DeviceProfile& minimums) {
#define REACH_FILL(f) if (!p.f) p.f = minimums.f;
  REACH_PROFILE_LIMITS(REACH_FILL)
#undef REACH_FILL
  for (int i = 0; i < 3; ++i) {
    if (!p.max_workgroup_size[i]) p.max_workgroup_size[i] = minimums.max_workgroup_size[i];
    if (!p.max_workgroup_count[i]) p.max_workgroup_count[i] = minimums.max_workgroup_count[i];
  }
}

}  // namespace

bool DeviceProfile::has_extension(const char* ext) const {
  return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
}

bool DeviceProfile::can_pin_subgroup() const {
  // A profile that states requiredSubgroupSizeStages decides; one that does not (a baseline that
  // requires subgroupSizeControl) leaves compute in, as Vulkan 1.3 requires.
  const bool compute = required_subgroup_size_stages_stated ? (required_subgroup_size_stages & VK_SHADER_STAGE_COMPUTE_BIT)
                                                            : api_version >= VK_API_VERSION_1_3;
  return subgroup_size_control_feature && compute_full_subgroups && compute;
}

bool DeviceProfile::cooperative_matrix() const {
  return cooperative_matrix_feature && has_extension(kCoopmatExtension) && fp16_arithmetic && vulkan_memory_model &&
         vulkan_memory_model_device_scope;   // as Capabilities asks of a live device
}

DeviceProfile parse_device_profile(const std::string& text, const std::string& file) {
  const Reader r{file};
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw Error(ErrorCode::format, "device profile " + file + ": not JSON: " + e.what());
  }
  r.object(root, "(top level)");
  const auto profiles = root.find("profiles");
  if (profiles == root.end()) r.fail("profiles", "missing: a profiles file names its profiles there");
  const auto caps = root.find("capabilities");
  if (caps == root.end()) r.fail("capabilities", "missing: a profiles file defines its capabilities there");
  r.object(*caps, "capabilities");
  if (r.object(*profiles, "profiles").empty()) r.fail("profiles", "empty: no profile to use");

  // Limits start at 0 (not stated) so that a stated value counts even below the specification's minimum
  // (the larger of the blocks' values wins); those still unstated get the minimum at the end.
  const DeviceProfile minimums;
  DeviceProfile p;
  set_limits(p, 0);
  p.file = file;
  const auto& first = *profiles->begin();
  p.name = profiles->begin().key();
  const std::string pkey = "profiles." + p.name;
  r.object(first, pkey);
  if (const auto v = first.find("api-version"); v != first.end()) p.api_version = parse_api_version(r, *v, pkey + ".api-version");
  const auto list = first.find("capabilities");
  if (list == first.end()) r.fail(pkey + ".capabilities", "missing: the list of capabilities the profile requires");
  if (!list->is_array()) r.fail(pkey + ".capabilities", std::string("expected a list, got ") + list->type_name());
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string ikey = pkey + ".capabilities[" + std::to_string(i) + "]";
    // A nested list is a choice among alternatives: a device meets one, so the first is read.
    const Json& entry = (*list)[i];
    const Json& pick = entry.is_array() && !entry.empty() ? entry[0] : entry;
    const std::string name = r.string(pick, entry.is_array() ? ikey + "[0]" : ikey);
    const auto cap = caps->find(name);
    if (cap == caps->end()) r.fail(ikey, "names capability '" + name + "', which `capabilities` does not define");
    read_capability(r, *cap, "capabilities." + name, p);
  }
  fill_unstated(p, minimums);
  if (p.device_name.empty()) p.device_name = p.name;
  if (p.subgroup_size == 0) p.subgroup_size = 1;   // the specification's minimum
  if (p.subgroup_min == 0) p.subgroup_min = p.subgroup_size;
  if (p.subgroup_max == 0) p.subgroup_max = p.subgroup_size;
  return p;
}

DeviceProfile load_device_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw Error(ErrorCode::io, "device profile " + path + ": cannot be opened: name a Vulkan Profiles JSON file "
                               "(REACH_DEVICE_PROFILE, --device-profile)");
  const std::streamoff size = in.tellg();
  if (size > kMaxProfileBytes)
    throw Error(ErrorCode::format, "device profile " + path + ": " + std::to_string(size) +
                                       " bytes, more than a profile holds (16 MiB at most)");
  in.seekg(0);
  std::string text(size_t(std::max<std::streamoff>(size, 0)), '\0');
  if (!in.read(text.data(), std::streamsize(text.size())))
    throw Error(ErrorCode::io, "device profile " + path + ": read failed");
  return parse_device_profile(text, path);
}

Capabilities apply_profile(const Capabilities& real, const DeviceProfile& p) {
  Capabilities c = real;
  c.device_name = real.device_name + " [profile " + p.name + "]";
  c.api_version = std::min(real.api_version, p.api_version);
  c.fp16_arithmetic = real.fp16_arithmetic && p.fp16_arithmetic;
  c.storage_16bit = real.storage_16bit && p.storage_16bit;
  c.storage_8bit = real.storage_8bit && p.storage_8bit;
  c.int8_arithmetic = real.int8_arithmetic && p.int8_arithmetic;
  c.int64 = real.int64 && p.int64;
  c.integer_dot = real.integer_dot && p.integer_dot;
  // The cooperative-matrix GEMM's f16 matrices need shaderFloat16 on the device reach creates.
  c.cooperative_matrix = real.cooperative_matrix && p.cooperative_matrix() && c.fp16_arithmetic;
  c.memory_budget = real.memory_budget && p.has_extension(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  // A device reach creates chains the Vulkan 1.3 features (size control, integer dot) only at 1.3.
  if (c.api_version < VK_API_VERSION_1_3) c.integer_dot = false;

  // The width the hardware runs is its own.  Pinning narrows to both ranges, and needs both to allow it.
  c.subgroup_ops = (p.subgroup_stages & VK_SHADER_STAGE_COMPUTE_BIT) ? real.subgroup_ops & p.subgroup_ops : 0;
  if (real.subgroup_min != real.subgroup_max) {
    const uint32_t lo = std::max(real.subgroup_min, p.subgroup_min), hi = std::min(real.subgroup_max, p.subgroup_max);
    c.subgroup_size_control = real.subgroup_size_control && p.can_pin_subgroup() && lo <= hi &&
                              real.subgroup_size >= lo && real.subgroup_size <= hi;
    if (c.subgroup_size_control) c.subgroup_min = lo, c.subgroup_max = hi;
  } else {
    c.subgroup_size_control = real.subgroup_size_control && p.can_pin_subgroup();
  }
  if (c.api_version < VK_API_VERSION_1_3) c.subgroup_size_control = false;

  c.max_storage_buffer_range = std::min(real.max_storage_buffer_range, p.max_storage_buffer_range);
  c.max_memory_allocation_size = std::min(real.max_memory_allocation_size, p.max_memory_allocation_size);
  c.max_buffer_size = std::min(real.max_buffer_size, p.max_buffer_size);
  c.min_storage_buffer_offset_alignment = std::max(real.min_storage_buffer_offset_alignment, p.min_storage_buffer_offset_alignment);
  c.min_texel_buffer_offset_alignment = std::max(real.min_texel_buffer_offset_alignment, p.min_texel_buffer_offset_alignment);
  c.max_texel_buffer_elements = std::min(real.max_texel_buffer_elements, p.max_texel_buffer_elements);
  c.max_shared_memory = std::min(real.max_shared_memory, p.max_shared_memory);
  c.max_workgroup_invocations = std::min(real.max_workgroup_invocations, p.max_workgroup_invocations);
  for (int i = 0; i < 3; ++i) {
    c.max_workgroup_size[i] = std::min(real.max_workgroup_size[i], p.max_workgroup_size[i]);
    c.max_workgroup_count[i] = std::min(real.max_workgroup_count[i], p.max_workgroup_count[i]);
  }
  c.max_push_constants = std::min(real.max_push_constants, p.max_push_constants);
  // reach binds every buffer of a pipeline in one set, so the per-set limit caps a stage too.
  c.max_stage_storage_buffers =
      std::min({real.max_stage_storage_buffers, p.max_stage_storage_buffers, p.max_set_storage_buffers});
  c.max_stage_sampled = std::min(real.max_stage_sampled, p.max_stage_sampled);
  c.max_stage_resources = std::min(real.max_stage_resources, p.max_stage_resources);
  for (size_t i = 0; i < std::size(c.uniform_texel); ++i) c.uniform_texel[i] = real.uniform_texel[i] && p.uniform_texel[i];
  return c;
}

Capabilities profile_capabilities(const DeviceProfile& p) {
  Capabilities c;
  c.device_name = p.device_name;
  c.driver_name = "profile";
  c.driver_info = p.file;
  c.api_version = p.api_version;
  c.type = p.type;
  c.fp16_arithmetic = p.fp16_arithmetic;
  c.storage_16bit = p.storage_16bit;
  c.storage_8bit = p.storage_8bit;
  c.int8_arithmetic = p.int8_arithmetic;
  c.int64 = p.int64;
  c.integer_dot = p.integer_dot;
  c.cooperative_matrix = false;   // the files list no matrix shapes, and reach needs one
  c.subgroup_size = p.subgroup_size;
  c.subgroup_min = std::min(p.subgroup_min, p.subgroup_size);
  c.subgroup_max = std::max(p.subgroup_max, p.subgroup_size);
  c.subgroup_size_control = p.can_pin_subgroup();
  c.subgroup_ops = (p.subgroup_stages & VK_SHADER_STAGE_COMPUTE_BIT) ? p.subgroup_ops : 0;
  c.max_storage_buffer_range = p.max_storage_buffer_range;
  c.max_memory_allocation_size = p.max_memory_allocation_size;
  c.max_buffer_size = p.max_buffer_size;
  c.min_storage_buffer_offset_alignment = p.min_storage_buffer_offset_alignment;
  c.min_texel_buffer_offset_alignment = p.min_texel_buffer_offset_alignment;
  c.max_texel_buffer_elements = p.max_texel_buffer_elements;
  c.max_shared_memory = p.max_shared_memory;
  c.max_workgroup_invocations = p.max_workgroup_invocations;
  for (int i = 0; i < 3; ++i) {
    c.max_workgroup_size[i] = p.max_workgroup_size[i];
    c.max_workgroup_count[i] = p.max_workgroup_count[i];
  }
  c.max_push_constants = p.max_push_constants;
  c.max_stage_storage_buffers = std::min(p.max_stage_storage_buffers, p.max_set_storage_buffers);
  c.max_stage_sampled = p.max_stage_sampled;
  c.max_stage_resources = p.max_stage_resources;
  for (size_t i = 0; i < std::size(c.uniform_texel); ++i) c.uniform_texel[i] = p.uniform_texel[i];
  c.memory_budget = p.has_extension(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  return c;
}

std::string profile_refusal(const DeviceProfile& p) {
  if (p.api_version < VK_API_VERSION_1_2)
    return "profile " + p.name + " (" + p.file + ") states Vulkan " + std::to_string(VK_API_VERSION_MAJOR(p.api_version)) +
           "." + std::to_string(VK_API_VERSION_MINOR(p.api_version)) + "; reach needs Vulkan 1.2";
  return "";
}

}  // namespace reach
