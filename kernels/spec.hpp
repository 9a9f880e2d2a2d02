#pragma once
// Typed specialization-constant and push-constant structs generated from the
// contract lists in shaders/spec/*.h, which the shaders include too
// (shaders/contract.glsl): one list, so ids, order and types cannot drift.
//
//   REACH_SPEC_STRUCT(GemmSpec, "shaders/spec/linear_gemm.h")  -- see below
//
// The lists also carry each kernel's binding numbers (BINDING(n, NAME): a
// struct of constexpr B_NAME per kernel, binding_struct.inc, the shader's
// `const uint B_NAME`) and named mode values (CONST_UINT(NAME, value):
// constexpr NAME here, const_list.inc).  Every shader stem has its list,
// shaders/spec/<stem>.h.
//
// C++ has no macro that expands to an #include, so each struct is declared by
// defining REACH_SPEC_NAME / REACH_SPEC_FILE and including spec_struct.inc
// (and REACH_PUSH_NAME / REACH_PUSH_FILE with push_struct.inc).
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "engine/memory.hpp"
#include "engine/pipeline.hpp"

namespace reach::spec {

// True when no two entries of `ids` are equal (checked by static_assert).
template <size_t N>
constexpr bool ids_unique(const uint32_t (&ids)[N]) {
  for (size_t i = 0; i < N; ++i)
    for (size_t j = i + 1; j < N; ++j)
      if (ids[i] == ids[j]) return false;
  return true;
}

// True when `ids` are exactly 0..N-1 in some order (bindings: PipelineDesc::buffers).
template <size_t N>
constexpr bool ids_dense(const uint32_t (&ids)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (ids[i] >= N) return false;
  return ids_unique(ids);
}

#define REACH_SPEC_NAME ElementwiseSpec
#define REACH_SPEC_FILE "shaders/spec/elementwise.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME NormSpec
#define REACH_SPEC_FILE "shaders/spec/norm.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME GemmSpec
#define REACH_SPEC_FILE "shaders/spec/linear_gemm.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME GemmCoopmatSpec
#define REACH_SPEC_FILE "shaders/spec/linear_gemm_coopmat.h"
#include "kernels/spec_struct.inc"
#define REACH_SPEC_NAME GemmCoopmatQSpec
#define REACH_SPEC_FILE "shaders/spec/linear_gemm_coopmat_q.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME MatvecSpec
#define REACH_SPEC_FILE "shaders/spec/linear_matvec.h"
#include "kernels/spec_struct.inc"

#define REACH_PUSH_NAME LinearPush
#define REACH_PUSH_FILE "shaders/spec/linear_push.h"
#include "kernels/push_struct.inc"

#define REACH_SPEC_NAME MatvecFusedSpec
#define REACH_SPEC_FILE "shaders/spec/linear_matvec_fused.h"
#include "kernels/spec_struct.inc"
#define REACH_PUSH_NAME LinearFusedPush
#define REACH_PUSH_FILE "shaders/spec/linear_matvec_fused_push.h"
#include "kernels/push_struct.inc"
#define REACH_SPEC_NAME MatvecFusedQSpec
#define REACH_SPEC_FILE "shaders/spec/linear_matvec_fused_q.h"
#include "kernels/spec_struct.inc"
#define REACH_PUSH_NAME LinearFusedQPush
#define REACH_PUSH_FILE "shaders/spec/linear_matvec_fused_q_push.h"
#include "kernels/push_struct.inc"
#define REACH_SPEC_NAME EmbedQSpec
#define REACH_SPEC_FILE "shaders/spec/embed_q.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME MatvecQSpec
#define REACH_SPEC_FILE "shaders/spec/linear_matvec_q.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME GemmQSpec
#define REACH_SPEC_FILE "shaders/spec/linear_gemm_q.h"
#include "kernels/spec_struct.inc"

#define REACH_PUSH_NAME LinearQPush
#define REACH_PUSH_FILE "shaders/spec/linear_q_push.h"
#include "kernels/push_struct.inc"

#define REACH_SPEC_NAME QuantizeQ8Spec
#define REACH_SPEC_FILE "shaders/spec/linear_quantize_q8.h"
#include "kernels/spec_struct.inc"

#define REACH_PUSH_NAME QuantizeQ8Push
#define REACH_PUSH_FILE "shaders/spec/linear_quantize_q8_push.h"
#include "kernels/push_struct.inc"

#define REACH_SPEC_NAME LinearQ8Spec
#define REACH_SPEC_FILE "shaders/spec/linear_q8.h"
#include "kernels/spec_struct.inc"

#define REACH_PUSH_NAME LinearQ8Push
#define REACH_PUSH_FILE "shaders/spec/linear_q8_push.h"
#include "kernels/push_struct.inc"

#define REACH_SPEC_NAME AttentionPrefillSpec
#define REACH_SPEC_FILE "shaders/spec/attention_prefill.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME AttentionDecodeSpec
#define REACH_SPEC_FILE "shaders/spec/attention_decode.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME AttentionKvStoreSpec
#define REACH_SPEC_FILE "shaders/spec/attention_kv_store.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME AttentionCombineSpec
#define REACH_SPEC_FILE "shaders/spec/attention_combine.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME AttentionKvCalibrateSpec
#define REACH_SPEC_FILE "shaders/spec/attention_kv_calibrate.h"
#include "kernels/spec_struct.inc"

#define REACH_PUSH_NAME AttentionPush
#define REACH_PUSH_FILE "shaders/spec/attention_push.h"
#include "kernels/push_struct.inc"

#define REACH_SPEC_NAME MoeMatvecSpec
#define REACH_SPEC_FILE "shaders/spec/moe_matvec.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME MoeMatvecQSpec
#define REACH_SPEC_FILE "shaders/spec/moe_matvec_q.h"
#include "kernels/spec_struct.inc"

#define REACH_PUSH_NAME MoeMatvecPush
#define REACH_PUSH_FILE "shaders/spec/moe_matvec_push.h"
#include "kernels/push_struct.inc"

// Binding numbers, one struct per kernel (shaders/spec/<stem>.h).
#define REACH_BIND_NAME MoeMatvecBindings
#define REACH_BIND_FILE "shaders/spec/moe_matvec.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME MoeMatvecQBindings
#define REACH_BIND_FILE "shaders/spec/moe_matvec_q.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME MoeCombineBindings
#define REACH_BIND_FILE "shaders/spec/moe_combine.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME MoeRouteBindings
#define REACH_BIND_FILE "shaders/spec/moe_route.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME MoeGroupBindings
#define REACH_BIND_FILE "shaders/spec/moe_group.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME MoeGatherBindings
#define REACH_BIND_FILE "shaders/spec/moe_gather.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME MoeScatterBindings
#define REACH_BIND_FILE "shaders/spec/moe_scatter.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME ElementwiseAddBindings
#define REACH_BIND_FILE "shaders/spec/elementwise_add.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME ElementwiseSiluMulBindings
#define REACH_BIND_FILE "shaders/spec/elementwise_silu_mul.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME ElementwiseGeluTanhMulBindings
#define REACH_BIND_FILE "shaders/spec/elementwise_gelu_tanh_mul.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME ElementwiseScaleBindings
#define REACH_BIND_FILE "shaders/spec/elementwise_scale.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME ElementwiseSoftcapBindings
#define REACH_BIND_FILE "shaders/spec/elementwise_softcap.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME ElementwiseBf16ToF32Bindings
#define REACH_BIND_FILE "shaders/spec/elementwise_bf16_to_f32.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME ElementwiseF32ToF16Bindings
#define REACH_BIND_FILE "shaders/spec/elementwise_f32_to_f16.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME EmbedBindings
#define REACH_BIND_FILE "shaders/spec/embed.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME EmbedQBindings
#define REACH_BIND_FILE "shaders/spec/embed_q.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME NormRmsBindings
#define REACH_BIND_FILE "shaders/spec/norm_rms.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME NormSoftmaxBindings
#define REACH_BIND_FILE "shaders/spec/norm_softmax.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME LinearGemmBindings
#define REACH_BIND_FILE "shaders/spec/linear_gemm.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME LinearMatvecBindings
#define REACH_BIND_FILE "shaders/spec/linear_matvec.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME LinearMatvecFusedBindings
#define REACH_BIND_FILE "shaders/spec/linear_matvec_fused.h"
#include "kernels/binding_struct.inc"
#define REACH_BIND_NAME LinearMatvecFusedQBindings
#define REACH_BIND_FILE "shaders/spec/linear_matvec_fused_q.h"
#include "kernels/binding_struct.inc"
#define REACH_BIND_NAME LinearGemmQBindings
#define REACH_BIND_FILE "shaders/spec/linear_gemm_q.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME LinearGemmCoopmatBindings
#define REACH_BIND_FILE "shaders/spec/linear_gemm_coopmat.h"
#include "kernels/binding_struct.inc"
#define REACH_BIND_NAME LinearGemmCoopmatQBindings
#define REACH_BIND_FILE "shaders/spec/linear_gemm_coopmat_q.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME LinearMatvecQBindings
#define REACH_BIND_FILE "shaders/spec/linear_matvec_q.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME LinearQuantizeQ8Bindings
#define REACH_BIND_FILE "shaders/spec/linear_quantize_q8.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME LinearQ8Bindings
#define REACH_BIND_FILE "shaders/spec/linear_q8.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME AttentionKvStoreBindings
#define REACH_BIND_FILE "shaders/spec/attention_kv_store.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME AttentionPrefillBindings
#define REACH_BIND_FILE "shaders/spec/attention_prefill.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME AttentionDecodeBindings
#define REACH_BIND_FILE "shaders/spec/attention_decode.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME AttentionDecodeLanesBindings
#define REACH_BIND_FILE "shaders/spec/attention_decode_lanes.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME AttentionCombineBindings
#define REACH_BIND_FILE "shaders/spec/attention_combine.h"
#include "kernels/binding_struct.inc"

#define REACH_BIND_NAME AttentionKvCalibrateBindings
#define REACH_BIND_FILE "shaders/spec/attention_kv_calibrate.h"
#include "kernels/binding_struct.inc"

// Named values of mode constants.
#define REACH_CONST_FILE "shaders/spec/linear_matvec_mode.h"
#include "kernels/const_list.inc"

#define REACH_CONST_FILE "shaders/spec/linear_matvec_fusion.h"
#include "kernels/const_list.inc"
#define REACH_CONST_FILE "shaders/spec/attention_modes.h"
#include "kernels/const_list.inc"
#define REACH_CONST_FILE "shaders/spec/moe_act.h"
#include "kernels/const_list.inc"

// The buffers of one dispatch by binding number, named from the kernel's
// list (B = one of the *Bindings structs below):
//   bound<B>({{B::B_X, x}, {B::B_W, w}, {B::B_Y, y}})
// puts each range at its binding and throws Error(internal) unless every
// binding 0..B::count-1 gets exactly one.
template <class B>
std::array<BufferRange, B::count> bound(std::initializer_list<std::pair<uint32_t, BufferRange>> list) {
  std::array<BufferRange, B::count> out{};
  std::array<bool, B::count> set{};
  for (const auto& [b, range] : list) {
    if (b >= B::count || set[b])
      throw Error(ErrorCode::internal, "binding " + std::to_string(b) + " out of range or bound twice");
    set[b] = true;
    out[b] = range;
  }
  for (uint32_t b = 0; b < B::count; ++b)
    if (!set[b]) throw Error(ErrorCode::internal, "binding " + std::to_string(b) + " left unbound");
  return out;
}

}  // namespace reach::spec
