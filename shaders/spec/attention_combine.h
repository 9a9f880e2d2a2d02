// attention_combine.comp: merges the decode splits, one workgroup per query head.
SPEC_WG(wg)
SPEC_UINT(1, D, head_dim, 64)
SPEC_BOOL(2, SINK, sink, false)        // a learned per-head sink logit (binding B_SINK) joins the denominator
SPEC_BOOL(3, HADV, had_v, false)       // values stored Walsh-Hadamard rotated: the merged output rotated back
// Bindings.
BINDING(0, STEP)
BINDING(1, PART)     // attention_decode's partials
BINDING(2, OUT)
BINDING(3, SINK)     // per-head sink logits, f32 [n_heads] (SINK)
