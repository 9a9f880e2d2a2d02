// Device profiles (engine/device_profile.hpp): the 13 Vulkan Profiles files of tests/data/device-profiles
// read against values taken from them with Python's json module, malformed files named by key, the
// intersection with a real record, the kernel plan each profile gives, and a device created under one.
#include <doctest/doctest.h>

#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/device_profile.hpp"
#include "kernels/kernels.hpp"
#include "kernels/spec.hpp"
#include "support/files.hpp"

using namespace reach;

namespace {

const std::string kDir = "tests/data/device-profiles/";

// Read from each file with Python's json (first profile, first alternative of a choice, limits a
// profile leaves out at the specification's minimum): storage buffers per stage, maxStorageBufferRange,
// shared memory, subgroupSize, shaderFloat16, storageBuffer16BitAccess, and whether the subgroup size
// can be pinned in compute (subgroupSizeControl, computeFullSubgroups, compute in requiredSubgroupSizeStages).
struct Expect {
  const char* file;
  const char* name;
  uint64_t storage_buffers, storage_range, shared, subgroup;
  bool fp16, storage16, pin;
};
const Expect kExpect[] = {
    {"VP_ANDROID_15_minimums.json", "VP_ANDROID_15_minimums", 12, 134217728, 16384, 1, true, true, false},
    {"VP_KHR_roadmap.json", "VP_KHR_roadmap_2026", 200, 134217728, 32768, 4, true, true, true},
    {"vp_gpuinfo_amd_radeon_rx_570_series__radv_polaris10__26_0_6_linuxmint_22_3.json",
     "VP_GPUINFO_AMD_Radeon_RX_570_Series__RADV_POLARIS10__26_0_6_linuxmint_22_3", 8388606, 4294967295, 65536, 64, false,
     true, false},
    {"vp_gpuinfo_amd_radeon_rx_9070_xt_2_0_395_windows_10.json", "VP_GPUINFO_AMD_Radeon_RX_9070_XT_2_0_395_windows_10",
     4294967295, 4294967295, 32768, 64, true, true, true},
    {"vp_gpuinfo_amd_radeon_rx_9070_xt__radv_gfx1201__26_1_99_cachyos_unknown.json",
     "VP_GPUINFO_AMD_Radeon_RX_9070_XT__RADV_GFX1201__26_1_99_cachyos_unknown", 8388606, 4294967295, 65536, 64, true, true,
     true},
    {"vp_gpuinfo_apple_m1_0_2_2209_macos_26_5_1.json", "VP_GPUINFO_Apple_M1_0_2_2209_macos_26_5_1", 31, 4294967295, 32768,
     32, true, true, false},
    {"vp_gpuinfo_apple_m1_26_1_99_macos_26_5_0.json", "VP_GPUINFO_Apple_M1_26_1_99_macos_26_5_0", 1048576, 4294967295,
     32768, 32, true, true, false},
    {"vp_gpuinfo_apple_m5_0_2_2210_macos_26_4_1.json", "VP_GPUINFO_Apple_M5_0_2_2210_macos_26_4_1", 31, 4294967295, 32768,
     32, true, true, false},
    {"vp_gpuinfo_intel_r__arc_tm__a770_graphics__dg2__26_1_2_arch_unknown.json",
     "VP_GPUINFO_Intel_R__Arc_tm__A770_Graphics__DG2__26_1_2_arch_unknown", 33554432, 4294967295, 49152, 32, true, true,
     true},
    {"vp_gpuinfo_intel_r__arc_tm__b580_graphics_0_406_632_windows_10.json",
     "VP_GPUINFO_Intel_R__Arc_TM__B580_Graphics_0_406_632_windows_10", 33554432, 1073741820, 49152, 32, true, true, true},
    {"vp_gpuinfo_intel_r__uhd_graphics_750_0_405_2983_windows_11.json",
     "VP_GPUINFO_Intel_R__UHD_Graphics_750_0_405_2983_windows_11", 200, 1073741820, 32768, 32, true, true, true},
    {"vp_gpuinfo_nvidia_geforce_gtx_1650_610_62_0_0_windows_10.json",
     "VP_GPUINFO_NVIDIA_GeForce_GTX_1650_610_62_0_0_windows_10", 1048576, 4294967295, 49152, 32, true, true, true},
    {"vp_gpuinfo_nvidia_geforce_rtx_5090_610_43_2_0_freebsd_15_1.json",
     "VP_GPUINFO_NVIDIA_GeForce_RTX_5090_610_43_2_0_freebsd_15_1", 1048576, 4294967295, 49152, 32, true, true, true},
};

DeviceProfile load(const char* file) { return load_device_profile(kDir + file); }

// A GPU-like record with generous limits and every feature, to intersect profiles with.
Capabilities big_gpu() {
  Capabilities c;
  c.device_name = "test gpu";
  c.type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  c.api_version = VK_API_VERSION_1_3;
  c.fp16_arithmetic = c.storage_16bit = c.storage_8bit = c.int8_arithmetic = c.int64 = c.integer_dot = true;
  c.cooperative_matrix = true;
  c.coopmat_shapes = {{16, 16, 16}};
  c.subgroup_size = 32;
  c.subgroup_min = 16;
  c.subgroup_max = 64;
  c.subgroup_size_control = true;
  c.subgroup_ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT | VK_SUBGROUP_FEATURE_BALLOT_BIT |
                   VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  c.max_storage_buffer_range = 2ull << 30;
  c.max_memory_allocation_size = 8ull << 30;
  c.max_buffer_size = 8ull << 30;
  c.min_storage_buffer_offset_alignment = 16;
  c.max_shared_memory = 65536;
  c.max_workgroup_invocations = 1024;
  c.max_workgroup_size[0] = c.max_workgroup_size[1] = c.max_workgroup_size[2] = 1024;
  c.max_workgroup_count[0] = c.max_workgroup_count[1] = c.max_workgroup_count[2] = 1u << 30;
  c.max_push_constants = 256;
  c.max_stage_storage_buffers = 1000;
  c.max_stage_sampled = 1000;
  c.max_stage_resources = 2000;
  c.max_texel_buffer_elements = 1u << 27;
  c.min_texel_buffer_offset_alignment = 16;
  for (bool& u : c.uniform_texel) u = true;
  return c;
}

// What parse_device_profile says of `text`, or "" when it takes it.
std::string error_of(const std::string& text) {
  try {
    parse_device_profile(text, "bad.json");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::format);
    return e.what();
  }
  return "";
}

