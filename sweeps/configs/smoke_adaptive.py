"""The smoke sweep as an adaptive study: rounds of `chinchax next` over its budgets and ladder.

    chinchax sweep --config=smoke_adaptive          # into runs/smoke_adaptive

The pool is the smoke sweep's 6 budgets (5e10-1.5e12) at every rung of its ladder (10.1k-176k
parameters), each cell one cosine run (WSD branches would change with each round's cells).
Round 0 trains a space-filling first design of 8 cells over the cheaper budgets; each later
round adds the 4 cells expected to narrow the 90% interval of a most per FLOP
(sweeps/adaptive/rounds.py), until that interval is 0.15 wide or the next cells would pass
5e12 FLOPs (a third of the smoke grid's 1.53e13). Every decision is a line of
runs/smoke_adaptive/adaptive.jsonl and a row of report.md's last table.
"""

import ml_collections

from chinchax.sweeps.configs import smoke


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = smoke.get_config(arg)
  c.name = "smoke_adaptive"
  c.schedule = "cosine"
  c.adaptive.round_cells = 4
  c.adaptive.first_cells = 8
  c.adaptive.target = "a"
  c.adaptive.width = 0.15
  c.adaptive.max_flops = 5e12
  c.bootstrap = 200
  return c
