#pragma once
// The kernels of the non-attention families, recorded into a CommandList:
// linear (kernels/linear.cpp), norm (norm.cpp), embed (embed.cpp) and
// elementwise (elementwise.cpp); attention has its own header.  Activations are f32;
// weights are f32, f16, bf16 or a GGML block format in the device layout of
// kernels/quant_layout.hpp (dequantized in registers; f32 accumulation everywhere).  Variants and
// tile sizes come from the device's Capabilities, never from vendor checks.
//
// Every op validates its shapes and throws Error(internal) on misuse.  A weight
// larger than maxStorageBufferRange is bound as several row ranges, one
// dispatch each (see split_rows).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/settings.hpp"
#include "base/wtype.hpp"
#include "engine/capabilities.hpp"
#include "engine/command.hpp"
#include "engine/memory.hpp"
#include "kernels/binding.hpp"

namespace reach {

class Device;

// A row-major matrix [rows, cols] stored contiguously in `buffer` at `offset`.
struct Mat {
  const Buffer* buffer = nullptr;
  VkDeviceSize offset = 0;
  WType type = WType::f32;
  uint32_t rows = 0;
  uint32_t cols = 0;
  VkDeviceSize bytes() const { return VkDeviceSize(rows) * wtype_row_bytes(type, cols); }
};

// f32 activations: [rows, cols] row-major at offset.
struct Act {
  const Buffer* buffer = nullptr;
  VkDeviceSize offset = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  VkDeviceSize bytes() const { return VkDeviceSize(rows) * cols * 4; }
  BufferRange range() const { return buffer->range(offset, bytes()); }
};

// Row ranges of `m` each of whose byte span fits in max_range and starts at an
// offset aligned to `align` (relative to m.offset, which must itself be aligned).
inline std::vector<RowChunk> split_rows(const Mat& m, uint64_t max_range, uint64_t align) {
  return split_rows(m.rows, wtype_row_bytes(m.type, m.cols), max_range, align);
}

// Activations quantized to Q8 blocks for the integer-dot linear kernels
// (kernels/linear_q8.cpp): [rows, cols] (cols a multiple of 32) as a quant
// plane of 32 int8 per block, then a meta plane of vec2(d, Σq) per block,
// both row-major; x ≈ d · q.  offset a multiple of 16; the meta plane is
// padded to a multiple of 16 bytes (whole R32G32B32A32 texels).
struct Q8Act {
  const Buffer* buffer = nullptr;
  VkDeviceSize offset = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  VkDeviceSize quant_bytes() const { return VkDeviceSize(rows) * cols; }
  VkDeviceSize meta_bytes() const { return (VkDeviceSize(rows) * (cols / 32) * 8 + 15) / 16 * 16; }
  VkDeviceSize bytes() const { return quant_bytes() + meta_bytes(); }
};
// Weight types linear_q8 multiplies (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k).
bool linear_q8_supports(WType t);

// The fused mat-vec (Kernels::linear_matvec_fused): its input transform and outputs.
enum class GateActivation : uint32_t { none, silu, gelu_tanh };   // values: spec::GATE_*
struct MatvecInput {
  std::optional<BufferRange> norm;   // f32 [K]: x' = x · rsqrt(mean(x²) + eps) · norm per X row
  float eps = 0;
  GateActivation gate = GateActivation::none;   // X rows [gate | up] (2K): x' = act(gate) · up (then norm)
  // The norm's buffer allows uniform texel views (arena_texel_readable): CPU devices then read the
  // norm as a texel buffer (linear_matvec_io.glsl says why); without it they read W as storage too.
  bool norm_texel = false;
};
struct MatvecOutput {
  Mat w;                      // [N, K]
  Act y;                      // [M, N]
  BufferRange bias{};         // f32 [N]; size 0: none
  bool accumulate = false;    // y = y + ...: the residual add (y may be the residual stream itself)
};

// The experts of one projection stacked in one buffer (as the model loader stores them): expert e's matrix
// [rows, cols] at first.offset + e * stride bytes, every one of the same type and shape.
struct ExpertStack {
  Mat first;
  uint64_t stride = 0;
  uint32_t count = 0;
};
// `experts` as a stack; throws internal when they are not one (another buffer, type, shape or stride).
ExpertStack expert_stack(std::span<const Mat> experts);

// An expert's gate and up activation (values: spec::MOE_ACT_*); swiglu_clamped is gpt-oss's (alpha, limit).
enum class MoeActivation : uint32_t { none, silu, gelu_tanh, swiglu_clamped };

// Kernels::moe_matvec's operands: slot s (of `slots`, moe_route's order: row s / top_k, its (s % top_k)-th
// choice) multiplies expert ids[s]'s matrix by its input x' and writes y row s:
//   act none: x' = x row s / x_div (gate, up: the layer's rows, x_div = top_k);
//   otherwise x rows are [gate | up] (2K wide, one per slot, x_div = 1) and x' = act(gate) · up (down).
struct MoeMatvecArgs {
  Act x;
  uint32_t x_div = 1;
  MoeActivation act = MoeActivation::none;
  float alpha = 0, limit = 0;   // swiglu_clamped
  BufferRange ids;              // int32 [slots]
  uint32_t slots = 0;
  Act y;                        // [slots, ldy = y.cols >= N]: slot s's N outputs start row s
  BufferRange bias{};           // f32 [experts, N] added to expert id's outputs; size 0: none
  // act none only: x' = RMSNorm(x row) · norm (f32 [K]), norm_rms's formula with `eps`; size 0: none.
  BufferRange norm{};
  float eps = 0;
};

// How the linear kernels treat activations against quantized W: as the device's
// configuration chooses (KernelConfig::from), exact f32, or rounded to Q8 blocks
// for integer dot products (KernelConfig::quant_int_dot).
enum class QuantActivations : uint8_t { device, exact, int8 };

// The cooperative-matrix GEMM's tiling (kernels/linear_coopmat.cpp, shaders/spec/linear_gemm_coopmat_tile.h):
// SG_M x SG_N subgroups of `subgroup` lanes per workgroup, each FM x FN matrices of the device's
// CM x CN x CK shape, so the workgroup computes BM = SG_M·FM·CM by BN = SG_N·FN·CN of Y per BK of K.
struct CoopmatTile {
  uint32_t cm = 0, cn = 0, ck = 0;   // 0: no tile (the variant is off)
  uint32_t bm = 0, bn = 0, bk = 32;  // BK 32: one sub-block of the quantized formats
  uint32_t sg_m = 1, sg_n = 1;
  uint32_t subgroup = 0;             // the lanes the shader's subgroups have
  bool pin_subgroup = false;         // the device's size varies: the pipeline requires `subgroup`
  // X as f16 hi + lo halves (two products per slab): near-f32 X; REACH_COOPMAT_XSPLIT=0 rounds X to f16.
  bool xsplit = true;
  bool valid() const { return cm != 0; }
  uint32_t workgroup() const { return sg_m * sg_n * subgroup; }
  uint64_t shared_bytes() const;     // what the shader declares for this tile
};
// The tile for a device: its largest f16 x f16 -> f32 subgroup shape whose K divides BK, 2 x 2
// subgroups of 2 x 2 matrices each where the workgroup and shared-memory limits allow, fewer where
// not.  No tile (why says what is missing) without such a shape or with a subgroup size the
// pipeline cannot pin.  Uses caps.coopmat_shapes and limits only: the caller checks
// caps.cooperative_matrix.
CoopmatTile choose_coopmat_tile(const Capabilities& caps, std::string& why);

// The row kernels' (norm_rms, norm_softmax) workgroup and the most subgroups it may hold at any width the
// device may run (subgroup_min and up): the size of their shared partial sums (kernels/norm.cpp).
struct ReducePlan {
  uint32_t wg = 0, max_subgroups = 0;
};
struct KernelConfig;
ReducePlan reduce_plan(const Capabilities& caps, const KernelConfig& cfg, uint32_t cols, uint32_t passes,
                       const char* op);

// Tunables chosen from capabilities; exposed so tests can force edge variants.
struct KernelConfig {
  uint32_t subgroup = 8;          // subgroup size the kernels assume
  uint32_t gemm_tile_m = 32;
  uint32_t gemm_tile_n = 32;
  uint32_t matvec_rows = 4;       // output rows per workgroup
  // Linear kernels (linear.cpp; shaders/linear_gemm.comp, shaders/linear_matvec.comp).
  bool gemm_shared = false;       // GEMM: shared-memory tiles (GPU) vs register tiles (CPU)
  uint32_t gemm_wg = 64;          // GEMM workgroup size (register variant; shared: derived)
  uint32_t gemm_tm = 4;           // GEMM register tile: rows of X per invocation
  uint32_t gemm_tn = 2;           // GEMM register tile: rows of W per invocation
  uint32_t gemm_bk = 16;          // GEMM shared variant: K depth of a staged slab
  bool gemm_bcast = false;        // GEMM registers: lanes share X rows by subgroupShuffle (needs subgroup == real size)
  // GEMM register tile for quantized W (linear_quant.cpp; 0: gemm_tm / gemm_tn).
  // More X rows per invocation reuse each decoded W sub-block (decode, not
  // FMAs, bounds the quantized kernels on CPU devices).
  uint32_t qgemm_tm = 0;
  uint32_t qgemm_tn = 0;
  uint32_t matvec_mode = 0;       // spec::MATVEC_MODE_*: 0 row per lane, 1 subgroupAdd over K, 2 shared-memory reduction
  uint32_t matvec_wg = 64;        // matvec workgroup size
  uint32_t linear_matvec_max_m = 1;   // linear(): matvec when M <= this, GEMM above
  // Matvec over M > 1 rows (batched decode): a workgroup takes up to this many
  // X rows (1..8) and reads W once for all of them.
  uint32_t matvec_xrows = 8;
  // Mode 0 (registers): accumulators per invocation (output rows x X rows)
  // at most this; output rows per invocation shrink as X rows grow (0: no cap).
  uint32_t matvec_max_acc = 0;
  // linear_matvec_fused, mode 0: the subgroup splits each X row's sum of
  // squares (RMSNorm) where the device has subgroup arithmetic; false: every
  // invocation sums the row alone (tests force it to cover that path).
  bool matvec_norm_subgroup = true;
  // Modes 1 and 2: the workgroup stages its X rows, after the fused input transform, in shared
  // memory once where they fit (XSH in shaders/linear_matvec_io.glsl).  GPUs: re-reading X per
  // W row, not W, bounded their decode.
  bool matvec_xshared = false;
  uint64_t max_binding = 0;       // bytes one binding may span (maxStorageBufferRange)
  // Linear kernels read W (in Arena::weights) through uniform texel buffers
  // (linear_gemm_tex_* / linear_matvec_tex_*) where the format supports it: CPU devices,
  // where llvmpipe vectorises texel fetches but not per-lane SSBO loads.
  bool weights_texel = false;
  // With weights_texel: X too, where shapes are 4-aligned (R32G32B32A32 texels).
  bool activations_texel = false;
  bool cpu_device = false;        // llvmpipe-style: prefer barrier-free variants
  bool matvec_fused = true;       // linear_matvec_fused fits the device's per-stage descriptor limits
  // Quantized W: linear / linear_gemm / linear_matvec quantize X to 8 bits and
  // multiply with integer dot products (linear_q8) where the device has them and
  // the Kernels have scratch memory (use_scratch), at llama.cpp's precision (X
  // rounded per 32 values); false (the default: kernels.cpp says why) keeps the
  // exact f32 product (--exact-activations).
  bool quant_int_dot = false;
  uint32_t reduce_wg = 8;         // workgroup of the one-row-per-workgroup kernels (norm_rms, norm_softmax, embed)
  // Cooperative-matrix GEMM (linear_coopmat.cpp): coopmat is the tile where the device and the build
  // have it (else invalid, and coopmat_why says what is missing, or that REACH_COOPMAT=0 (KernelSettings::
  // coopmat) turned it off).  linear() uses it for M >= coopmat_min_m (prefill, and batched decode past the mat-vec
  // limit) for every weight type with coopmat_auto (REACH_COOPMAT=1), and for the block types with
  // coopmat_auto_quant (GPUs' default).  kernels/linear_coopmat.cpp has the measurements: float
  // weights keep the f32 GEMM (as fast on an H100, and X stays f32), CPU devices emulate the matrices.
  CoopmatTile coopmat;
  bool coopmat_auto = false;
  bool coopmat_auto_quant = false;
  uint32_t coopmat_min_m = 16;
  std::string coopmat_why;
  // `settings`: the shapes and variants asked for (REACH_MATVEC_*, REACH_GEMM_*, REACH_COOPMAT*); the
  // default asks for none.  Kernels(Device&) passes the device's (Device::settings().kernels).
  static KernelConfig from(const Capabilities& caps, const KernelSettings& settings = {});
  // Matvec tiling for an M-row call: X rows per workgroup (a power of two,
  // at most matvec_xrows) and output rows per workgroup (mode 0: per invocation).
  void matvec_tiling(uint32_t M, uint32_t& xrows, uint32_t& rows) const;
  // The XSH spec value of a mat-vec over K columns and xrows X rows: XROWS · K / 4 vec4s of
  // shared memory, or 0 (X read from memory) where matvec_xshared is off or it does not fit.
  uint32_t matvec_xsh(uint32_t K, uint32_t xrows, uint32_t rows, const Capabilities& caps) const;
  void choose_linear(const Capabilities& caps);
  // REACH_MATVEC_WG, REACH_MATVEC_ROWS, REACH_MATVEC_XSHARED, REACH_GEMM_TILE / _TM / _TN / _BK:
  // the mat-vec's and the shared-memory GEMM's shapes from the settings, to compare shapes on
  // a device without rebuilding (tools/gpu_check.sh's sweep).
  void shape_overrides(const Capabilities& caps, const KernelSettings& s);   // the linear tunables above
  // coopmat and coopmat_why (linear_coopmat.cpp)
  void choose_coopmat(const Capabilities& caps, const KernelSettings& s);
  // quant_int_dot as `a` asks; int8 on a device without integer dot products throws unsupported.
  void set_activations(QuantActivations a, const Capabilities& caps);
};

class Kernels {
 public:
  // The configuration KernelConfig::from chooses for the device and its settings.
  explicit Kernels(Device& device);
  Kernels(Device& device, const KernelConfig& config);
  Device& device() const { return device_; }
  const KernelConfig& config() const { return config_; }
  // Where per-call scratch comes from (the Q8 activations of quant_int_dot);
  // it lives as long as the CommandList it is recorded into (CommandList::keep).
  void use_scratch(Allocator& allocator) { scratch_ = &allocator; }

