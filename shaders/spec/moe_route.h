// moe_route.comp: per token, the top-k experts of the router logits and their weights.
SPEC_WG(wg)
BINDING(0, LOGITS)
BINDING(1, IDS)
BINDING(2, WEIGHTS)
BINDING(3, DENSE)
