// moe_gather.comp: each expert's rows of the MoE input, gathered into its own block.
SPEC_WG(wg)
BINDING(0, IDS)
BINDING(1, SLOTS)
BINDING(2, X)
BINDING(3, Y)