  // y = a + b, n elements; b is read at index i % b_period (b_period = n: plain
  // add; = cols: a bias broadcast over rows).  y may alias a.
  void elementwise_add(CommandList& cmd, const BufferRange& a, const BufferRange& b, const BufferRange& y, uint32_t n,
           uint32_t b_period);

  // Y[M, N] = X[M, K] · Wᵀ with W [N, K].  M <= linear_matvec_max_m uses linear_matvec, above it linear_gemm,
  // or linear_gemm_coopmat from coopmat_min_m rows where the config has it (coopmat_auto).
  void linear(CommandList& cmd, const Act& x, const Mat& w, const Act& y);
  void linear_gemm(CommandList& cmd, const Act& x, const Mat& w, const Act& y);     // always the tiled GEMM
  void linear_matvec(CommandList& cmd, const Act& x, const Mat& w, const Act& y);   // each row of x separately
  // Always the cooperative-matrix GEMM (f16 inputs, f32 accumulation); unsupported unless config().coopmat.valid().
  void linear_gemm_coopmat(CommandList& cmd, const Act& x, const Mat& w, const Act& y);
  // y_i = [y_i +] in(x) · W_iᵀ [+ bias_i] for each output i (1..3) sharing X [M, K]
  // ([M, 2K] when gated) and the input transform `in` (gate, then RMSNorm); the
  // outputs of one weight type are one dispatch (split only past the binding
  // span), those of different types one dispatch per type, back to back
  // without a barrier.  No y may overlap x or another y.  With no transform,
  // bias or accumulate, each y is bit for bit linear_matvec's.
  void linear_matvec_fused(CommandList& cmd, const Act& x, const MatvecInput& in, std::span<const MatvecOutput> outs);
  // q = X in Q8 blocks (round half away from zero), for linear_q8.
  void linear_quantize_q8(CommandList& cmd, const Act& x, const Q8Act& q);
  // Y = X · Wᵀ with X in Q8 blocks, W quantized (linear_q8_supports): integer dot products per block.
  void linear_q8(CommandList& cmd, const Q8Act& x, const Mat& w, const Act& y);