const std::string kMinimal = R"({"profiles": {"P": {"api-version": "1.3.0", "capabilities": ["c"]}},
  "capabilities": {"c": {"properties": {"VkPhysicalDeviceProperties": {"limits": {LIMITS}}}}}})";
std::string with_limits(const std::string& limits) {
  std::string s = kMinimal;
  return s.replace(s.find("LIMITS"), 6, limits);
}

}  // namespace

TEST_CASE("each profile file reads as Python's json reads it") {
  for (const Expect& e : kExpect) {
    CAPTURE(e.file);
    const DeviceProfile p = load(e.file);
    CHECK(p.name == e.name);
    CHECK(p.max_stage_storage_buffers == std::min<uint64_t>(e.storage_buffers, UINT32_MAX));
    CHECK(p.max_storage_buffer_range == e.storage_range);
    CHECK(p.max_shared_memory == e.shared);
    CHECK(p.subgroup_size == e.subgroup);
    CHECK(p.fp16_arithmetic == e.fp16);
    CHECK(p.storage_16bit == e.storage16);
    CHECK(p.can_pin_subgroup() == e.pin);
    CHECK(p.api_version >= VK_API_VERSION_1_3);
    CHECK(profile_refusal(p).empty());
  }
}

TEST_CASE("facts of the profiles' README table") {
  const DeviceProfile m1 = load("vp_gpuinfo_apple_m1_0_2_2209_macos_26_5_1.json");
  CHECK(m1.max_stage_storage_buffers == 31);
  CHECK(m1.subgroup_min == 4);
  CHECK(m1.subgroup_max == 32);
  CHECK((m1.required_subgroup_size_stages & VK_SHADER_STAGE_COMPUTE_BIT) == 0);   // listed, empty
  CHECK_FALSE(m1.cooperative_matrix());
  CHECK((m1.subgroup_ops & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0);
  const DeviceProfile polaris = load("vp_gpuinfo_amd_radeon_rx_570_series__radv_polaris10__26_0_6_linuxmint_22_3.json");
  CHECK_FALSE(polaris.fp16_arithmetic);
  CHECK(polaris.subgroup_min == 64);
  CHECK(polaris.subgroup_max == 64);
  CHECK(load("vp_gpuinfo_intel_r__arc_tm__b580_graphics_0_406_632_windows_10.json").max_storage_buffer_range == 1073741820);
  CHECK(load("vp_gpuinfo_amd_radeon_rx_9070_xt_2_0_395_windows_10.json").cooperative_matrix());
  CHECK(load("vp_gpuinfo_nvidia_geforce_rtx_5090_610_43_2_0_freebsd_15_1.json").cooperative_matrix());
  CHECK_FALSE(load("vp_gpuinfo_nvidia_geforce_gtx_1650_610_62_0_0_windows_10.json").cooperative_matrix());
  const DeviceProfile android = load("VP_ANDROID_15_minimums.json");
  CHECK(android.max_stage_storage_buffers == 12);
  CHECK(android.max_workgroup_invocations == 128);   // not stated: the specification's minimum
  CHECK((android.subgroup_ops & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0);
  // The gpuinfo reports state no deviceType: the profile alone is planned as a GPU (not a CPU device).
  CHECK_FALSE(profile_capabilities(m1).is_cpu());
}

// With vulkanMemoryModel on, Device-scope atomics and barriers (every decode kernel's) are valid only with
// vulkanMemoryModelDeviceScope too (VUID-RuntimeSpirv-vulkanMemoryModel-06265): a device that lacked it
// would fail validation on every shader, so cooperative matrices (which need the model) are not offered.
TEST_CASE("cooperative matrices need the memory model's Device scope") {
  const std::string file = "vp_gpuinfo_amd_radeon_rx_9070_xt_2_0_395_windows_10.json";
  std::string text = reach::test::read_text(kDir + file);
  REQUIRE(parse_device_profile(text, file).cooperative_matrix());
  const std::string on = R"("vulkanMemoryModelDeviceScope": true)", off = R"("vulkanMemoryModelDeviceScope": false)";
  size_t n = 0;
  for (size_t at = text.find(on); at != std::string::npos; at = text.find(on, at)) text.replace(at, on.size(), off), ++n;
  REQUIRE(n > 0);
  const DeviceProfile p = parse_device_profile(text, file);
  CHECK(p.vulkan_memory_model);
  CHECK_FALSE(p.vulkan_memory_model_device_scope);
  CHECK_FALSE(p.cooperative_matrix());
}

TEST_CASE("a malformed profile is refused, naming the file and the key") {
  CHECK(error_of("{not json").find("bad.json: not JSON") != std::string::npos);
  CHECK(error_of("[]").find("(top level): expected an object") != std::string::npos);
  CHECK(error_of(R"({"profiles": {"P": {"capabilities": []}}})").find("bad.json: capabilities: missing") !=
        std::string::npos);
  CHECK(error_of(R"({"capabilities": {}})").find("profiles: missing") != std::string::npos);
  CHECK(error_of(R"({"profiles": {}, "capabilities": {}})").find("profiles: empty") != std::string::npos);
  CHECK(error_of(R"({"profiles": {"P": {"capabilities": ["nope"]}}, "capabilities": {}})")
            .find("profiles.P.capabilities[0]: names capability 'nope'") != std::string::npos);
  CHECK(error_of(with_limits(R"("maxStorageBufferRange": "big")"))
            .find("capabilities.c.properties.VkPhysicalDeviceProperties.limits.maxStorageBufferRange: expected a whole "
                  "number") != std::string::npos);
  CHECK(error_of(with_limits(R"("maxComputeWorkGroupSize": [1, 2])"))
            .find("limits.maxComputeWorkGroupSize: expected a list of 3") != std::string::npos);
  CHECK(error_of(R"({"profiles": {"P": {"capabilities": ["c"]}}, "capabilities": {"c": {"features":
      {"VkPhysicalDeviceVulkan12Features": {"shaderFloat16": 1}}}}})")
            .find("capabilities.c.features.VkPhysicalDeviceVulkan12Features.shaderFloat16: expected true or false") !=
        std::string::npos);
  CHECK(error_of(R"({"profiles": {"P": {"api-version": 13, "capabilities": []}}, "capabilities": {}})")
            .find("profiles.P.api-version: expected a string") != std::string::npos);
  // Keys reach does not read are ignored, whatever they hold.
  CHECK(error_of(with_limits(R"("maxStorageBufferRange": 1000000, "someFutureLimit": "x", "maxViewports": [1])")) == "");
  const DeviceProfile p = parse_device_profile(with_limits(R"("maxStorageBufferRange": 1000000, "x": {})"), "ok.json");
  CHECK(p.max_storage_buffer_range == 1000000);
  CHECK(p.max_stage_storage_buffers == 4);   // the specification's minimum
  CHECK_THROWS_AS(load_device_profile(kDir + "no-such-profile.json"), Error);
}

