// The K step per weight kind of the mat-vecs (linear_matvec.glsl,
// moe_matvec.glsl) and the register GEMM (linear_gemm.glsl): they walk W rows
// in units of WU weights, and this file says what a unit is, so each body is
// written once for every kind:
//   float W (f32 / f16 / bf16, linear_load_weight.glsl): WU = 4, a vec4 of
//     weights met by a vec4 of X; a row's last K % 4 weights are a scalar tail
//     (WTAIL), and GPU lanes keep 4 units in flight (WAHEAD).
//   quantized W (W_QUANT: GGML blocks and mxfp4, quant_blocks.glsl): WU = 32,
//     one sub-block decoded in registers, met by its 32 activations and their
//     half sums (XSub); K % 32 == 0, so no tail.
//
//   w_row(o, n)            where W row n of output o starts (element, or row)
//   w_unit(o, wr, k)       the unit of that row at element k (WUnit)
//   w_unit_reg(o, wr, k)   the same for the register paths (mat-vec MODE 0, register
//                          GEMM), whose X units are x_unit_reg's
//   x_unit(j, k)           elements k.. of X row j (after the fused input transform)
//   x_unit_reg(j, k)       the same, for w_unit_reg (q4_0 / q4_1: pre-scaled, exact)
//   unit_dot(x, w)         Σ x · w over the unit
//   units_end(K)           the end of the whole units of a row
//   w_elem(o, wr, k)       one weight (the tail; float W only)
// o names one W of the kernel (an output of the fused mat-vec, an expert of
// moe_matvec); j one X row (x_unit(j, k) reads xin4(j, k) / xin(j, k): the
// mat-vec's row index, or the row's first element in moe_matvec and the GEMM).
// Needs before inclusion: xin4, xin, p.K and, per kind, where W o starts:
//   float W:      uint w_base(uint o)                    (element index)
//   quantized W:  void w_sub(uint o, uint n, uint c, out uint qb, out uint mb, out uint s)
//                 (sub-block c of row n: quant_blocks.glsl's sub_units)
#if defined(W_QUANT)
const uint WU = 32;
const bool WTAIL = false, WAHEAD = false;
struct WUnit {
  vec4 q[8];
  vec4 ab;
};
#define XUnit XSub
uint w_row(uint o, uint n) { return n; }
WUnit w_unit(uint o, uint n, uint k) {
  uint qb, mb, s;
  w_sub(o, n, k / 32, qb, mb, s);
  WUnit w;
  decode_sub(QO_A qb, mb, s, w.q, w.ab);
  return w;
}
WUnit w_unit_reg(uint o, uint n, uint k) {
  uint qb, mb, s;
  w_sub(o, n, k / 32, qb, mb, s);
  WUnit w;
  decode_sub_reg(QO_A qb, mb, s, w.q, w.ab);
  return w;
}
XSub x_unit(uint j, uint k) {
  XSub x;
  for (uint w = 0; w < 8; ++w) x.v[w] = xin4(j, k + 4 * w);
  return xsub_sums(x);
}
XSub x_unit_reg(uint j, uint k) { return xsub_reg(x_unit(j, k)); }
float unit_dot(XSub x, WUnit w) { return sub_dot(w.q, w.ab, x); }
uint units_end(uint K) { return K; }
float w_elem(uint o, uint n, uint k) { return 0.0; }   // never called: no tail

#else
const uint WU = 4;
const bool WTAIL = true, WAHEAD = true;
#define WUnit vec4
#define XUnit vec4
uint w_row(uint o, uint n) { return w_base(o) + n * p.K; }
vec4 w_unit(uint o, uint wr, uint k) { return load_wo4(o, wr + k); }
vec4 w_unit_reg(uint o, uint wr, uint k) { return load_wo4(o, wr + k); }
vec4 x_unit(uint j, uint k) { return xin4(j, k); }
vec4 x_unit_reg(uint j, uint k) { return xin4(j, k); }
float unit_dot(vec4 x, vec4 w) { return dot(x, w); }
uint units_end(uint K) { return K & ~3u; }
float w_elem(uint o, uint wr, uint k) { return load_wo(o, wr + k); }
#endif
