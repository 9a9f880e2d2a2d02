// attention_combine.comp: merges the decode splits, one workgroup per query head.
SPEC_WG(wg)
SPEC_UINT(1, D, head_dim, 64)
// Bindings.
BINDING(0, STEP)
BINDING(1, PART)     // attention_decode's partials
BINDING(2, OUT)