  // y = x * rsqrt(mean(x²) + eps) * w, per row; w is f32 [cols].  add_to_y: y += that instead (y must not
  // overlap x): a post-norm and its residual add in one pass, the same bits as norm_rms then elementwise_add.
  void norm_rms(CommandList& cmd, const Act& x, const BufferRange& w, const Act& y, float eps, bool add_to_y = false);
  // In place, per row: softmax(x * scale).
  void norm_softmax(CommandList& cmd, const Act& x, float scale);
  // y = silu(g) * u, n elements.
  void elementwise_silu_mul(CommandList& cmd, const BufferRange& g, const BufferRange& u, const BufferRange& y, uint32_t n);
  // y = gelu_tanh(g) * u, n elements (Gemma's gated MLP).
  void elementwise_gelu_tanh_mul(CommandList& cmd, const BufferRange& g, const BufferRange& u, const BufferRange& y, uint32_t n);
  // y = x * s, n elements; y may be x.
  void elementwise_scale(CommandList& cmd, const BufferRange& x, const BufferRange& y, uint32_t n, float s);
  // y = cap * tanh(x / cap), n elements (Gemma 2's final-logit soft-capping); cap > 0 and finite; y may be x.
  void elementwise_softcap(CommandList& cmd, const BufferRange& x, const BufferRange& y, uint32_t n, float cap);
  // y[t, :] = table[ids[t], :] for t < n_tokens; ids are int32.  An id outside
  // [0, table.rows) (only the device sees ids) gives a row of zeros.
  void embed(CommandList& cmd, const Mat& table, const BufferRange& ids, uint32_t n_tokens, const Act& y);
  // n bf16 values (uint16 bit patterns) -> f32, exact.
  void elementwise_bf16_to_f32(CommandList& cmd, const BufferRange& in, const BufferRange& out, uint32_t n);
  // n f32 -> f16 (round to nearest even), for f16 caches.
  void elementwise_f32_to_f16(CommandList& cmd, const BufferRange& in, const BufferRange& out, uint32_t n);

