// attention_combine.comp: merges the decode splits, one workgroup per query head.
SPEC_WG(wg)
SPEC_UINT(1, D, head_dim, 64)
