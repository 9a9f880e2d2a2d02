// moe_combine.comp: y[row] += Σ weight · out over the row's chosen slots, in expert order.
SPEC_WG(wg)
BINDING(0, IDS)
BINDING(1, WEIGHTS)
BINDING(2, X)
BINDING(3, Y)
