"""Figures of a scaling study: IsoFLOP profiles, N*(C) and D*(C), loss contours of a law.

Matplotlib's object API (`Figure`, no pyplot state) with the Agg renderer. Every function
takes data and an output path stem, renders PNG and SVG in memory, then writes each file
atomically (`canvas.save`), and returns the paths written. Axes in N, D, C are log10;
curves are drawn from the fitted formulas, never smoothed:

* N*(C) = k_N·C^a, D*(C) = k_D·C^b, the bootstrap band is the pointwise percentile band of
  the resampled lines;
* for L = E + A/N^α + B/D^β under C = 6ND: N*(C) = G·(C/6)^(β/(α+β)),
  D*(C) = (C/6)^(α/(α+β))/G with G = (αA/(βB))^(1/(α+β)) (Hoffmann et al. 2022, eq. 4).
"""

import math
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.scaling.numerics import power
from chinchax.scaling.plots import canvas
from chinchax.scaling.isoflop.fit import IsoflopFit, budget_C
from chinchax.scaling.runs.table import Runs, budget_groups

def plot_isoflops(runs: Runs, fit: IsoflopFit, stem: str) -> list[str]:
  """Loss against N per budget, the fitted profiles (`IsoflopFit.profile_loss`), their minima."""
  fig = Figure(figsize=(7, 5))
  ax = fig.add_subplot()
  groups = budget_groups(runs)
  for color, idx in zip(canvas.colors(len(groups)), groups):
    C = budget_C(runs, idx)
    row = np.flatnonzero(np.isclose(fit.budgets, C, rtol=1e-9))
    label = f"C = {fmt.num(C, 2)}" + ("" if row.size else " (dropped)")
    ax.scatter(runs.N[idx], runs.loss[idx], edgecolors=color, label=label,
               facecolors=color if row.size else "none", zorder=3)
    if row.size:
      i = row[0]
      lo, hi = fit.profiles[i].get("window", (runs.N[idx].min(), runs.N[idx].max()))
      x = np.linspace(np.log(lo), np.log(hi), 200)  # a local parabola: only its window
      ax.plot(np.exp(x), fit.profile_loss(i, np.exp(x)), color=color, lw=1.5)
      ax.scatter([fit.N_opt[i]], [fit.L_opt[i]], color=color, marker="*", s=180,
                 edgecolors="black", zorder=4)
  ax.set_xscale("log")
  ax.set_xlabel(f"N (parameters, {runs.params})")
  ax.set_ylabel("eval loss (nats/token)")
  curve = {"parabola": "parabola", "local": "local fit"}.get(fit.method, "fitted profile")
  ax.set_title(f"IsoFLOP profiles ({runs.flops} FLOPs, {fit.method}); ★ = {curve}'s minimum")
  ax.legend(fontsize=8)
  ax.grid(True, which="both", alpha=0.3)
  return canvas.save(fig, stem)


def plot_optimal(approaches: Mapping[str, Mapping], stem: str,
                 samples: Mapping[str, Mapping] | None = None, level: float = 0.9,
                 C_range: tuple[float, float] | None = None,
                 fitted_C: tuple[float, float] | None = None) -> list[str]:
  """N*(C) and D*(C), log-log (`optimal_figure`), as PNG and SVG."""
  return canvas.save(optimal_figure(approaches, samples, level, C_range, fitted_C), stem)


