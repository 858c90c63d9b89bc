"""The residuals of a fit, loss - fitted loss, by budget and by N: where a law misses the runs
(a trend along N inside a budget, or one budget off as a whole) is what its intervals do not
show.

The fitted loss is the parametric law L = E + A/N^α + B/D^β when there is one (Approach 3),
otherwise each budget's IsoFLOP profile (Approach 2), at the runs' own N and D.
"""

from typing import Callable

import numpy as np
from matplotlib.figure import Figure

from chinchax.scaling import plots
from chinchax.scaling.runs import Runs, budget_groups


def parametric(E: float, A: float, B: float, alpha: float, beta: float) -> Callable:
  return lambda N, D: E + A / N**alpha + B / D**beta


def residuals(runs: Runs, predict: Callable) -> np.ndarray:
  return runs.loss - predict(runs.N, runs.D)


def residual_figure(runs: Runs, r: np.ndarray, title: str) -> Figure:
  """Left: residual against each run's budget C; right: against N, a colour per budget."""
  fig = Figure(figsize=(11, 4.2))
  by_C, by_N = fig.subplots(1, 2, sharey=True)
  groups = budget_groups(runs)
  for color, idx in zip(plots._colors(len(groups)), groups):  # pylint: disable=protected-access
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
  return plots._save(residual_figure(runs, r, title), stem)  # pylint: disable=protected-access
