// The cooperative-matrix GEMM: Kernels::linear_gemm_coopmat, and Kernels::linear for M >=
// KernelConfig::coopmat_min_m where the device has VK_KHR_cooperative_matrix
// (shaders/linear_gemm_coopmat.comp for f32 / f16 / bf16 W, linear_gemm_coopmat_q.comp for the
// block formats).  X is rounded to f16 and W converted or dequantized to f16 in shared memory;
// the products accumulate in f32.  The contract is linear_gemm's: the same Act / Mat, Y row-major
// with W's row chunks (split past maxStorageBufferRange) writing columns of Y.
//
// Storage buffers only: the texel-buffer paths of linear.cpp serve llvmpipe's scalar SSBO loads,
// and a device with cooperative matrices is one whose SSBO loads are not the bottleneck.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/shader_registry.hpp"
#include "kernels/kernels.hpp"
#include "kernels/quant_binding.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"

namespace reach {

namespace {

constexpr ShaderId kCoopmatFloat[3] = {ShaderId::linear_gemm_coopmat_f32, ShaderId::linear_gemm_coopmat_f16,
                                       ShaderId::linear_gemm_coopmat_bf16};

// The shaders' shared arrays (linear_gemm_coopmat.glsl): X (twice with xsplit) and W slabs of f16
// with rows of BK + 8, and one f32 CM x CN patch per subgroup.
uint64_t shared_bytes_for(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t sg, uint32_t cm, uint32_t cn, bool xsplit) {
  return uint64_t((xsplit ? 2 : 1) * bm + bn) * (bk + 8) * 2 + uint64_t(sg) * cm * cn * 4;
}

}  // namespace

uint64_t CoopmatTile::shared_bytes() const { return shared_bytes_for(bm, bn, bk, sg_m * sg_n, cm, cn, xsplit); }

CoopmatTile choose_coopmat_tile(const Capabilities& caps, std::string& why) {
  CoopmatTile t;
  // The subgroup size the shader's subgroups will have: the device's fixed one, else pinned.
  if (caps.subgroup_size == 0) {
    why = "the device reports no subgroup size";
    return {};
  }
  const uint32_t sub = caps.fixed_subgroup();
  const bool pin = caps.subgroup_min != caps.subgroup_max;
  if (sub == 0) {
    why = "the subgroup size varies and the device cannot pin it for compute shaders (subgroupSizeControl, "
          "requiredSubgroupSizeStages)";
    return {};
  }
  // lavapipe (Mesa's CPU driver) lowers each 8 x 8 matrix to one value per lane in 64 / width vectors and
  // loops over `width` of them, so only 8 lanes work: at 16 (LP_NATIVE_VECTOR_WIDTH=512) Mesa 26.1 reads past
  // the matrix and crashes in vkCreateComputePipelines (lvp_nir_lower_cooperative_matrix.c).
  constexpr uint32_t kMesaVendor = 0x10005;
  if (caps.is_cpu() && caps.vendor_id == kMesaVendor && sub != 8) {
    why = "lavapipe's cooperative matrices work only with 8-lane subgroups (LP_NATIVE_VECTOR_WIDTH=256); this one "
          "runs " + std::to_string(sub);
    return {};
  }
  // The largest f32-accumulating shape whose K divides the 32-deep slab; M and N up to 32, so a
  // 2 x 2 block of them stays a tile of at most 128.
  const CoopmatShape* best = nullptr;
  for (const CoopmatShape& s : caps.coopmat_shapes) {
    if (s.f16_acc || s.m == 0 || s.n == 0 || s.k == 0 || 32 % s.k || s.m > 32 || s.n > 32) continue;
    const uint64_t size = uint64_t(s.m) * s.n * s.k, best_size = best ? uint64_t(best->m) * best->n * best->k : 0;
    if (!best || size > best_size || (size == best_size && s.k > best->k)) best = &s;
  }
  if (!best) {
    why = "the device lists no f16 x f16 -> f32 subgroup shape with K dividing 32";
    return {};
  }
  t.cm = best->m;
  t.cn = best->n;
  t.ck = best->k;
  t.bk = 32;
  t.subgroup = sub;
  t.pin_subgroup = pin;
  // 2 x 2 subgroups of 2 x 2 matrices, halved (subgroups first) until the limits allow.
  for (uint32_t sg : {2u, 1u})
    for (uint32_t f : {2u, 1u}) {
      const uint32_t wg = sg * sg * sub;
      const uint32_t bm = sg * f * t.cm, bn = sg * f * t.cn;
      if (wg > caps.max_workgroup_invocations || wg > caps.max_workgroup_size[0]) continue;
      if (shared_bytes_for(bm, bn, t.bk, sg * sg, t.cm, t.cn, t.xsplit) > caps.max_shared_memory) continue;
      t.sg_m = t.sg_n = sg;
      t.bm = bm;
      t.bn = bn;
      why.clear();
      return t;
    }
  why = "one subgroup's tile exceeds the workgroup or shared-memory limits";
  return {};
}

void KernelConfig::choose_coopmat(const Capabilities& caps, const KernelSettings& s) {
  coopmat = {};
  coopmat_auto = coopmat_auto_quant = false;
  if (s.coopmat == CoopmatUse::off) {
    coopmat_why = "off (REACH_COOPMAT=0)";
    return;
  }
  if (!embedded_shader(ShaderId::linear_gemm_coopmat_f16).built()) {
    coopmat_why = "not built (glslang lacks GL_KHR_cooperative_matrix; run tools/setup.sh)";
    return;
  }
  if (!caps.cooperative_matrix) {
    coopmat_why = caps.coopmat_shapes.empty() ? "absent (the device lacks VK_KHR_cooperative_matrix)"
                                              : "absent (cooperativeMatrix, shaderFloat16 or vulkanMemoryModel "
                                                "not available or not enabled)";
    return;
  }
  std::string why;
  coopmat = choose_coopmat_tile(caps, why);
  // X in one f16 half only (to compare: twice fewer products, 11 bits of X).
  if (!s.coopmat_xsplit) coopmat.xsplit = false;   // REACH_COOPMAT_XSPLIT=0
  coopmat_why = coopmat.valid() ? "" : "absent (" + why + ")";
  // On an H100 (NVIDIA 580.159), pp512 of a 1B-shaped model, this kernel (X as one f16 then) / the
  // f32 shared-memory GEMM: f16 weights 5975 / 6719 tok/s, Q4_0 7444 / 5800, Q4_K 6792 / 773.  So
  // GPUs use it for the block types only, every type with REACH_COOPMAT=1.  (X as one f16 also moved
  // f32 models' logits 8.7e-3 of their range: X is now two halves, tile.xsplit.)  CPU
  // devices emulate the matrices lane by lane (lavapipe, Mesa 26.1, 2 cores: SmolLM2-135M f16 pp512
  // 14.1 tok/s with them, 119.5 without): there only with REACH_COOPMAT=1.
  // REACH_COOPMAT=quant: the block types only, on any device (a CPU device then runs what a GPU would).
  const bool asked = s.coopmat == CoopmatUse::all, quant = s.coopmat == CoopmatUse::quant;
  coopmat_auto = coopmat.valid() && asked;
  coopmat_auto_quant = coopmat.valid() && (asked || quant || !caps.is_cpu());
}

namespace {

std::string shape(const Act& x, const Mat& w, const Act& y) {
  return "X[" + std::to_string(x.rows) + "," + std::to_string(x.cols) + "] W[" + std::to_string(w.rows) + "," +
         std::to_string(w.cols) + "]:" + wtype_name(w.type) + " Y[" + std::to_string(y.rows) + "," +
         std::to_string(y.cols) + "]";
}

template <class Spec>
Spec tile_spec(const CoopmatTile& t, bool aligned) {
  Spec s;
  s.wg = t.workgroup();
  s.bm = t.bm;
  s.bn = t.bn;
  s.bk = t.bk;
  s.cm = t.cm;
  s.cn = t.cn;
  s.ck = t.ck;
  s.sg_m = t.sg_m;
  s.sg_n = t.sg_n;
  s.aligned = aligned ? 1u : 0u;
  s.xsplit = t.xsplit ? 1u : 0u;
  return s;
}

}  // namespace

void Kernels::linear_gemm_coopmat(CommandList& cmd, const Act& x, const Mat& w, const Act& y) {
  const char* op = "linear_gemm_coopmat";
  const CoopmatTile& t = config_.coopmat;
  if (!t.valid())
    throw Error(ErrorCode::unsupported, std::string(op) + ": the cooperative-matrix GEMM is " +
                                            (config_.coopmat_why.empty() ? "off" : config_.coopmat_why));
  if (!x.buffer || !w.buffer || !y.buffer) throw Error(ErrorCode::internal, std::string(op) + ": null buffer");
  if (x.cols != w.cols || y.cols != w.rows || y.rows != x.rows || x.cols == 0)
    throw Error(ErrorCode::internal, std::string(op) + ": shape mismatch " + shape(x, w, y));
  if (x.rows == 0 || w.rows == 0) return;
  if (t.bm % (t.sg_m * t.cm) || t.bn % (t.sg_n * t.cn) || t.bk % t.ck || t.bk != 32)
    throw Error(ErrorCode::internal, std::string(op) + ": tile not a whole number of matrices per subgroup");
  const auto& caps = device_.caps();
  if (t.shared_bytes() > caps.max_shared_memory || t.workgroup() > caps.max_workgroup_invocations)
    throw Error(ErrorCode::internal, std::string(op) + ": tile exceeds the device's workgroup limits");
  if (x.offset % 4 || y.offset % 4)
    throw Error(ErrorCode::internal, std::string(op) + ": X and Y offsets must be multiples of 4");

  const uint32_t M = x.rows, N = w.rows, K = w.cols;
  const bool quant = wtype_is_quant(w.type);
  const uint64_t align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 16);
  const uint64_t max_binding = binding_span(caps, config_.max_binding);
  if (max_binding <= 2 * align) throw Error(ErrorCode::internal, std::string(op) + ": max_binding too small");
  const uint64_t room = max_binding - align;   // an aligned-down start adds < align bytes
  const uint64_t row_bytes = std::max<uint64_t>(uint64_t(K) * 4, uint64_t(N) * 4);
  if (row_bytes > room)
    throw Error(ErrorCode::unsupported, std::string(op) + ": one activation row of " + std::to_string(row_bytes) +
                                            " bytes exceeds maxStorageBufferRange");
  const uint32_t m_step = static_cast<uint32_t>(std::min<uint64_t>(M, room / row_bytes));
  const uint32_t required_subgroup = t.pin_subgroup ? t.subgroup : 0;