TEST_CASE("a profile of Vulkan 1.1 is refused") {
  const DeviceProfile p = parse_device_profile(
      R"({"profiles": {"Old": {"api-version": "1.1.0", "capabilities": []}}, "capabilities": {}})", "old.json");
  CHECK(profile_refusal(p).find("Vulkan 1.1; reach needs Vulkan 1.2") != std::string::npos);
}

TEST_CASE("apply_profile: the smaller limit, both features, the real subgroup width") {
  const Capabilities real = big_gpu();
  SUBCASE("Apple M1 (MoltenVK)") {
    const Capabilities c = apply_profile(real, load("vp_gpuinfo_apple_m1_0_2_2209_macos_26_5_1.json"));
    CHECK(c.max_stage_storage_buffers == 31);
    CHECK(c.max_shared_memory == 32768);
    CHECK(c.max_storage_buffer_range == real.max_storage_buffer_range);   // the profile's 4 GiB is larger
    CHECK(c.max_workgroup_invocations == 1024);
    CHECK(c.subgroup_size == 32);              // the real width
    CHECK_FALSE(c.subgroup_size_control);      // compute not in requiredSubgroupSizeStages
    CHECK_FALSE(c.cooperative_matrix);         // no VK_KHR_cooperative_matrix
    CHECK(c.fp16_arithmetic);
    CHECK(c.integer_dot);
    CHECK(c.has_subgroup_arithmetic());
  }
  SUBCASE("Polaris: no shaderFloat16, so no cooperative matrix; pinning range 64 leaves the real 32 out") {
    const Capabilities c =
        apply_profile(real, load("vp_gpuinfo_amd_radeon_rx_570_series__radv_polaris10__26_0_6_linuxmint_22_3.json"));
    CHECK_FALSE(c.fp16_arithmetic);
    CHECK_FALSE(c.cooperative_matrix);
    CHECK(c.storage_16bit);
    CHECK_FALSE(c.subgroup_size_control);
    CHECK(c.subgroup_size == 32);
  }
  SUBCASE("Intel B580: 1 GiB storage range; the pinnable range narrows to 16-32") {
    const Capabilities c = apply_profile(real, load("vp_gpuinfo_intel_r__arc_tm__b580_graphics_0_406_632_windows_10.json"));
    CHECK(c.max_storage_buffer_range == 1073741820);
    CHECK(c.subgroup_size_control);
    CHECK(c.subgroup_min == 16);
    CHECK(c.subgroup_max == 32);
    CHECK(c.max_shared_memory == 49152);
  }
  SUBCASE("RX 9070 XT (Windows): cooperative matrix kept with the real shapes, 32 KiB shared") {
    const Capabilities c = apply_profile(real, load("vp_gpuinfo_amd_radeon_rx_9070_xt_2_0_395_windows_10.json"));
    CHECK(c.cooperative_matrix);
    CHECK(c.coopmat_shapes.size() == 1);
    CHECK(c.max_shared_memory == 32768);
    CHECK(c.subgroup_min == 32);
    CHECK(c.subgroup_max == 64);
  }
  SUBCASE("Android 15: 12 storage buffers, specification minimums elsewhere") {
    const Capabilities c = apply_profile(real, load("VP_ANDROID_15_minimums.json"));
    CHECK(c.max_stage_storage_buffers == 12);
    CHECK(c.max_shared_memory == 16384);
    CHECK(c.max_workgroup_invocations == 128);
    CHECK(c.max_storage_buffer_range == (1ull << 27));
    CHECK(c.min_storage_buffer_offset_alignment == 256);   // the larger alignment
    CHECK(c.max_push_constants == 128);
    CHECK_FALSE(c.integer_dot);
    CHECK_FALSE(c.int64);
  }
  SUBCASE("a weaker real device keeps its own limits") {
    Capabilities weak = real;
    weak.max_stage_storage_buffers = 8;
    weak.fp16_arithmetic = false;
    const Capabilities c = apply_profile(weak, load("vp_gpuinfo_nvidia_geforce_rtx_5090_610_43_2_0_freebsd_15_1.json"));
    CHECK(c.max_stage_storage_buffers == 8);
    CHECK_FALSE(c.fp16_arithmetic);
    CHECK_FALSE(c.cooperative_matrix);   // needs shaderFloat16 on both
  }
}

