"""Residuals of a fit: loss - fitted loss by budget and by N, one colour per budget."""

import numpy as np
from matplotlib.figure import Figure

from chinchax.scaling.numerics import fmt
from chinchax.scaling.plots import canvas
from chinchax.scaling.runs.table import budget_groups, Runs


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
    by_N.plot(runs.N[order], r[order], "o-", color=color, ms=4, lw=0.8,
              label=f"C = {fmt.num(C, 2)}")
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
