// `reach info`: one readable line per Vulkan device (or JSON), the kernel variants reach chooses
// for it, and whether the Khronos validation layer is on (REACH_VALIDATION=1).
#include <cstdio>
#include <string>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
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
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") json = true;
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
      return 0;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: reach info [--json] [-m MODEL]\n"
                  "Lists the Vulkan devices (REACH_DEVICE picks one by index or name), their capabilities and\n"
                  "the kernel variants reach chooses for each (cooperative-matrix GEMM, integer dot, fused\n"
                  "decode mat-vec), and whether the validation layer (REACH_VALIDATION=1) is on.\n"
                  "  --json      the same as JSON on stdout\n"
                  "  -m MODEL    describe the model (config.json or GGUF metadata) instead: family, sizes,\n"
                  "              experts and top-k, total and active parameters\n");
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
  auto devices = Device::list(validation, {}, cli_settings());
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
      std::printf("%s%s", i ? "," : "", obj.c_str());
    }
    std::printf("]\n");
  } else {
    for (const auto& d : devices) {
      std::printf("%u: %s\n", d.index, d.caps.summary().c_str());
      const Variants v = variants(d.caps);
      std::printf("   cooperative-matrix GEMM: %s\n   integer dot: %s\n   fused decode mat-vec: %s\n", v.coopmat.c_str(),
                  v.int_dot.c_str(), v.fused.c_str());
    }
    std::printf("validation: %s\n", validation ? "on (REACH_VALIDATION: Khronos validation layer, messages on stderr)"
                                    : requested ? "off (REACH_VALIDATION is set but the layer is not installed)"
                                                : "off (REACH_VALIDATION=1 turns the Khronos validation layer on)");
  }
  return 0;
}

}  // namespace reach::cli
