"""Synthetic LR x batch grids from a loss surface whose optimal LR and batch are known.

    L = L*(N, D) + shape_lr(ln η − ln η*(N, D)) + k2·(ln B − ln B*(D))² + noise
    η*(N, D) = 1.79·N^−0.713·D^0.307,   B*(D) = 0.58·D^0.571 tokens   (StepLaw's laws)

`shape_lr(u)` is k1·u² (quadratic) or, with `skew`, k1·u² + skew·k1·u³ for u > 0: steeper on the
high-LR side, as real surfaces are, and a run with u > `diverge_at` diverges (nan loss).
Each point's grid is centred on a guess off the truth by a random factor, so the truth never
sits on a grid value.
"""

import numpy as np

from chinchax.scaling.hparams import runs as hparams_runs

TRUTH = {"lr": {"coef": 1.79, "N": -0.713, "D": 0.307}, "batch": {"coef": 0.58, "D": 0.571}}
SIZES = (1e7, 3e7, 1e8)
RATIOS = (20, 60, 200)
LR_STEPS = np.log(2.0) * np.arange(-3, 4)      # 7 LR values, factors of 2
BATCH_STEPS = np.log(2.0) * np.arange(-2, 3)   # 5 batch sizes, factors of 2


def lr_opt(N, D):
  t = TRUTH["lr"]
  return t["coef"] * N**t["N"] * D**t["D"]


def batch_opt(D):
  t = TRUTH["batch"]
  return t["coef"] * D**t["D"]


def runs(rng, *, sigma=0.003, k1=0.04, k2=0.02, skew=0.0, diverge_at=np.inf, off=0.4,
         sizes=SIZES, ratios=RATIOS, lr_steps=LR_STEPS, batch_steps=BATCH_STEPS,
         lr_shift=0.0, batch_shift=0.0, lr_batch_slope=0.0) -> list[hparams_runs.Run]:
  """One grid: `off` is the largest ln-factor of a guess off the truth; `lr_shift` moves
  every LR grid by that many ln units (e.g. past the optimum, for an edge), `batch_shift`
  every batch grid; `lr_batch_slope` s makes the best LR at batch B move as (B/B*)^s (s = 1/2:
  the square-root rule), so the LR optimum depends on the batch it is read at."""
  out = []
  for N in sizes:
    for r in ratios:
      D = N * r
      x_star, y_star = np.log(lr_opt(N, D)), np.log(batch_opt(D))
      L0 = 1.7 + 400 / N**0.34 + 400 / D**0.28
      gx = x_star + rng.uniform(-off, off) + lr_shift
      gy = y_star + rng.uniform(-off, off) + batch_shift
      for dx in lr_steps:
        for dy in batch_steps:
          v = gy + dy - y_star
          u = gx + dx - x_star - lr_batch_slope * v
          loss = L0 + k1 * u * u + k2 * v * v + (skew * k1 * u**3 if u > 0 else 0.0)
          loss += rng.normal(0.0, sigma)
          if u > diverge_at:
            loss = np.nan
          out.append(hparams_runs.Run(N, D, float(np.exp(gx + dx)), float(np.exp(gy + dy)),
                                      float(loss)))
  return out
