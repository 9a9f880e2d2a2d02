// moe_accumulate.comp: y += (expert e's routing weight per row) * x.
SPEC_WG(wg)
BINDING(0, DENSE)
BINDING(1, X)
BINDING(2, Y)
