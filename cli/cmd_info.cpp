// `reach info`: one readable line per Vulkan device (or JSON), the kernel variants reach chooses
// for it, and whether the Khronos validation layer is on (REACH_VALIDATION=1).
#include <cstdio>
#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "engine/device.hpp"
#include "engine/device_profile.hpp"
#include "kernels/binding.hpp"
#include "kernels/kernels.hpp"
#include "kernels/spec.hpp"
#include "base/kv_type.hpp"
#include "runtime/model/model.hpp"

namespace reach::cli {

namespace {

// The variants KernelConfig::from chooses for a device (what run / bench / serve record), each
// "on ..." or "off / absent (why)".
struct Variants {
  std::string coopmat, int_dot, fused;
};
Variants variants(const Capabilities& caps) {
  const KernelConfig k = KernelConfig::from(caps, cli_settings().kernels);
  Variants v;
  if (k.coopmat.valid()) {
    const CoopmatTile& t = k.coopmat;
    v.coopmat = std::to_string(t.cm) + "x" + std::to_string(t.cn) + "x" + std::to_string(t.ck) +
                " f16 x f16 -> f32" + (t.xsplit ? std::string(" (X as two f16 halves)") : std::string(" (X as one f16)")) +
                ", tile " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + ", " +
                std::to_string(t.sg_m * t.sg_n) + " subgroups of " + std::to_string(t.subgroup) +
                (t.pin_subgroup ? " (pinned)" : "") +
                (k.coopmat_auto ? ", every weight type, for M >= " + std::to_string(k.coopmat_min_m) + " (REACH_COOPMAT=1)"
                 : k.coopmat_auto_quant
                     ? ", quantized weights, for M >= " + std::to_string(k.coopmat_min_m) +
                           " (float weights keep the f32 GEMM; REACH_COOPMAT=1: every type, =0: none)"
                     : std::string(", not used by default on a CPU device (slower there; REACH_COOPMAT=1 uses it)"));
  } else {
    v.coopmat = k.coopmat_why;
  }
  v.int_dot = k.quant_int_dot ? "on"
              : caps.integer_dot
                  ? "off (the device has it; --int8-activations turns it on for quantized weights)"
                  : "absent (the device lacks shaderIntegerDotProduct)";
  v.fused = k.matvec_fused ? "on" : "off (too few descriptors per stage; --unfused is the same path)";
  return v;
}

// What reach would run on `caps` (a device with a profile applied, or a profile alone), one
// (key, readable value) per line, for `reach info --device-profile`.
std::vector<std::pair<std::string, std::string>> plan(const Capabilities& caps) {
  const KernelConfig k = KernelConfig::from(caps, cli_settings().kernels);
  std::vector<std::pair<std::string, std::string>> out;
  const char* modes[] = {"row per lane (registers, no reduction)", "subgroup per row (subgroupAdd over K)",
                         "shared-memory reduction over K"};
  out.push_back({"matvec_mode", modes[std::min<uint32_t>(k.matvec_mode, 2)] + std::string(", workgroup ") +
                                    std::to_string(k.matvec_wg) +
                                    (caps.has_subgroup_arithmetic() ? "" : " (no subgroup arithmetic in compute)")});
  const std::string f32_gemm = k.gemm_shared ? "f32 shared-memory tiles " + std::to_string(k.gemm_tile_m) + "x" +
                                                   std::to_string(k.gemm_tile_n)
                                             : "f32 register tiles" + std::string(k.gemm_bcast ? " (subgroup broadcast)" : "");
  const std::string cm = k.coopmat.valid() ? "cooperative matrix " + std::to_string(k.coopmat.cm) + "x" +
                                                 std::to_string(k.coopmat.cn) + "x" + std::to_string(k.coopmat.ck)
                                           : "";
  out.push_back({"gemm_float", k.coopmat.valid() && k.coopmat_auto ? cm : f32_gemm});
  out.push_back({"gemm_quantized", k.coopmat.valid() && (k.coopmat_auto || k.coopmat_auto_quant) ? cm
                                   : k.quant_int_dot ? "integer dot (int8 activations)"
                                                     : f32_gemm + (caps.integer_dot ? " (integer dot: --int8-activations)" : "")});
  const uint32_t fused = std::max<uint32_t>(spec::LinearMatvecFusedQBindings::count, spec::LinearMatvecFusedBindings::count);
  out.push_back({"decode", k.matvec_fused ? "fused mat-vec (binds up to " + std::to_string(fused) + " buffers)"
                                          : "unfused (the fused mat-vec binds " + std::to_string(fused) + " buffers; " +
                                                std::to_string(caps.max_stage_storage_buffers) + " storage buffers per stage)"});
  // The fused attention decode binds them all (5 as texel buffers on CPU devices); where they do not fit,
  // decode stores the new row, then attends with the unfused kernel's first bindings (kernels/attention.cpp).
  const uint32_t attn = spec::AttentionDecodeBindings::count, attn_unfused = spec::AttentionDecodeBindings::B_SINK;
  const bool attn_fits = attn <= caps.max_stage_storage_buffers && attn <= caps.max_stage_resources;
  const bool attn_fits_tex = attn - 5 <= caps.max_stage_storage_buffers && 5 <= caps.max_stage_sampled &&
                             attn <= caps.max_stage_resources;
  const std::string attn_else = "kv_store, then the unfused decode's " + std::to_string(attn_unfused);
  out.push_back({"descriptors", std::to_string(caps.max_stage_storage_buffers) + " storage, " +
                                    std::to_string(caps.max_stage_sampled) + " texel per stage; the fused attention decode binds " +
                                    std::to_string(attn) + " buffers" +
                                    (attn_fits        ? ""
                                     : attn_fits_tex ? " (fits only where 5 are texel buffers: CPU devices; else " + attn_else + ")"
                                                     : " (more than the device allows: " + attn_else + ")")});
  out.push_back({"max_binding", std::to_string(k.max_binding >> 20) + " MiB; a larger weight is split by rows into "
                                "chunks of at most that (kernels/binding.cpp)"});
  const bool varies = caps.subgroup_min != caps.subgroup_max;
  out.push_back({"subgroup", std::to_string(caps.subgroup_size) +
                                 (!varies ? " (fixed width: nothing to pin)"
                                  : caps.subgroup_size_control
                                      ? " (pinned per pipeline within " + std::to_string(caps.subgroup_min) + "-" +
                                            std::to_string(caps.subgroup_max) + ")"
                                      : " (not pinned: the width may vary " + std::to_string(caps.subgroup_min) + "-" +
                                            std::to_string(caps.subgroup_max) + ", kernels assume no fixed size)")});
  const auto dims = [](const uint32_t v[3]) {
    return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
  };
  out.push_back({"storage_alignment", std::to_string(caps.min_storage_buffer_offset_alignment) + " bytes"});
  out.push_back({"texel_alignment", std::to_string(caps.min_texel_buffer_offset_alignment) + " bytes"});
  out.push_back({"push_constants", std::to_string(caps.max_push_constants) + " bytes"});
  out.push_back({"workgroup_size", dims(caps.max_workgroup_size) + ", " +
                                       std::to_string(caps.max_workgroup_invocations) + " invocations"});
  out.push_back({"workgroup_count", dims(caps.max_workgroup_count)});
  out.push_back({"texel_elements", std::to_string(caps.max_texel_buffer_elements)});
  std::string texel_formats;
  for (size_t i = 0; i < std::size(caps.uniform_texel); ++i) texel_formats += caps.uniform_texel[i] ? '1' : '0';
  out.push_back({"uniform_texel_formats", texel_formats + " (Capabilities::kTexelFormats)"});
  out.push_back({"weights", caps.storage_16bit ? "f16/bf16 stay 16-bit (storageBuffer16BitAccess)"
                                               : "converted to f32 (no storageBuffer16BitAccess)"});
  const Variants v = variants(caps);
  out.push_back({"cooperative_matrix_gemm", v.coopmat});
  out.push_back({"integer_dot", v.int_dot});
  return out;
}

void print_plan(const char* title, const Capabilities& caps) {
  std::printf("   %s: %s\n", title, caps.summary().c_str());
  for (const auto& [key, value] : plan(caps)) std::printf("     %-24s %s\n", key.c_str(), value.c_str());
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int cmd_info(const Args& args) {
  bool json = false;
  std::string profile_file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") json = true;
    else if (a == "--device-profile") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "reach info: error: --device-profile needs a Vulkan Profiles JSON file\n");
        return 2;
      }
      profile_file = args[++i];
    }
    else if (a == "-m" || a == "--model") {
      // The model's config (config.json or GGUF metadata) without loading its weights: family, sizes,
      // experts, total and active parameters.
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "reach info: error: %s needs a model path\n", a.c_str());
        return 2;
      }
      const ModelConfig c = load_model_config_at(resolve_model_path(args[i + 1]));
      std::printf("%s\n", c.describe().c_str());
      if (!c.is_moe()) std::printf("  matrix parameters: %llu\n", (unsigned long long)c.matrix_params());
      std::printf("  KV cache per token (keys + values, all layers; -ctk / -ctv):");
      for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0, KvType::q4_0}) {
        const uint32_t d = uint32_t(c.head_dim);
        if (!kv_type_fits(t, d)) {
          std::printf(" %s n/a (head_dim %u)", kv_type_name(t), d);
          continue;
        }
        const uint64_t per = uint64_t(c.n_layers) * c.n_kv_heads * 2 * kv_row_bytes(t, d);
        std::printf(" %s %llu bytes%s%s", kv_type_name(t), (unsigned long long)per,
                    t == kFrontEndKvType ? " (default)" : "", t == KvType::q4_0 ? "" : ",");
      }
      std::printf("\n");
      return 0;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: reach info [--json] [-m MODEL] [--device-profile FILE]\n"
                  "Lists the Vulkan devices (REACH_DEVICE picks one by index or name), their capabilities and\n"
                  "the kernel variants reach chooses for each (cooperative-matrix GEMM, integer dot, fused\n"
                  "decode mat-vec), and whether the validation layer (REACH_VALIDATION=1) is on.\n"
                  "  --json      the same as JSON on stdout\n"
                  "  -m MODEL    describe the model (config.json or GGUF metadata) instead: family, sizes,\n"
                  "              experts and top-k, total and active parameters\n"
                  "  --device-profile FILE  what reach would choose under a Vulkan Profiles JSON file (as\n"
                  "              REACH_DEVICE_PROFILE): the profile applied to each device here, and the\n"
                  "              profile alone; a profile cannot change the real subgroup width, the device\n"
                  "              type or the speed of what the device emulates\n");
      return 0;
    } else {
      std::fprintf(stderr, "reach info: error: unknown option '%s' (see reach info --help)\n", a.c_str());
      return 2;
    }
  }
  // The layer is on exactly when run / bench / eval would turn it on; its
  // messages (here about the enumeration itself) go to stderr.
  const bool requested = cli_settings().validation;
  const bool installed = requested && validation_layer_installed(cli_settings());
  const bool validation = requested && installed;
  if (requested && !installed)
    std::fprintf(stderr, "reach info: REACH_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed "
                         "(apt-get install vulkan-validationlayers); run / bench / eval would fail\n");
  Settings settings = cli_settings();
  if (!profile_file.empty()) settings.device_profile = profile_file;
  std::unique_ptr<DeviceProfile> profile;
  if (!settings.device_profile.empty()) profile = std::make_unique<DeviceProfile>(load_device_profile(settings.device_profile));
  if (profile && !json) {
    std::printf("device profile %s (%s, Vulkan %u.%u): reach uses only what both it and the device allow.\n"
                "  A profile cannot change the real subgroup width (only whether and within what range it is\n"
                "  pinned), the device type (a CPU device keeps its CPU kernel variants), memory heaps, or the\n"
                "  speed of features the real device emulates.\n",
                profile->name.c_str(), profile->file.c_str(), VK_API_VERSION_MAJOR(profile->api_version),
                VK_API_VERSION_MINOR(profile->api_version));
    if (const std::string why = profile_refusal(*profile); !why.empty()) std::printf("  refused: %s\n", why.c_str());
    print_plan("profile alone", profile_capabilities(*profile));
    if (profile->cooperative_matrix())
      std::printf("     %-24s the profile has VK_KHR_cooperative_matrix (cooperativeMatrix, shaderFloat16,\n"
                  "     %-24s vulkanMemoryModel), but profiles list no matrix shapes, which reach needs to pick a tile\n",
                  "cooperative_matrix", "");
  }
  auto devices = Device::list(validation, {}, settings);
  if (json) {
    // Still one array of devices; each says whether validation is on for it.
    std::printf("[");
    for (size_t i = 0; i < devices.size(); ++i) {
      std::string obj = devices[i].caps.to_json();
      obj.insert(1, "\"index\":" + std::to_string(i) + ",\"validation\":" + (validation ? "true" : "false") + ",");
      const Variants v = variants(devices[i].caps);
      obj.insert(obj.size() - 1, ",\"variants\":{\"cooperative_matrix_gemm\":" + json_string(v.coopmat) +
                                     ",\"integer_dot\":" + json_string(v.int_dot) +
                                     ",\"fused_decode_matvec\":" + json_string(v.fused) + "}");
      if (profile) {
        std::string p = ",\"profile\":{\"name\":" + json_string(profile->name) + ",\"file\":" + json_string(profile->file);
        for (const auto& [key, value] : plan(devices[i].caps)) p += ",\"" + key + "\":" + json_string(value);
        obj.insert(obj.size() - 1, p + "}");
      }
      std::printf("%s%s", i ? "," : "", obj.c_str());
    }
    std::printf("]\n");
  } else {
    for (const auto& d : devices) {
      std::printf("%u: %s\n", d.index, d.caps.summary().c_str());
      const Variants v = variants(d.caps);
      std::printf("   cooperative-matrix GEMM: %s\n   integer dot: %s\n   fused decode mat-vec: %s\n", v.coopmat.c_str(),
                  v.int_dot.c_str(), v.fused.c_str());
      if (profile) print_plan("with the profile", d.caps);
    }
    std::printf("validation: %s\n", validation ? "on (REACH_VALIDATION: Khronos validation layer, messages on stderr)"
                                    : requested ? "off (REACH_VALIDATION is set but the layer is not installed)"
                                                : "off (REACH_VALIDATION=1 turns the Khronos validation layer on)");
  }
  return 0;
}

}  // namespace reach::cli
