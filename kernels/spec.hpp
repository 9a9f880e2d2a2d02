#pragma once
// Typed specialization-constant and push-constant structs generated from the
// contract lists in shaders/spec/*.h, which the shaders include too
// (shaders/contract.glsl): one list, so ids, order and types cannot drift.
//
//   REACH_SPEC_STRUCT(GemmSpec, "shaders/spec/linear_gemm.h")  -- see below
//
// C++ has no macro that expands to an #include, so each struct is declared by
// defining REACH_SPEC_NAME / REACH_SPEC_FILE and including spec_struct.inc
// (and REACH_PUSH_NAME / REACH_PUSH_FILE with push_struct.inc).
#include <cstdint>

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

#define REACH_SPEC_NAME ElementwiseSpec
#define REACH_SPEC_FILE "shaders/spec/elementwise.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME NormSpec
#define REACH_SPEC_FILE "shaders/spec/norm.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME GemmSpec
#define REACH_SPEC_FILE "shaders/spec/linear_gemm.h"
#include "kernels/spec_struct.inc"

#define REACH_SPEC_NAME MatvecSpec
#define REACH_SPEC_FILE "shaders/spec/linear_matvec.h"
#include "kernels/spec_struct.inc"

#define REACH_PUSH_NAME LinearPush
#define REACH_PUSH_FILE "shaders/spec/linear_push.h"
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

#define REACH_PUSH_NAME AttentionPush
#define REACH_PUSH_FILE "shaders/spec/attention_push.h"
#include "kernels/push_struct.inc"

}  // namespace reach::spec
