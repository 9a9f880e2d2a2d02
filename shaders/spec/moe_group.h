// moe_group.comp: each row's slot among the rows of each of its experts, and the experts' indirect group counts.
SPEC_WG(wg)
BINDING(0, IDS)
BINDING(1, GRIDS)
BINDING(2, SLOTS)
BINDING(3, ARGS)