TEST_CASE("the kernel plan under each profile") {
  const uint32_t fused =
      std::max<uint32_t>(spec::LinearMatvecFusedQBindings::count, spec::LinearMatvecFusedBindings::count);
  REQUIRE(fused > 12);
  REQUIRE(fused <= 31);
  for (const Expect& e : kExpect) {
    CAPTURE(e.file);
    const Capabilities c = apply_profile(big_gpu(), load(e.file));
    const KernelConfig k = KernelConfig::from(c, {});
    // The fused decode mat-vec needs `fused` storage buffers in one stage: Android's 12 are too few.
    CHECK(k.matvec_fused == (std::min<uint64_t>(e.storage_buffers, 1000) >= fused));
    CHECK(k.max_binding == std::min<uint64_t>(e.storage_range, big_gpu().max_storage_buffer_range));
    CHECK(k.subgroup == 32);
  }
  // The profile alone: Polaris's fixed 64-wide subgroups, Android's 1 (not stated).
  const Capabilities polaris =
      profile_capabilities(load("vp_gpuinfo_amd_radeon_rx_570_series__radv_polaris10__26_0_6_linuxmint_22_3.json"));
  CHECK(KernelConfig::from(polaris, {}).subgroup == 64);
  CHECK_FALSE(KernelConfig::from(profile_capabilities(load("VP_ANDROID_15_minimums.json")), {}).matvec_fused);
}

TEST_CASE("a device created under a profile has the intersected capabilities; a bad profile fails creation") {
  DeviceOptions o;
  o.settings.device_profile = kDir + "VP_ANDROID_15_minimums.json";
  o.pipeline_cache_dir = "-";
  auto dev = Device::create(o);
  CHECK(dev->caps().max_stage_storage_buffers <= 12);
  CHECK(dev->caps().max_shared_memory <= 16384);
  CHECK(dev->caps().device_name.find("[profile VP_ANDROID_15_minimums]") != std::string::npos);
  CHECK_FALSE(KernelConfig::from(dev->caps(), {}).matvec_fused);
  dev.reset();
  for (const auto& info : Device::list(false, {}, o.settings)) CHECK(info.caps.max_stage_storage_buffers <= 12);

  o.settings.device_profile = "tests/data/device-profiles/LICENSE-Apache-2.0.txt";
  try {
    Device::create(o);
    FAIL("a file that is not JSON was taken as a profile");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("LICENSE-Apache-2.0.txt: not JSON") != std::string::npos);
  }
}
