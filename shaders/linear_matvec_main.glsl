// main() of the mat-vecs (linear_matvec.glsl, every weight kind): the
// workgroup's X rows, their RMSNorm scales (FUSED, NORM), then run(o, gx) for
// the output whose share of the grid's x workgroups holds this one.
void main() {
  const uint m0 = gl_WorkGroupID.y * XROWS;
  // Rows past M repeat the last row (loads stay in range) and are not stored.
  for (uint j = 0; j < XROWS; ++j) g_xb[j] = p.x_off + min(m0 + j, p.M - 1) * x_stride();
  if (XSH > 0) {
    stage_x_shared();
  }
#if defined(FUSED)
  else if (NORM != NORM_NONE) {
    const uint l = gl_LocalInvocationID.x;
    for (uint j = 0; j < XROWS; ++j) {
      float ss;
      if (MODE == MATVEC_MODE_ROW_PER_LANE && NORM != NORM_SUBGROUP) {
        ss = sumsq_part(j, 0, 1);   // each invocation alone: no barrier, no subgroup ops
      } else if (MODE != MATVEC_MODE_SHARED) {
        // Mode 1, and mode 0 with NORM_SUBGROUP: the subgroup's lanes split the
        // row (on llvmpipe 8x fewer iterations than every lane summing it all).
        const uint lanes = min(gl_SubgroupSize, WG - gl_SubgroupID * gl_SubgroupSize);
        ss = subgroupAdd(sumsq_part(j, gl_SubgroupInvocationID, lanes));
      } else {
        barrier();   // the previous row's red[0] is read
        red[l] = sumsq_part(j, l, WG);
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
          if (l < s) red[l] += red[l + s];
          barrier();
        }
        ss = red[0];
      }
      g_xs[j] = rms_scale(ss);
    }
    if (MODE == MATVEC_MODE_SHARED) barrier();   // run() reuses red
  }
#endif
#if defined(FUSED)
  const uint gx = gl_WorkGroupID.x;
  if (OUTS > 2 && gx >= p.g2) run(2, gx - p.g2);
  else if (OUTS > 1 && gx >= p.g1) run(1, gx - p.g1);
  else run(0, gx);
#else
  run(0, gl_WorkGroupID.x);
#endif
}
