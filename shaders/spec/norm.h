// norm_rms.comp, norm_softmax.comp: one workgroup per row.
SPEC_WG(wg)
// Upper bound on subgroups per workgroup (ceil(wg / smallest subgroup)); 1
// specialises the shared-memory combine and its barriers away.
SPEC_UINT(1, MAX_SUBGROUPS, max_subgroups, 1)
// norm_rms only: 1 adds the normalised row into y (y += x·r·w, a post-norm and its residual add in one
// pass; y must not alias x).
SPEC_UINT(2, ADD_TO_Y, add_to_y, 0)
