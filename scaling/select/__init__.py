"""Run selection: which cells of a pool to train next so that the answer narrows most per FLOP."""
