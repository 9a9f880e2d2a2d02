// norm_rms.comp, norm_softmax.comp: one workgroup per row.
SPEC_WG(wg)
// Upper bound on subgroups per workgroup (ceil(wg / smallest subgroup)); 1
// specialises the shared-memory combine and its barriers away.
SPEC_UINT(1, MAX_SUBGROUPS, max_subgroups, 1)
