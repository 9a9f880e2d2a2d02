// elementwise_*.comp and embed.comp: one invocation per element (grid stride).
SPEC_WG(wg)
