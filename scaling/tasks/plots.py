"""The figures of `chinchax fit-tasks`, one per task, each PNG and SVG (scaling.plots.canvas):
left, step 1: each run's final task loss against D, one colour per N, with the law's curve
at each N; right, step 2: every evaluation's accuracy against its loss, the sigmoid and its
bootstrap band, the losses it saw marked (beyond them the accuracy is extrapolated)."""

import os

import numpy as np
from matplotlib.figure import Figure

from chinchax import atomic
from chinchax.scaling.numerics import fmt
from chinchax.scaling.numerics import intervals
from chinchax.scaling.plots import canvas
from chinchax.scaling.tasks import file as tasks_file
from chinchax.scaling.tasks import link


def _stem(folder: str, task: str) -> str:
  return os.path.join(folder, tasks_file.figure_name(task))


def plot_task(fit, entry: dict, level: float, stem: str) -> list[str]:
  N, D, L = fit.final
  s1 = entry["step1"]
  fig = Figure(figsize=(10, 4))
  ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
  sizes = np.unique(N)
  for n, color in zip(sizes, canvas.colors(len(sizes))):
    sel = N == n
    ax1.plot(D[sel], L[sel], "o", color=color, ms=4, label=f"N={fmt.num(n)}")
    d = np.geomspace(D.min() / 2, D.max() * 4, 100)
    ax1.plot(d, s1["E"] + s1["A"] / n**s1["alpha"] + s1["B"] / d**s1["beta"], "-",
             color=color, lw=1)
  ax1.set(xscale="log", xlabel="D (tokens)", ylabel="task loss",
          title=f"{fit.task}: step 1, L(N, D)")
  ax1.legend(fontsize=7)
  ax2.plot(fit.data.loss, fit.data.accuracy, ".", color="0.4", ms=4, label="evaluations")
  lo, hi = fit.step2.loss_range
  grid = np.linspace(lo - 0.3 * (hi - lo), hi + 0.1 * (hi - lo), 200)
  ax2.plot(grid, link.predict(fit.step2.params[None], grid)[0], "-", color="C0",
           label="sigmoid")
  if fit.draws is not None and len(fit.draws):
    band = intervals.quantiles(link.predict(fit.draws[:, 5:], grid), level, axis=0)
    ax2.fill_between(grid, band[0], band[1], color="C0", alpha=0.2,
                     label=f"{level:.0%} band")
  for x in (lo, hi):
    ax2.axvline(x, color="0.6", ls=":", lw=1)
  ax2.set(xlabel="task loss", ylabel="accuracy", title="step 2, accuracy(L)")
  ax2.legend(fontsize=7)
  return canvas.save(fig, stem)


def write(laws, folder: str) -> list[str]:
  """The figures of a fresh fit (`laws.fits`); the paths written."""
  atomic.makedirs(folder)
  out = []
  for task, fit in laws.fits.items():
    out += plot_task(fit, laws.doc["tasks"][task], laws.doc["settings"]["ci"],
                     _stem(folder, task))
  return out
