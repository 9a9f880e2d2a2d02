// moe_group.comp: the rows each expert takes, their slots, and the experts' indirect group counts.
SPEC_WG(wg)
BINDING(0, IDS)
BINDING(1, GRIDS)
BINDING(2, ROWS)
BINDING(3, SLOTS)
BINDING(4, ARGS)
