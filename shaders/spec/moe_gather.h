// moe_gather.comp: each expert's rows of the MoE input, gathered into its own block.
SPEC_WG(wg)
BINDING(0, ROWS)
BINDING(1, X)
BINDING(2, Y)
