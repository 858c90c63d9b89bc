"""The figures of a fit (drawn with scaling.plots.law), each as PNG and SVG:

* isoflops: the IsoFLOP profiles with their fitted curves and minima (Approach 2);
* optimal: N*(C) and D*(C) of every approach with their bootstrap bands, the fitted range of
  C marked and the extrapolation beyond it shaded;
* law: the loss contours of the parametric law, every budget line labelled;
* residuals: loss - fitted loss by budget and by N (the parametric law, else the profiles).

The residuals show where a law misses the runs (a trend along N inside a budget, or one
budget off as a whole), which its intervals do not show. The fitted loss is the parametric law L = E + A/N^α + B/D^β when there is one (Approach 3),
otherwise each budget's IsoFLOP profile (Approach 2), at the runs' own N and D.

This module builds the figures' jobs (their data, no matplotlib); the workers draw them
(scaling/plots/workers.py), the costliest first; the paths come back in the order above."""

import os
from typing import Callable

import numpy as np

from chinchax.scaling.plots import workers
from chinchax.scaling.plots.workers import Job
from chinchax.scaling.runs import table as runs_lib
from chinchax.scaling.pipeline import Fitted
from chinchax.scaling.isoflop.fit import budget_C
from chinchax.scaling.runs.table import Runs


def parametric(E: float, A: float, B: float, alpha: float, beta: float,
               gamma: float = 1.0) -> Callable:
  return lambda N, D: E + (A / N**alpha + B / D**beta)**gamma


def residuals(runs: Runs, predict: Callable) -> np.ndarray:
  return runs.loss - predict(runs.N, runs.D)


LABELS = {"1": "Approach 1", "2": "Approach 2", "3": "Approach 3"}
PARAMETRIC = ("E", "A", "B", "alpha", "beta")
_LAW = "chinchax.scaling.plots.law:"
ORDER = ("isoflops", "optimal", "law", "residuals")


def write_plots(fitted: Fitted, folder: str, in_process: bool = False) -> list[str]:
  """PNG and SVG files in `folder`, each figure drawn by a worker process
  (`scaling.plots.workers`; `in_process`: here); returns their paths."""
  paths = workers.draw(jobs(fitted, folder), in_process=in_process)
  return sorted(paths, key=lambda p: ORDER.index(os.path.basename(p).split(".")[0]))


def jobs(fitted: Fitted, folder: str) -> list[Job]:
  """The figures of `fitted`, the costliest first (they start first on the workers)."""
  runs, doc, out = fitted.runs, fitted.doc, []
  lines = {LABELS[k]: v for k, v in doc["approaches"].items()}
  bands = {LABELS[k]: v for k, v in fitted.draws.items()}
  fitted_C = (float(runs.C.min()), float(runs.C.max()))
  C_range = (fitted_C[0] / 10, fitted_C[1] * 1e4)
  out.append(Job(_LAW + "plot_optimal", (lines, os.path.join(folder, "optimal")),
                 dict(samples=bands, level=fitted.level, C_range=C_range, fitted_C=fitted_C)))
  r, title = _residuals(fitted)
  if r is not None:
    out.append(Job("chinchax.scaling.plots.residuals:plot_residuals",
                   (runs, r, os.path.join(folder, "residuals"), title)))
  if "2" in fitted.fits:
    out.append(Job(_LAW + "plot_isoflops",
                   (runs, fitted.fits["2"], os.path.join(folder, "isoflops"))))
  law = doc["law"]
  budgets = sorted({float(runs.C[g].mean()) for g in runs_lib.budget_groups(runs)})
  if "E" in law:
    out.append(Job(_LAW + "plot_law", (os.path.join(folder, "law"),),
                   dict(E=law["E"], A=law["A"], B=law["B"], alpha=law["alpha"],
                        beta=law["beta"], gamma=law.get("gamma", 1.0), N=runs.N, D=runs.D,
                        budgets=budgets)))
  return out


def _residuals(fitted: Fitted):
  """(loss - fitted loss per run, the figure's title), or (None, None) with nothing fitted."""
  runs = fitted.runs
  three = fitted.doc["approaches"].get("3", {})
  if all(k in three for k in PARAMETRIC):
    law = parametric(*(three[k] for k in PARAMETRIC), three.get("gamma", 1.0))
    return residuals(runs, law), "Residuals of Approach 3's law"
  fit = fitted.fits.get("2")
  if fit is None:
    return None, None
  r = np.full(len(runs), np.nan)
  for idx in runs_lib.budget_groups(runs):
    row = np.flatnonzero(np.isclose(fit.budgets, budget_C(runs, idx), rtol=1e-9))
    if row.size:
      r[idx] = runs.loss[idx] - fit.profile_loss(row[0], runs.N[idx])
      lo, hi = fit.profiles[row[0]].get("window", (0, np.inf))  # a local fit: its runs only
      r[idx[(runs.N[idx] < lo * (1 - 1e-9)) | (runs.N[idx] > hi * (1 + 1e-9))]] = np.nan
  return r, "Residuals of Approach 2's IsoFLOP profiles"
