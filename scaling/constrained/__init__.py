"""The data-constrained law (Muennighoff et al. 2023): repeated epochs worth less
than fresh tokens, R_D* and R_N* fitted on top of a base law."""
