"""The fit's checks of its own outputs, each a warning line stored in law.json: intervals that
do not hold their estimates (`shifted`), and Approach 3's law against the noise of the runs
(`approach3`, by the lack-of-fit measure Approach 2's profile fits are held to:
`scaling.isoflop.lack_of_fit`). The runs that look wrong are `scaling.runs.anomalies`."""

import numpy as np

from chinchax.scaling.isoflop import budgets as isoflop_budgets
from chinchax.scaling.isoflop.lack_of_fit import lack_of_fit, lack_of_fit_message, local_fits
from chinchax.scaling.numerics.intervals import interval
from chinchax.scaling.runs.table import budget_groups, Runs

SHIFTED_NAMES = ("a", "b")


def unprefixed(messages, name: str) -> list[str]:
  """The messages without the "Approach k: " their Python warning carried: the pipeline
  prefixes every approach's warnings once, in law.json's list."""
  prefix = f"Approach {name}: "
  return [m[len(prefix):] if m.startswith(prefix) else m for m in messages]


def shifted(entry: dict, draws: dict, level: float) -> list[str]:
  """A warning for each of a, b whose bootstrap percentile interval missed the estimate."""
  out = []
  for k in SHIFTED_NAMES:
    if entry.get(k) is None or k not in draws or not len(draws[k]):
      continue
    lo, hi = interval(draws[k], level)
    if not lo <= entry[k] <= hi:
      out.append(f"the bootstrap's interval of {k}, [{lo:.3f}, {hi:.3f}], does not hold the "
                 f"estimate {k} = {entry[k]:.3f}: the estimator is biased on this design; "
                 "the interval given is widened to hold it")
  return out


def approach3(runs: Runs, fit3) -> dict | None:
  """Approach 3's lack-of-fit record over the runs of the IsoFLOP budgets (None: no budget
  has 3 sizes)."""
  bud, _ = isoflop_budgets.screen(runs, budget_groups(runs), runs.loss)
  if len(bud.C_K) == 0:
    return None
  y = runs.loss[bud.idx_n]
  loc, sigma = local_fits(bud, y)
  N, D = runs.N[bud.idx_n], runs.D[bud.idx_n]
  predicted = fit3.E + fit3.A * N**-fit3.alpha + fit3.B * D**-fit3.beta
  return lack_of_fit(y - predicted, sigma, N_n=N, D_n=D,
                           in_window_n=np.isfinite(loc.fitted_Rxn[0]), loss_n=y)


def approach3_message(record: dict) -> str:
  return lack_of_fit_message(record, "the law E + A/N^alpha + B/D^beta")