def optimal_figure(approaches: Mapping[str, Mapping],
                   samples: Mapping[str, Mapping] | None = None, level: float = 0.9,
                   C_range: tuple[float, float] | None = None,
                   fitted_C: tuple[float, float] | None = None) -> Figure:
  """N*(C) and D*(C), one line per approach, its bootstrap band where sampled, the fitted
  range of C marked and the extrapolation beyond it shaded.

  `approaches` maps a label to a dict with `a`, `b`, `log_kN`, `log_kD` and optionally
  `points` = {"C", "N", "D"} (what `IsoflopFit.to_dict()` and `EnvelopeFit.to_dict()` give).
  `samples` maps a label to arrays `a`, `b`, `log_kN`, `log_kD` (the bootstrap's output; NaN
  rows, refits that gave no law, are left out). `fitted_C`: the smallest and largest C of the
  runs the approaches were fitted to.
  """
  if not approaches:
    raise UserError("nothing to plot: no approach given")
  samples = samples or {}
  if C_range is None:
    C_points = np.concatenate([np.asarray(r.get("points", {}).get("C", []), np.float64)
                               for r in approaches.values()])
    if not C_points.size:
      raise UserError("plot_optimal needs C_range when no approach carries points")
    C_range = (C_points.min() / 10, C_points.max() * 10)
  C = np.logspace(math.log10(C_range[0]), math.log10(C_range[1]), 200)
  fig = Figure(figsize=(11, 5.2))
  axes = fig.subplots(1, 2)
  q = (100 * (1 - level) / 2, 100 * (1 + level) / 2)
  for color, (label, r) in zip(canvas.colors(len(approaches)), approaches.items()):
    for ax, key, exp_, log_k in ((axes[0], "N", "a", "log_kN"), (axes[1], "D", "b", "log_kD")):
      ax.plot(C, power.at(C, r[exp_], r[log_k]), color=color,
              label=f"{label}: {exp_} = {r[exp_]:.3f}")
      points = r.get("points")
      if points and len(points.get("C", [])):
        ax.scatter(points["C"], points[key], color=color, zorder=3)
      band = _band(samples.get(label), exp_, log_k, C, q)
      if band is not None:
        ax.fill_between(C, *band, color=color, alpha=0.25, lw=0,
                        label=f"{label}: {100 * level:.0f}% bootstrap band")
  for ax, name in zip(axes, ("N* (parameters)", "D* (tokens)")):
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(C[0], C[-1])
    if fitted_C is not None:
      lo, hi = fitted_C
      ax.axvline(lo, color="0.3", ls=":", lw=1)
      ax.axvline(hi, color="0.3", ls=":", lw=1, label=f"fitted C: {fmt.interval((lo, hi), 2)}")
      ax.axvspan(hi, C[-1], color="0.5", alpha=0.12, lw=0, label="extrapolation")
      if C[0] < lo:
        ax.axvspan(C[0], lo, color="0.5", alpha=0.12, lw=0)
    ax.set_xlabel("C (training FLOPs)")
    ax.set_ylabel(name)
    ax.grid(True, which="both", alpha=0.3)
  # One legend under both panels: inside each it covered a third of the curves.
  handles, labels = axes[0].get_legend_handles_labels()
  more = [(h, l.replace(" a = ", " b = ")) for h, l in zip(*axes[1].get_legend_handles_labels())
          if l not in labels]
  fig.legend(handles + [h for h, _ in more], labels + [l for _, l in more], fontsize=8,
             loc="lower center", ncol=min(4, len(labels) + len(more)), frameon=False)
  fig.subplots_adjust(bottom=0.11 + 0.045 * math.ceil((len(labels) + len(more)) / 4),
                      top=0.9, wspace=0.25)
  fig.suptitle("Compute-optimal allocation")
  return fig


def _band(s: Mapping | None, exp_: str, log_k: str, C: np.ndarray, q) -> tuple | None:
  """The pointwise percentile band of the sampled lines, or None (no finite sample)."""
  if s is None or not len(s[exp_]):
    return None
  slope, icpt = np.asarray(s[exp_], np.float64), np.asarray(s[log_k], np.float64)
  ok = np.isfinite(slope) & np.isfinite(icpt)
  if ok.sum() < 2:
    return None
  log_lines_SxC = icpt[ok, None] + slope[ok, None] * np.log(C)[None]
  lo, hi = np.percentile(log_lines_SxC, q, axis=0)  # in log space: exp overflows nothing
  return np.exp(lo), np.exp(hi)


def plot_law(stem: str, **kw) -> list[str]:
  """Loss contours of a parametric law (`law_figure`), as PNG and SVG."""
  return canvas.save(law_figure(**kw), stem)


