// Kernel planning on the subgroup widths real devices run, without a device: Capabilities records
// shaped like lavapipe (4, 8, 16), NVIDIA (32), AMD GCN (64 only), AMD RDNA (32-64, pinnable),
// Intel (8-32, reports 32, pinnable or not), Apple through MoltenVK (4-32, reports 32, not
// pinnable) and a driver that has the size-control feature but lists no compute stage for it.
// For each, every width the driver may run (each power of two in [subgroup_min, subgroup_max]
// where nothing is pinned) is checked against the plan the kernels/ functions choose: the widths
// 32, 64 and 128 never run on this machine, so this is what holds the kernels to them.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/capabilities.hpp"
#include "engine/pipeline.hpp"
#include "kernels/attention.hpp"
#include "kernels/kernels.hpp"
#include "kernels/spec.hpp"

using namespace reach;

namespace {

struct Profile {
  const char* name;
  VkPhysicalDeviceType type;
  uint32_t reported, min, max;
  bool control;                  // subgroupSizeControl + computeFullSubgroups
  VkShaderStageFlags stages;     // requiredSubgroupSizeStages
  uint32_t shared;               // maxComputeSharedMemorySize
};

constexpr VkShaderStageFlags kCompute = VK_SHADER_STAGE_COMPUTE_BIT;
constexpr VkPhysicalDeviceType kCpu = VK_PHYSICAL_DEVICE_TYPE_CPU;
constexpr VkPhysicalDeviceType kGpu = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
constexpr VkPhysicalDeviceType kIgpu = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;

const Profile kProfiles[] = {
    {"lavapipe 128-bit (4)", kCpu, 4, 4, 4, true, kCompute | VK_SHADER_STAGE_FRAGMENT_BIT, 32768},
    {"lavapipe (8)", kCpu, 8, 8, 8, true, kCompute | VK_SHADER_STAGE_FRAGMENT_BIT, 32768},
    {"lavapipe 512-bit (16)", kCpu, 16, 16, 16, true, kCompute | VK_SHADER_STAGE_FRAGMENT_BIT, 32768},
    {"NVIDIA (32)", kGpu, 32, 32, 32, true, kCompute, 49152},
    {"AMD GCN (64 only)", kGpu, 64, 64, 64, false, 0, 65536},
    {"AMD RDNA (32-64, pinnable)", kGpu, 64, 32, 64, true, kCompute, 65536},
    {"Intel iGPU (8-32, reports 32, pinnable)", kIgpu, 32, 8, 32, true, kCompute, 65536},
    {"Intel iGPU (8-32, reports 32, unpinned)", kIgpu, 32, 8, 32, false, 0, 65536},
    {"MoltenVK (4-32, reports 32, not pinnable)", kIgpu, 32, 4, 32, false, 0, 32768},
    {"size control without compute (4-128)", kGpu, 32, 4, 128, true, VK_SHADER_STAGE_FRAGMENT_BIT, 32768},
};

Capabilities caps_of(const Profile& p) {
  Capabilities c;
  c.device_name = p.name;
  c.type = p.type;
  c.subgroup_size = p.reported;
  c.subgroup_min = p.min;
  c.subgroup_max = p.max;
  c.subgroup_size_control = p.control;
  c.subgroup_size_stages = p.stages;
  c.subgroup_ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                   VK_SUBGROUP_FEATURE_BALLOT_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  c.max_shared_memory = p.shared;
  c.max_workgroup_invocations = 1024;
  for (uint32_t& s : c.max_workgroup_size) s = 1024;
  for (uint32_t& n : c.max_workgroup_count) n = 65535;
  c.max_storage_buffer_range = 1u << 30;
  c.max_push_constants = 128;
  c.max_stage_storage_buffers = 64;
  c.max_stage_sampled = 64;
  c.max_stage_resources = 128;
  c.min_storage_buffer_offset_alignment = 64;
  return c;
}

// The widths a pipeline that pins nothing may run, by the record alone (not by Capabilities'
// own helpers, which are under test): each power of two from subgroup_min to subgroup_max.
std::vector<uint32_t> unpinned_widths(const Profile& p) {
  std::vector<uint32_t> w;
  for (uint32_t n = p.min; n <= p.max; n *= 2) w.push_back(n);
  return w;
}

bool pinnable(const Profile& p) { return p.control && (p.stages & VK_SHADER_STAGE_COMPUTE_BIT); }

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

}  // namespace

