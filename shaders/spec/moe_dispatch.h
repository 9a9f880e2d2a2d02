// moe_dispatch.comp: the indirect group counts of each expert's kernels, 0 where no token chose it.
SPEC_WG(wg)
BINDING(0, DENSE)
BINDING(1, GRIDS)
BINDING(2, ARGS)