  // W row chunks, each within one binding (per plane for the block formats).
  std::vector<RowChunk> chunks;
  QuantWeightBinding qw;
  const uint32_t esize = quant ? 0 : wtype_size(w.type);
  if (quant) {
    KernelConfig storage = config_;
    storage.weights_texel = false;   // this kernel reads the planes as storage buffers
    qw = plan_quant_weight(caps, storage, w, op);
    chunks = qw.chunks;
  } else {
    if (w.type != WType::f32) require_16bit_storage(caps, std::string(op) + ": " + wtype_name(w.type) + " weights");
    if (w.offset % esize) throw Error(ErrorCode::internal, std::string(op) + ": W offset not a multiple of its element");
    chunks = split_rows(w, room, w.offset % align ? 1 : align);
  }

  for (uint32_t m0 = 0; m0 < M; m0 += m_step) {
    const uint32_t mc = std::min(m_step, M - m0);
    const Bound xb = bind_aligned(*x.buffer, x.offset + VkDeviceSize(m0) * K * 4, VkDeviceSize(mc) * K * 4, 4, align);
    const Bound yb = bind_aligned(*y.buffer, y.offset + VkDeviceSize(m0) * N * 4, VkDeviceSize(mc) * N * 4, 4, align);
    for (const RowChunk& c : chunks) {
      const uint32_t gx = groups_for(c.rows, t.bn), gy = groups_for(mc, t.bm);
      if (quant) {
        using B = spec::LinearGemmCoopmatQBindings;
        auto s = tile_spec<spec::GemmCoopmatQSpec>(t, xb.elem_off % 4 == 0 && K % 4 == 0);
        s.qtype = static_cast<uint32_t>(w.type);
        PipelineDesc desc{ShaderId::linear_gemm_coopmat_q, B::count, sizeof(spec::LinearQPush), s.constants()};
        desc.required_subgroup = required_subgroup;
        const auto& pipe = device_.pipelines().get(desc);
        const QuantChunkViews v = bind_quant_chunk(qw, w, c);
        const spec::LinearQPush push{mc, c.rows, K, xb.elem_off, v.quant.elem_off, v.m_off, yb.elem_off + c.first_row, N};
        cmd.dispatch(pipe,
                     spec::bound<B>({{B::B_X, xb.range}, {B::B_WQUANT, v.quant.range}, {B::B_Y, yb.range},
                                     {B::B_WMETA, v.meta.range}}),
                     &push, sizeof push, gx, gy, 1, op);
      } else {
        using B = spec::LinearGemmCoopmatBindings;
        const VkDeviceSize start = w.offset + VkDeviceSize(c.first_row) * K * esize;
        const Bound wb = bind_aligned(*w.buffer, start, VkDeviceSize(c.rows) * K * esize, esize, align);
        const bool aligned = K % 4 == 0 && xb.elem_off % 4 == 0 && wb.elem_off % 4 == 0;
        const auto s = tile_spec<spec::GemmCoopmatSpec>(t, aligned);
        PipelineDesc desc{kCoopmatFloat[static_cast<uint32_t>(w.type)], B::count, sizeof(spec::LinearPush),
                          s.constants()};
        desc.required_subgroup = required_subgroup;
        const auto& pipe = device_.pipelines().get(desc);
        const spec::LinearPush push{mc, c.rows, K, xb.elem_off, wb.elem_off, yb.elem_off + c.first_row, N, 0};
        cmd.dispatch(pipe, spec::bound<B>({{B::B_X, xb.range}, {B::B_W, wb.range}, {B::B_Y, yb.range}}), &push,
                     sizeof push, gx, gy, 1, op);
      }
    }
  }
}

}  // namespace reach