TEST_CASE("kernel plan: a subgroup size is pinned only where compute is among requiredSubgroupSizeStages") {
  for (const Profile& p : kProfiles) {
    INFO(p.name);
    const Capabilities c = caps_of(p);
    CHECK(c.can_pin_subgroup() == pinnable(p));
    // The width every pipeline that asks can count on: the only one, the reported one pinned, or none.
    const uint32_t expect = p.min == p.max ? p.min : pinnable(p) ? p.reported : 0;
    CHECK(c.fixed_subgroup() == expect);
    for (uint32_t n : {4u, 8u, 16u, 32u, 64u, 128u}) {
      INFO("required " << n);
      const bool in_range = n >= p.min && n <= p.max;
      if (pinnable(p) && in_range) {
        CHECK(pin_required_subgroup(c, n, "k"));
      } else if (p.min == n && p.max == n) {
        CHECK_FALSE(pin_required_subgroup(c, n, "k"));   // the only width: nothing to pin
      } else {
        CHECK_THROWS_AS(pin_required_subgroup(c, n, "k"), Error);
      }
    }
  }
}

TEST_CASE("kernel plan: attention's one-subgroup workgroups fit one subgroup at every width the device may run") {
  for (const Profile& p : kProfiles) {
    INFO(p.name);
    const Capabilities c = caps_of(p);
    const uint32_t lanes = attention_lanes(c), required = attention_required_subgroup(c);
    // The widths its pipelines run: the required one (pinned, or the only one), else any the driver picks.
    const std::vector<uint32_t> widths = required ? std::vector<uint32_t>{required} : unpinned_widths(p);
    if (required) CHECK_NOTHROW(pin_required_subgroup(c, required, "attention_prefill"));
    for (uint32_t w : widths) {
      INFO("width " << w);
      CHECK(lanes <= w);                              // the whole workgroup is one subgroup
      if (required) CHECK(lanes == w);                // pinned: the tile is exactly the subgroup
    }
    // Pinnable or single-width devices keep their full width (no 4-key tiles on a 64-wide GPU).
    if (p.min == p.max) CHECK(lanes == p.min);
    else if (pinnable(p)) CHECK(lanes == p.reported);
    else CHECK(lanes == p.min);

    const AttentionTuning t = AttentionTuning::from(c);
    // The prefill scores keys in blocks that divide the tile.
    CHECK(t.prefill_key_block >= 1);
    CHECK(t.prefill_key_block <= lanes);
    // The lanes decode merges lanes with subgroup reductions over its workgroup: only at a fixed width.
    if (t.decode_variant == 2) {
      CHECK(p.type == kCpu);
      CHECK(required != 0);
      CHECK(t.decode_group == lanes);
    }
  }
}

TEST_CASE("kernel plan: the row reductions' shared partials hold every subgroup at every width") {
  for (const Profile& p : kProfiles) {
    INFO(p.name);
    const Capabilities c = caps_of(p);
    KernelConfig cfg = KernelConfig::from(c);
    // The default workgroup, the GPUs' 256, the CPU devices' one subgroup, and non-powers of two.
    for (uint32_t wg : {cfg.reduce_wg, 1u, 12u, 64u, 256u, 1024u}) {
      cfg.reduce_wg = wg;
      for (uint32_t cols : {13u, 576u, 151936u}) {
        const ReducePlan r = reduce_plan(c, cfg, cols, 3, "norm_softmax");
        INFO("reduce_wg " << wg << " -> " << r.wg << ", cols " << cols << ", max_subgroups " << r.max_subgroups);
        CHECK(r.wg >= wg);
        for (uint32_t w : unpinned_widths(p)) CHECK(ceil_div(r.wg, w) <= r.max_subgroups);
      }
    }
  }
}

