"""Does a fitted model describe the runs? Every approach that models the losses is checked the
same way (Approach 3's law by `scaling.judgement.checks.approach3`, Approach 2's profile fits
in `minima`; Approach 1 reads the envelope of the loss curves, with no model of them to check):
the root-mean-square of its residuals over the runs of the IsoFLOP budgets, over sigma, the
noise the local window fits measure (`local`: a parabola per budget around its lowest loss,
robust to diverged runs). A model that fits has a ratio near 1 (its residuals are noise);
above RATIO it is misspecified for these runs, or a few runs are far off, and its minima or
exponents are not to be trusted as they stand. The warning names where the squared residuals
concentrate: a few runs (diverged, or a broken record), badly undertrained runs (D/N < 1, far
from any minimum), the runs far from each budget's minimum, or the runs near the minima (the
family's shape is wrong there).

The noise credited is at least FLOOR = 0.1% of the median loss: no sweep measures less (the
seed-to-seed spread of a training run's loss is 0.2-1%); a smaller local spread is the local
fits' own model error on noise-free synthetic data, and against it every model but the exact
one would fail.

RATIO = 3: under Gaussian noise a fitting model's ratio is an F-like ratio of two variance
estimates; with 10 or more degrees of freedom on each side it exceeds 3 (variance ratio 9)
with probability below 0.1%. On real published sweeps a joint profile fit that placed the
minima wrongly had ratios of 10-40."""

import numpy as np

from chinchax.scaling.isoflop import local as isoflop_local


RATIO = 3.0
FLOOR = 1e-3  # the least noise credited, relative to the median loss
FEW = 0.5  # share of the squared residuals that makes "a few runs" the cause
UNDERTRAINED = 1 / 3  # share carried by D/N < 1 runs that makes them the cause


def local_fits(bud, y_n: np.ndarray) -> tuple[isoflop_local.Local, float]:
  """The local fits of the screened budgets and the noise they measure (NaN if nothing does)."""
  loc = isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K), y_n[None])
  return loc, float(loc.sigma_R[0])


def lack_of_fit(residual_n: np.ndarray, sigma: float, *, N_n, D_n, in_window_n, loss_n) -> dict:
  """The lack-of-fit record of residuals `residual_n` (runs: sizes N_n, tokens D_n, losses
  loss_n; whether each lies in a local window near its budget's minimum)."""
  r2 = np.asarray(residual_n, np.float64)**2
  rms = float(np.sqrt(r2.mean()))
  if np.isfinite(sigma):
    sigma = max(sigma, FLOOR * float(np.median(loss_n)))
  if not np.isfinite(sigma) or sigma <= 0:
    return {"rms": rms, "sigma": None, "ratio": None, "limit": RATIO, "fits": None,
            "cause": None}
  ratio = rms / sigma
  total = r2.sum()
  n_few = max(2, int(0.05 * len(r2)))
  worst = np.argsort(r2)[::-1][:n_few]
  top = r2[worst].sum() / total
  under = np.asarray(D_n) < np.asarray(N_n)
  far = ~np.asarray(in_window_n, bool)
  if top > FEW and not under[worst].all():  # the most undertrained runs: named below
    cause = (f"{n_few} runs carry {top:.0%} of its squared residuals: a few runs far off the "
             "rest (diverged, or a broken record?)")
  elif under.any() and r2[under].sum() / total > UNDERTRAINED:
    cause = (f"badly undertrained runs (D/N < 1, {under.sum()} of {len(r2)}) carry "
             f"{r2[under].sum() / total:.0%} of its squared residuals: the model's form does "
             "not describe them, and they pull where it puts the minima")
  elif far.any() and r2[far].sum() / total > 0.5:
    cause = (f"runs far from each budget's minimum carry {r2[far].sum() / total:.0%} of its "
             "squared residuals: the model's form does not describe the whole range of sizes")
  else:
    cause = ("the runs near each budget's minimum carry most of its squared residuals: the "
             "model's form does not describe the profiles where the minima are")
  return {"rms": rms, "sigma": float(sigma), "ratio": float(ratio), "limit": RATIO,
          "fits": bool(ratio <= RATIO), "cause": cause}


def lack_of_fit_message(record: dict, what: str) -> str:
  return (f"{what} does not fit these runs: its residuals (rms {record['rms']:.3g} nats) are "
          f"{record['ratio']:.1f}x the noise local fits measure ({record['sigma']:.2g} nats; "
          f"above {record['limit']:g}x is a lack of fit); {record['cause']}")