def law_figure(*, E: float, A: float, B: float, alpha: float, beta: float,
               gamma: float = 1.0, N: Sequence[float] | None = None, D: Sequence[float] | None = None,
               budgets: Sequence[float] | None = None,
               N_range: tuple[float, float] | None = None,
               D_range: tuple[float, float] | None = None) -> Figure:
  """Contours of L = E + A/N^α + B/D^β (or E + (A/N^α + B/D^β)^γ) over (N, D) at round
  loss values, the efficient frontier, iso-C lines C = 6ND at `budgets` each labelled inside the frame, and the runs."""
  for name, v in (("A", A), ("B", B), ("alpha", alpha), ("beta", beta)):
    if not (math.isfinite(v) and v > 0):
      raise UserError(f"plot_law: {name} must be positive and finite, got {v!r}")
  if not math.isfinite(E):
    raise UserError(f"plot_law: E must be finite, got {E!r}")
  N = None if N is None else np.asarray(N, np.float64)
  D = None if D is None else np.asarray(D, np.float64)
  if N_range is None:
    N_range = (N.min() / 4, N.max() * 4) if N is not None and N.size else (1e7, 1e11)
  if D_range is None:
    D_range = (D.min() / 4, D.max() * 4) if D is not None and D.size else (1e9, 1e13)
  N_grid = np.logspace(*np.log10(N_range), 200)
  D_grid = np.logspace(*np.log10(D_range), 200)
  L_DxN = E + (A / N_grid[None, :] ** alpha + B / D_grid[:, None] ** beta) ** gamma

  fig = Figure(figsize=(7, 5.5))
  ax = fig.add_subplot()
  # Round levels, spaced over the bulk of the losses (the far corner runs off to large L).
  levels = MaxNLocator(nbins=12).tick_values(L_DxN.min(), np.quantile(L_DxN, 0.95))
  filled = ax.contourf(N_grid, D_grid, L_DxN, levels=levels, cmap="viridis", extend="max")
  fig.colorbar(filled, ax=ax, label="loss (nats/token)")
  ax.contour(N_grid, D_grid, L_DxN, levels=levels, colors="white", linewidths=0.3)

  G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
  a, b = beta / (alpha + beta), alpha / (alpha + beta)
  C_lo, C_hi = 6 * N_range[0] * D_range[0], 6 * N_range[1] * D_range[1]
  C = np.logspace(math.log10(C_lo), math.log10(C_hi), 400)
  ax.plot(G * (C / 6) ** a, (C / 6) ** b / G, color="red", lw=2,
          label=f"efficient frontier: N* ∝ C^{a:.3f}, D* ∝ C^{b:.3f}")
  if budgets is None:
    budgets = 10.0 ** np.arange(math.ceil(math.log10(C_lo)), math.log10(C_hi) + 1e-9, 2)
  for C_iso in budgets:
    ax.plot(N_grid, C_iso / (6 * N_grid), color="white", ls="--", lw=1)
    at = _label_point(C_iso, N_range, D_range, G * (C_iso / 6) ** a)
    if at is not None:
      ax.text(*at, f"C={fmt.num(C_iso, 2)}", color="white", fontsize=7, ha="center", va="center",
              bbox=dict(boxstyle="round,pad=0.15", fc="black", alpha=0.35, lw=0))
  if N is not None and D is not None:
    ax.scatter(N, D, color="black", s=12, zorder=3, label="runs")
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlim(*N_range)
  ax.set_ylim(*D_range)
  ax.set_xlabel("N (parameters)")
  ax.set_ylabel("D (tokens)")
  inner = f"{fmt.num(A)}/N^{fmt.num(alpha)} + {fmt.num(B)}/D^{fmt.num(beta)}"
  ax.set_title(f"L = {fmt.num(E)} + " + (inner if gamma == 1 else f"({inner})^{fmt.num(gamma)}"))
  ax.legend(fontsize=8, loc="upper left")
  return fig


def _label_point(C: float, N_range, D_range, N_star: float | None = None) -> tuple | None:
  """The middle (in log N) of the part of the line D = C/(6N) inside the frame, or with
  `N_star` (where the frontier crosses it) of the longer piece on either side of it, so that
  the label does not sit under the frontier; None when the line misses the frame."""
  lo = max(math.log(N_range[0]), math.log(C / (6 * D_range[1])))
  hi = min(math.log(N_range[1]), math.log(C / (6 * D_range[0])))
  if not lo < hi:
    return None
  if N_star is not None and lo < math.log(N_star) < hi:
    x = math.log(N_star)
    lo, hi = (lo, x) if x - lo >= hi - x else (x, hi)
  N = math.exp((lo + hi) / 2)
  return N, C / (6 * N)
