"""The figures of a fit (drawn with scaling.plots.law), each as PNG and SVG:

* isoflops: the IsoFLOP profiles with their fitted curves and minima (Approach 2);
* optimal: N*(C) and D*(C) of every approach with their bootstrap bands, the fitted range of
  C marked and the extrapolation beyond it shaded;
* law: the loss contours of the parametric law, every budget line labelled;
* residuals: loss - fitted loss by budget and by N (the parametric law, else the profiles).

The residuals show where a law misses the runs (a trend along N inside a budget, or one
budget off as a whole), which its intervals do not show. The fitted loss is the parametric law L = E + A/N^α + B/D^β when there is one (Approach 3),
otherwise each budget's IsoFLOP profile (Approach 2), at the runs' own N and D."""

import os
from typing import Callable

from matplotlib.figure import Figure
import numpy as np

from chinchax.scaling.plots import canvas, law as plots
from chinchax.scaling.runs import table as runs_lib
from chinchax.scaling.pipeline import Fitted
from chinchax.scaling.isoflop.fit import budget_C
from chinchax.scaling.runs.table import budget_groups, Runs


def parametric(E: float, A: float, B: float, alpha: float, beta: float,
               gamma: float = 1.0) -> Callable:
  return lambda N, D: E + (A / N**alpha + B / D**beta)**gamma


def residuals(runs: Runs, predict: Callable) -> np.ndarray:
  return runs.loss - predict(runs.N, runs.D)


def residual_figure(runs: Runs, r: np.ndarray, title: str) -> Figure:
  """Left: residual against each run's budget C; right: against N, a colour per budget."""
  fig = Figure(figsize=(11, 4.2))
  by_C, by_N = fig.subplots(1, 2, sharey=True)
  groups = budget_groups(runs)
  for color, idx in zip(canvas.colors(len(groups)), groups):
    C = float(np.exp(np.mean(np.log(runs.C[idx]))))
    ok = idx[np.isfinite(r[idx])]
    by_C.scatter(np.full(len(ok), C), r[ok], color=color, s=18, zorder=3)
    order = ok[np.argsort(runs.N[ok])]
    by_N.plot(runs.N[order], r[order], "o-", color=color, ms=4, lw=0.8, label=f"C = {C:.2g}")
  for ax, xlabel in ((by_C, f"C (training FLOPs, {runs.flops})"),
                     (by_N, f"N (parameters, {runs.params})")):
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.grid(True, which="both", alpha=0.3)
  by_C.margins(x=0.2)
  by_C.set_ylabel("loss - fitted loss (nats/token)")
  by_N.legend(fontsize=8)
  fig.suptitle(title)
  return fig


def plot_residuals(runs: Runs, r: np.ndarray, stem: str, title: str) -> list[str]:
  return canvas.save(residual_figure(runs, r, title), stem)


LABELS = {"1": "Approach 1", "2": "Approach 2", "3": "Approach 3"}
PARAMETRIC = ("E", "A", "B", "alpha", "beta")


def write_plots(fitted: Fitted, folder: str) -> list[str]:
  """PNG and SVG files in `folder`; returns their paths."""
  runs, doc, written = fitted.runs, fitted.doc, []
  if "2" in fitted.fits:
    written += plots.plot_isoflops(runs, fitted.fits["2"], os.path.join(folder, "isoflops"))
  lines = {LABELS[k]: v for k, v in doc["approaches"].items()}
  bands = {LABELS[k]: v for k, v in fitted.draws.items()}
  fitted_C = (float(runs.C.min()), float(runs.C.max()))
  C_range = (fitted_C[0] / 10, fitted_C[1] * 1e4)
  written += plots.plot_optimal(lines, os.path.join(folder, "optimal"), samples=bands,
                                level=fitted.level, C_range=C_range, fitted_C=fitted_C)
  law = doc["law"]
  budgets = sorted({float(runs.C[g].mean()) for g in runs_lib.budget_groups(runs)})
  if "E" in law:
    written += plots.plot_law(os.path.join(folder, "law"), E=law["E"], A=law["A"], B=law["B"],
                              alpha=law["alpha"], beta=law["beta"],
                              gamma=law.get("gamma", 1.0), N=runs.N, D=runs.D, budgets=budgets)
  r, title = _residuals(fitted)
  if r is not None:
    written += plot_residuals(runs, r, os.path.join(folder, "residuals"), title)
  return written


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
