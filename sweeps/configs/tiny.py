r"""The CI sweep: two budgets of byte-level models small enough to train in about a minute.

    chinchax sweep --config=sweeps/configs/tiny.py --workdir=/tmp/chinchax-tiny --dry-run

prints the grid and exits, without opening the data:

    cell                  C       N  d_model x L  heads  d_ff       D   D/N  steps    batch  peak LR   C 6ND  C chinchilla  time
    ---------------  ------  ------  -----------  -----  ----  ------  ----  -----  -------  -------  ------  ------------  ----
    C2.5e11-N3.2e4   2.5e11  31,968       32 x 2      4    80   1.3e6  40.8    849  24 x 64  0.00945  2.5e11       3.84e11    9s
    C2.5e11-N4.64e4  2.5e11  46,360       40 x 2      5    96  8.99e5  19.4    585  24 x 64  0.00835  2.5e11       3.65e11    8s
    ...
    C5e11-N9.09e4      5e11  90,888       56 x 2      7   152  9.17e5  10.1    462  31 x 64  0.00667    5e11       6.64e11   14s

    6 cells, 0 refused; total 2.25e12 FLOPs (6ND), 3.18e12 (chinchilla); about 1.1m of training
    time on CPU: 1.5 s to start each cell, then 1.0 ms a step and 5.7e10 FLOP/s (chinchilla), measured for small models on 2 cores, warm compile cache
    sizes per budget for the fit (after the refusals above):
      C=2.5e11: 3 sizes, N 3.2e4..6.56e4; prior N* 4.56e4 inside
      C=5e11: 3 sizes, N 4.64e4..9.09e4; prior N* 6.45e4 inside

It is the smoke sweep (sweeps/configs/smoke.py) shrunk: 2 budgets × 3 sizes around
N* = sqrt(C/120) (D = 20·N), ±0.15 decades, seq_len 64. The sizes sit at the shape recipe's
smallest models, so the point is the whole pipeline (grid, runner, trainer, run records, fit),
not a meaningful law.
"""

import ml_collections

from chinchax.sweeps.configs import sweep as sweep_config
from chinchax.sweeps.configs import train


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  if arg not in (None, "", "tasks"):
    raise ValueError(f"unknown preset {arg!r} for tiny.py: use tasks, or none")
  t = train.get_config("tiny")
  t.model.tied = True
  t.seq_len = 64
  t.eval_every, t.eval_tokens, t.log_every = 200, 4096, 50
  t.checkpoint.update(every_steps=200, every_minutes=5.0, keep=1)

  if arg == "tasks":  # every eval also scores the built-in task (sweeps/data/choices.py)
    t.tasks = ("stdlib_next_line",)
  c = sweep_config.base_config(t)
  c.name = "tiny"
  c.budgets = (2.5e11, 5e11)
  c.prior = "tokens_per_param:20"
  c.n_per_budget = 3
  c.span = 0.15
  c.min_steps = 50
  c.vocab_size = 258  # bytes: 256 values, end-of-document, padding
  return c
