// The host <-> shader contract cannot drift: WType against its one list
// (base/wtype_list.h), every ShaderId against a shader file stem, and the
// bindings each embedded SPIR-V module declares against its kernel's
// BINDING list (shaders/spec/<stem>.h).  No device needed.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <string_view>

#include "base/wtype.hpp"
#include "engine/shader_registry.hpp"
#include "kernels/spec.hpp"
#include "tests/support/files.hpp"

using namespace reach;

TEST_CASE("WType: the enum, its names and kWTypeCount follow base/wtype_list.h") {
  uint32_t n = 0;
#define WTYPE(id, name, NAME)                                \
  CHECK(static_cast<uint32_t>(WType::name) == id);           \
  CHECK(std::string_view(wtype_name(WType::name)) == #name); \
  CHECK(wtype_from_name(#NAME) == WType::name);              \
  CHECK(id == n++);
#include "base/wtype_list.h"
#undef WTYPE
  CHECK(n == kWTypeCount);
}

namespace {

// The stems of shaders/*.comp.
std::set<std::string> shader_stems() {
  std::set<std::string> stems;
  for (const auto& e : std::filesystem::directory_iterator(test::source_root() / "shaders"))
    if (e.path().extension() == ".comp") stems.insert(e.path().stem().string());
  return stems;
}

bool is_variant(std::string_view suffix) {
  if (suffix.empty()) return true;
  // [_unfused] then [_tex | _xtex] then [_f32 | _f16 | _bf16], as tools/check_kernel_names.py reads them.
  for (std::string_view form : {"", "_unfused"})
    for (std::string_view access : {"", "_tex", "_xtex"})
      for (std::string_view type : {"", "_f32", "_f16", "_bf16"})
        if (!(form.empty() && access.empty() && type.empty()) &&
            suffix == std::string(form) + std::string(access) + std::string(type))
          return true;
  return false;
}

// Binding numbers an embedded SPIR-V module decorates (OpDecorate ... Binding n).
std::set<uint32_t> spirv_bindings(const EmbeddedShader& s) {
  std::set<uint32_t> out;
  for (size_t i = 5; i < s.words;) {
    const uint32_t op = s.code[i] & 0xffff, count = s.code[i] >> 16;
    if (count == 0) break;
    if (op == 71 && count >= 4 && s.code[i + 2] == 33) out.insert(s.code[i + 3]);  // OpDecorate, Binding
    i += count;
  }
  return out;
}

template <class B>
void check_bindings(std::string_view stem) {
  for (const EmbeddedShader& s : embedded_shaders()) {
    const std::string_view name = s.name;
    if (name.substr(0, stem.size()) != stem || !is_variant(name.substr(stem.size()))) continue;
    for (uint32_t b : spirv_bindings(s)) {
      INFO(name, " declares binding ", b);
      CHECK(b < B::count);
    }
  }
}

}  // namespace

TEST_CASE("every ShaderId is a shader file stem or stem_<variant>") {
  const auto stems = shader_stems();
  REQUIRE(!stems.empty());
  for (const EmbeddedShader& s : embedded_shaders()) {
    const std::string name = s.name;
    bool found = false;
    for (const std::string& stem : stems)
      if (name.compare(0, stem.size(), stem) == 0 && is_variant(std::string_view(name).substr(stem.size())))
        found = true;
    INFO("ShaderId ", name);
    CHECK(found);
  }
}

TEST_CASE("each kernel's SPIR-V binds only the numbers of its BINDING list") {
  check_bindings<spec::ElementwiseAddBindings>("elementwise_add");
  check_bindings<spec::ElementwiseSiluMulBindings>("elementwise_silu_mul");
  check_bindings<spec::ElementwiseGeluTanhMulBindings>("elementwise_gelu_tanh_mul");
  check_bindings<spec::ElementwiseScaleBindings>("elementwise_scale");
  check_bindings<spec::ElementwiseSoftcapBindings>("elementwise_softcap");
  check_bindings<spec::ElementwiseBf16ToF32Bindings>("elementwise_bf16_to_f32");
  check_bindings<spec::ElementwiseF32ToF16Bindings>("elementwise_f32_to_f16");
  check_bindings<spec::MoeRouteBindings>("moe_route");
  check_bindings<spec::MoeGroupBindings>("moe_group");
  check_bindings<spec::MoeGatherBindings>("moe_gather");
  check_bindings<spec::MoeScatterBindings>("moe_scatter");
  check_bindings<spec::MoeMatvecBindings>("moe_matvec");
  check_bindings<spec::MoeMatvecQBindings>("moe_matvec_q");
  check_bindings<spec::MoeCombineBindings>("moe_combine");
  check_bindings<spec::EmbedBindings>("embed");
  check_bindings<spec::EmbedQBindings>("embed_q");
  check_bindings<spec::NormRmsBindings>("norm_rms");
  check_bindings<spec::NormSoftmaxBindings>("norm_softmax");
  check_bindings<spec::LinearGemmBindings>("linear_gemm");
  check_bindings<spec::LinearMatvecBindings>("linear_matvec");
  check_bindings<spec::LinearGemmQBindings>("linear_gemm_q");
  check_bindings<spec::LinearMatvecQBindings>("linear_matvec_q");
  check_bindings<spec::LinearGemmCoopmatBindings>("linear_gemm_coopmat");
  check_bindings<spec::LinearGemmCoopmatQBindings>("linear_gemm_coopmat_q");
  check_bindings<spec::LinearMatvecFusedBindings>("linear_matvec_fused");
  check_bindings<spec::LinearMatvecFusedQBindings>("linear_matvec_fused_q");
  check_bindings<spec::AttentionKvStoreBindings>("attention_kv_store");
  check_bindings<spec::AttentionKvCalibrateBindings>("attention_kv_calibrate");
  check_bindings<spec::AttentionPrefillBindings>("attention_prefill");
  check_bindings<spec::AttentionDecodeBindings>("attention_decode");
  check_bindings<spec::AttentionDecodeLanesBindings>("attention_decode_lanes");
  check_bindings<spec::AttentionCombineBindings>("attention_combine");
}

TEST_CASE("the fused mat-vecs declare every binding of their lists (the host binds them all)") {
  // Unused outputs, bias and norm are bound to stand-in ranges, and the
  // pipeline layout lists every binding: a kernel that stopped declaring one
  // would leave a descriptor the shader does not match.
  auto all = [](std::string_view stem, uint32_t count) {
    size_t seen = 0;
    for (const EmbeddedShader& s : embedded_shaders()) {
      const std::string_view name = s.name;
      if (name.substr(0, stem.size()) != stem || !is_variant(name.substr(stem.size()))) continue;
      ++seen;
      INFO(name);
      CHECK(spirv_bindings(s).size() == count);
    }
    CHECK(seen > 0);
  };
  all("linear_matvec_fused", spec::LinearMatvecFusedBindings::count);
  all("linear_matvec_fused_q", spec::LinearMatvecFusedQBindings::count);
  // Push blocks within Vulkan's guaranteed 128 bytes.
  static_assert(sizeof(spec::LinearFusedPush) <= 128 && sizeof(spec::LinearFusedQPush) <= 128);
}