  // Mixture of experts (kernels/moe.cpp).  Per token of `logits` [T, E] (the router's): the top k experts
  // (larger logit first, the lower index on ties) to ids (int32 [T, k]), their softmax probabilities
  // (renormalised over the k when norm_topk) to weights (f32 [T, k]) and to dense (f32 [T, E], 0 where not
  // chosen).  1 <= k <= min(E, 32).
  void moe_route(CommandList& cmd, const Act& logits, uint32_t k, bool norm_topk, const BufferRange& ids,
                 const BufferRange& weights, const BufferRange& dense);
  // Prefill rows grouped by expert, over rows [first, first + rows) (rows <= cap) of ids (int32 [T, k]):
  // moe_group gives each row a slot in each of its experts' blocks (slots [cap, E], in row order) and the
  // experts' indirect group counts (args [E][calls], from grids recorded for
  // cap rows, the row groups cut to the expert's count; 0 for an expert no row chose).
  void moe_group(CommandList& cmd, const BufferRange& ids, uint32_t first, uint32_t rows, uint32_t k,
                 uint32_t n_experts, uint32_t cap, const BufferRange& grids, uint32_t calls,
                 const BufferRange& slots, const BufferRange& args);
  // y[e][slots[t - first][e]] = x[t] for every row t of [first, first + rows) and each of its k experts e
  // (ids [T, k], slots from moe_group; y [E, cap, cols]).
  void moe_gather(CommandList& cmd, const BufferRange& ids, const BufferRange& slots, uint32_t first, uint32_t rows,
                  uint32_t k, uint32_t n_experts, uint32_t cap, const Act& x, const BufferRange& y);
  // y[first + t] += Σ_e dense[first + t][e] * x[e][slots[t][e]], experts in index order, zero weights skipped.
  void moe_scatter(CommandList& cmd, const BufferRange& dense, const BufferRange& slots, uint32_t first,
                   uint32_t rows, uint32_t n_experts, uint32_t cap, const BufferRange& x, const Act& y);
  // Decode rows (kernels/moe_matvec.cpp): every chosen slot times its expert's matrix in one dispatch (one per
  // group of experts when the stack exceeds one binding), for every weight type the mat-vec reads.
  void moe_matvec(CommandList& cmd, std::span<const Mat> experts, const MoeMatvecArgs& args);
  // y[t] += Σ_s weights[t][s] · x[t · k + s] over the k slots of each row t of y, in expert index order (ids
  // int32 [T, k], weights f32 [T, k], x [T · k, ldx = x.cols] whose first y.cols columns are read).
  void moe_combine(CommandList& cmd, const BufferRange& ids, const BufferRange& weights, uint32_t k, const Act& x,
                   const Act& y);

 private:
  void embed_q(CommandList& cmd, const Mat& table, const BufferRange& ids, uint32_t n_tokens, const Act& y) const;
  // linear's integer-dot path (quantize X, then linear_q8); false where it does not apply.
  bool linear_int8(CommandList& cmd, const Act& x, const Mat& w, const Act& y);
  // Whether linear() takes the cooperative-matrix GEMM for x.
  bool use_coopmat(const Act& x, const Mat& w) const {
    return (config_.coopmat_auto || (config_.coopmat_auto_quant && wtype_is_quant(w.type))) &&
           config_.coopmat.valid() && x.rows >= config_.coopmat_min_m;
  }
  Device& device_;
  KernelConfig config_;
  Allocator* scratch_ = nullptr;
};

}  // namespace reach