TEST_CASE("kernel plan: linear kernels assume a subgroup width only where the device has one") {
  for (const Profile& p : kProfiles) {
    INFO(p.name);
    const Capabilities c = caps_of(p);
    const KernelConfig cfg = KernelConfig::from(c);
    // The shuffle GEMM indexes lanes by the width it was built for: the device must have no other.
    if (cfg.gemm_bcast) {
      CHECK(p.min == p.max);
      CHECK(cfg.subgroup == p.min);
      CHECK(cfg.gemm_wg % p.min == 0);
    }
    CHECK(cfg.gemm_wg <= c.max_workgroup_invocations);
    // Mat-vec: rows are spread over gl_NumSubgroups at run time; a workgroup of whole subgroups at any width.
    CHECK(cfg.matvec_wg <= c.max_workgroup_invocations);
    if (cfg.matvec_mode == spec::MATVEC_MODE_SUBGROUP)
      for (uint32_t w : unpinned_widths(p)) {
        INFO("width " << w);
        CHECK((cfg.matvec_wg % w == 0 || cfg.matvec_wg < w));
      }
    // X staged in shared memory keeps one norm partial per 8 lanes: every width must be at least 8.
    for (uint32_t K : {576u, 2048u, 4096u}) {
      const uint32_t xsh = cfg.matvec_xsh(K, 1, cfg.matvec_rows, c);
      if (xsh == 0) continue;
      INFO("K " << K);
      for (uint32_t w : unpinned_widths(p)) CHECK(ceil_div(cfg.matvec_wg, w) <= ceil_div(cfg.matvec_wg, 8));
    }
  }
}

TEST_CASE("kernel plan: X staged in shared memory holds the rows it stages and fits the device") {
  // The array may be rounded up (nearby K share a pipeline), never below XROWS * K / 4 and never past the
  // device's shared memory; the K of real models (multiples of 256) keep their exact size.
  for (const Profile& p : kProfiles) {
    INFO(p.name);
    const Capabilities c = caps_of(p);
    KernelConfig cfg = KernelConfig::from(c);
    cfg.matvec_xshared = true;
    for (uint32_t mode : {spec::MATVEC_MODE_SUBGROUP, spec::MATVEC_MODE_SHARED}) {
      cfg.matvec_mode = mode;
      for (uint32_t xrows : {1u, 3u, 8u})
        for (uint32_t K : {4u, 20u, 100u, 576u, 1000u, 2048u, 2560u, 4096u, 14336u}) {
          INFO("mode " << mode << " xrows " << xrows << " K " << K);
          const uint32_t xsh = cfg.matvec_xsh(K, xrows, cfg.matvec_rows, c);
          if (xsh == 0) continue;
          CHECK(c.subgroup_min >= 8);
          CHECK(xsh >= xrows * K / 4);
          CHECK(uint64_t(xsh) * 16 <= c.max_shared_memory);
          if (K % 256 == 0) CHECK(xsh == xrows * K / 4);
        }
    }
  }
}

TEST_CASE("kernel plan: the cooperative-matrix tile's subgroups are the width its pipeline runs") {
  for (const Profile& p : kProfiles) {
    INFO(p.name);
    Capabilities c = caps_of(p);
    c.cooperative_matrix = true;
    c.coopmat_shapes = {{16, 16, 16, false}};
    std::string why;
    const CoopmatTile t = choose_coopmat_tile(c, why);
    INFO(why);
    if (p.min != p.max && !pinnable(p)) {
      CHECK_FALSE(t.valid());
      continue;
    }
    REQUIRE(t.valid());
    CHECK(t.subgroup == (p.min == p.max ? p.min : p.reported));
    CHECK(t.workgroup() % t.subgroup == 0);
    CHECK(t.pin_subgroup == (p.min != p.max));
    if (t.pin_subgroup) CHECK(pin_required_subgroup(c, t.subgroup, "linear_gemm_coopmat"));
  }
}
