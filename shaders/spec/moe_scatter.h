// moe_scatter.comp: the experts' gathered outputs added back to their rows with the routing weights.
SPEC_WG(wg)
BINDING(0, DENSE)
BINDING(1, SLOTS)
BINDING(2, X)
BINDING(3, Y)
