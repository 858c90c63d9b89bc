"""The figures of `chinchax fit-hparams`, each PNG and SVG (saved by `scaling.plots.canvas`):

* lr: the loss against peak LR at each (N, D) point (the point's best batch), its local
  quadratic's curve and fitted optimum, diverged runs marked at the top;
* optimum: the fitted LR (and batch) optimum of each point against N and against D, with the
  law at the points' other variable and its bootstrap band.
"""

import math
import os

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from chinchax.scaling.hparams import law as hparams_law
from chinchax.scaling.hparams import runs as hparams_runs
from chinchax.scaling.numerics import fmt
from chinchax.scaling.plots import canvas


def plot_lr(points: list[hparams_runs.Point], doc: dict, stem: str) -> list[str]:
  n = len(points)
  cols = min(n, 3)
  rows = math.ceil(n / cols)
  fig = Figure(figsize=(4 * cols, 3.2 * rows))
  for i, (p, fit) in enumerate(zip(points, doc["points"])):
    ax = fig.add_subplot(rows, cols, i + 1)
    best_B = fit["batch"]["opt"]
    Bs = np.unique(p.B)
    B = Bs[np.argmin(np.abs(np.log(Bs) - math.log(best_B)))] if best_B else Bs[
        np.nanargmin([np.nanmin(np.where(p.B == b, p.loss, np.nan)) for b in Bs])]
    for b, color in zip(Bs, canvas.colors(len(Bs))):
      sel = p.B == b
      ok = sel & np.isfinite(p.loss)
      order = np.argsort(p.lr[ok])
      ax.plot(p.lr[ok][order], p.loss[ok][order], "o-" if b == B else "o:", color=color, ms=4,
              label=f"B={fmt.num(b)}")
      bad = sel & ~np.isfinite(p.loss)
      if bad.any():
        top = np.nanmax(p.loss) if np.isfinite(p.loss).any() else 1.0
        ax.plot(p.lr[bad], np.full(bad.sum(), top), "x", color="red", label="diverged")
    if fit["lr"]["opt"]:
      ax.axvline(fit["lr"]["opt"], color="black", lw=1, ls="--",
                 label=f"LR*={fmt.num(fit['lr']['opt'])}")
    if fit["lr"]["within_tol"]:
      ax.axvspan(*fit["lr"]["within_tol"], color="grey", alpha=0.15)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(f"N={fmt.num(p.N)}, D={fmt.num(p.D)}" + (
        f" ({', '.join(fit['lr']['flags'])})" if fit["lr"]["flags"] else ""), fontsize=9)
    ax.set_xlabel("peak LR")
    ax.set_ylabel("loss")
    ax.legend(fontsize=6)
  fig.tight_layout()
  return canvas.save(fig, stem)


def plot_optimum(doc: dict, which: str, stem: str) -> list[str]:
  law, level = doc[which], doc["settings"]["ci"]
  pts = [p for p in doc["points"] if p[which]["opt"]]
  fig = Figure(figsize=(9, 3.6))
  for j, v in enumerate(("N", "D")):
    ax = fig.add_subplot(1, 2, j + 1)
    x = np.array([p[v] for p in pts])
    y = np.array([p[which]["opt"] for p in pts])
    ok = np.array([not p[which]["flags"] for p in pts], bool)
    ax.plot(x[ok], y[ok], "o", color="C0", label="fitted optimum")
    if (~ok).any():
      ax.plot(x[~ok], y[~ok], "x", color="red", label="flagged (not in the law)")
    others = sorted({p["D" if v == "N" else "N"] for p in pts})
    grid = np.geomspace(x.min() / 1.5, x.max() * 1.5, 50)
    for o, color in zip(others, canvas.colors(len(others))):
      vals = [{v: g, ("D" if v == "N" else "N"): o} for g in grid]
      for d in vals:
        d["C"] = 6 * d["N"] * d["D"]
      pred = [hparams_law.predict(law, d, level) for d in vals]
      ax.plot(grid, [p[0] for p in pred], color=color, lw=1,
              label=f"law at {'D' if v == 'N' else 'N'}={fmt.num(o)}")
      if pred[0][1]:
        ax.fill_between(grid, [p[1][0] for p in pred], [p[1][1] for p in pred], color=color,
                        alpha=0.15)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(v)
    ax.set_ylabel("peak LR" if which == "lr" else "batch (tokens)")
    ax.legend(fontsize=6)
  fig.suptitle(law["form"], fontsize=9)
  fig.tight_layout()
  return canvas.save(fig, stem)


def write_plots(points, doc: dict, folder: str) -> list[str]:
  written = plot_lr(points, doc, os.path.join(folder, "hparams_lr"))
  written += plot_optimum(doc, "lr", os.path.join(folder, "hparams_lr_law"))
  if doc["batch"] is not None:
    written += plot_optimum(doc, "batch", os.path.join(folder, "hparams_batch_law"))
  return written
