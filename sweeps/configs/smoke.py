r"""The built-in smoke sweep: a whole IsoFLOP study on a laptop CPU in about four minutes.

    chinchax sweep                       # = --config=sweeps/configs/smoke.py --workdir=runs/smoke
    chinchax sweep --config=sweeps/configs/smoke.py --dry-run

The dry run prints the grid and exits:

    cell               C       N  d_model x L  heads  d_ff         D    D/N  steps    batch ...
    C1e11-N5.97e3  1e+11   5,968       16 x 1      1    16  2.79e+06  467.9   2424  18 x 64 ...
    C1e11-N8.27e3  1e+11   8,272       16 x 1      1    64  2.01e+06  243.6   1749  18 x 64 ...
    ...
    C3e11-N2.63e4  3e+11  26,272       32 x 1      1   144   1.9e+06   72.5   1144  26 x 64 ...
    10 cells, 0 refused; total 2e+12 FLOPs (6ND), ...

Without --dry-run it trains the ten cells (26M tokens in all), fits them and prints the law,
the exponents with their bootstrap intervals and the compute-optimal table; everything lands
in runs/smoke (runs.jsonl, law.json, plots/, report.md).

Byte-level decoders (vocab 258, tied embeddings, context 64) on the Python standard library's
source, 2 budgets × 5 sizes. Five sizes per budget because Approach 2's residual bootstrap
needs residuals (three sizes fit a parabola exactly); context 64 because attention over 128
positions was half the step time of these models. Models this small are data-hungry: their
IsoFLOP minima sit at 100-500 tokens per parameter, below the smallest shapes a prior of 20
tokens/param would pick. The sizes were therefore chosen from a pilot of 8 sizes at each
budget (eval loss, nats/token; * = in the grid):

    C = 1e11: *6.0k 2.303 | *8.3k 2.196 | *11k 2.184 | *16k 2.282 | *20k 2.344 | 26k 2.405
              35k 2.358 | 48k 2.337
    C = 3e11:  6.0k 2.233 | *8.3k 2.096 | *11k 2.037 | *16k 2.069 | *20k 2.022 | *26k 2.094
              35k 2.031 | 48k 2.094

The zigzags of ±0.03-0.05 are the shapes, not the seed: the recipe moves between d_model 16,
32 and 64 with d_ff from 1× to 8× d_model at these sizes. On the grid's points Approach 2
gives a = 0.353 with a 90% interval of [0.173, 0.562] (N* = 1.0e4 and 1.5e4, both inside
their sizes): two budgets a factor 3 apart pin the exponents only loosely, and the interval
says so. Approach 3 fits 5 parameters to 10 runs and is flagged as poorly determined.
"""

import ml_collections

from chinchax.sweeps import grid
from chinchax.sweeps.configs import train


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg  # no presets
  t = train.get_config("cpu")
  t.model.tied = True
  t.seq_len = 64
  t.eval_every, t.eval_tokens, t.log_every = 1000, 32768, 100
  t.checkpoint.update(every_steps=1000, every_minutes=5.0, keep=1)

  c = grid.base_config(t)
  c.name = "smoke"
  c.budgets = (1e11, 3e11)
  c.sizes = ((6e3, 8.3e3, 1.13e4, 1.55e4, 2e4),  # from the pilot above
             (8.3e3, 1.13e4, 1.55e4, 2e4, 2.63e4))
  c.prior = "tokens_per_param:100"  # only for budgets added without sizes
  c.min_steps = 100
  c.vocab_size = 258         # bytes: 256 values, end-of-document, padding
  c.recipe.min_d_model = 16
  return c
