"""Shared numerics every room stands on: minimisation (`optimum`), power laws N*(C),
D*(C) (`power`), percentile intervals (`intervals`) and how numbers are written (`fmt`)."""
