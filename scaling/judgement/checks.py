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
  if hasattr(fit3, "places"):  # the law beneath a schedule: the checkpoints carry its excess
    predicted = fit3.predict(N, D, fit3.places.f_n[bud.idx_n])
  elif hasattr(fit3, "gamma"):  # the nesting form, adopted as the law
    predicted = fit3.predict(N, D)
  else:  # the law's own sum, in the order its records were first written
    predicted = fit3.E + fit3.A * N**-fit3.alpha + fit3.B * D**-fit3.beta
  return lack_of_fit(y - predicted, sigma, N_n=N, D_n=D,
                           in_window_n=np.isfinite(loc.fitted_Rxn[0]), loss_n=y)


def approach3_message(record: dict, form: str = "E + A/N^alpha + B/D^beta") -> str:
  return lack_of_fit_message(record, f"the law {form}")


POSITION_BINS = 5  # a checkpoint's place in its model's run, log(D / the model's largest D)
P_SHAPE = 0.01  # 40 draws of 8 models x 15 checkpoints, 0.5% noise: law 0/40 flagged, cosine 31/40


def curve_shape(runs: Runs, fit3, sizes_n: np.ndarray) -> dict | None:
  """Do a checkpoint suite's residuals from Approach 3's law follow each checkpoint's place
  in its model's run? A learning-rate schedule's decay bends every model's curve the same way
  at the same place (a cosine run's checkpoints sit above the law mid-run and meet it at the
  end), which the law, a function of N and D alone, cannot follow.

  The log-residuals less each model's mean (a model's own offset is not a shape) are grouped
  by quantiles of log(D / that model's largest D); chi2 = sum of n_b mean_b^2 / s^2 over the
  POSITION_BINS groups, s the residuals' robust scale (1.4826 MAD), on POSITION_BINS - 1
  degrees of freedom. None when there are too few checkpoints per group."""
  from scipy import special  # pylint: disable=g-import-not-at-top
  r = np.log(runs.loss) - np.log(fit3.predict(runs.N, runs.D))
  labels = np.unique(sizes_n, return_inverse=True)[1]
  mean_k = np.bincount(labels, r) / np.bincount(labels)
  D_max_k = np.zeros(labels.max() + 1)
  np.maximum.at(D_max_k, labels, runs.D)
  r = r - mean_k[labels]
  place = np.log(runs.D / D_max_k[labels])
  edges = np.quantile(place, np.linspace(0, 1, POSITION_BINS + 1)[1:-1])
  group = np.searchsorted(edges, place, side="right")
  n_b = np.bincount(group, minlength=POSITION_BINS)
  s = 1.4826 * np.median(np.abs(r - np.median(r)))
  if n_b.min() < 5 or not s > 0:
    return None
  mean_b = np.bincount(group, r, minlength=POSITION_BINS) / n_b
  chi2 = float(np.sum(n_b * mean_b**2) / s**2)
  return {"chi2": chi2, "dof": POSITION_BINS - 1,
          "p_value": float(special.chdtrc(POSITION_BINS - 1, chi2)),
          "mean_by_place": [float(m) for m in mean_b]}


def curve_shape_message(record: dict, beneath: bool = False) -> str:
  """The bend named; `beneath`: Approach 3's law was fitted beneath the schedule
  (`parametric.schedule`), else nothing corrected it."""
  by = ", ".join(f"{1e3 * m:+.1f}" for m in record["mean_by_place"])
  what = ("Approach 3's law is the law beneath the schedule, read at each checkpoint's place "
          "in its run (see the notes); it assumes the last checkpoint of each model is its "
          "run's end" if beneath else
          "if these are checkpoints of one run per size, a is biased: fit runs trained to "
          "each D, or their cooldown branches")
  return (f"the checkpoints bend along D as the law does not: their residuals follow their "
          f"place in each model's run (from first to last fifth, {by} x 1e-3 in log-loss; "
          f"chi2 = {record['chi2']:.1f} on {record['dof']} degrees of freedom, p = "
          f"{record['p_value']:.1g}), as a learning-rate schedule's decay bends them; {what}")
