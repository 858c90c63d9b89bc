"""Approach 1 of Hoffmann et al. (2022, §3.1): the lower envelope of loss curves.

Curves: each run's loss against tokens (its `metrics.jsonl`, `Runs.curves`); runs without a
curve are grouped by N, and the final losses of the runs of one N at several D form a curve
(repeated D are averaged). A run covers C = f·D along its curve, f its FLOPs per token (its
C/D). A curve of a single point covers no range of C and is left out.

On a log-spaced grid of C over the range the curves cover, each curve's loss is linearly
interpolated in log C (no extrapolation: a curve only speaks for the C it covered). At each
grid C the envelope is the lowest loss over curves; the curve attaining it gives N, and
D = C/f of that curve (= C/(6N) under `6ND`).

The envelope's N is a staircase in C, and a size's step speaks for its optimum only where it
is whole: where it ends in a crossover (the neighbouring size takes over, and both sizes'
curves cover both sides of the hand-over) rather than where the data stops (the smallest
size at the low end, the largest at the top, a size whose curves end before another takes
over). Steps cut by the data are left out. Each remaining size gives one point: C_s, the
geometric centre of the grid C over which it is lowest, and D_s = C_s/f. (Least squares over
the raw grid points instead would shrink the slope by 1 − 1/n² for n equal steps, and a cut
step would pull the fit toward the ends of the data.) Then, by least squares over the sizes,

    log N*(C) = log k_N + a·log C_s,      log D*(C) = log k_D + b·log C_s.

At least two whole steps must remain. The bootstrap resamples whole curves
with replacement and refits; a resample that cannot be fitted is skipped and counted.
"""

import dataclasses

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.runs.table import Curve, Runs
from chinchax.scaling.numerics import forks, power

N_GRID = 1500  # as many C values as Hoffmann et al. used
KIND = "pairs-curves"  # whole curves resampled with replacement


@dataclasses.dataclass(frozen=True, eq=False)
class EnvelopeFit:
  a: float
  b: float
  log_kN: float
  log_kD: float
  C: np.ndarray  # one point per size on the envelope: the points fitted
  N: np.ndarray
  D: np.ndarray
  loss: np.ndarray
  n_curves: int
  envelope_C: np.ndarray  # the whole envelope on the grid of C
  envelope_N: np.ndarray
  envelope_loss: np.ndarray

  def N_star(self, C):
    return power.at(C, self.a, self.log_kN)

  def D_star(self, C):
    return power.at(C, self.b, self.log_kD)

  def to_dict(self) -> dict:
    return {
        "a": float(self.a), "b": float(self.b),
        "log_kN": float(self.log_kN), "log_kD": float(self.log_kD),
        "points": {"C": self.C.tolist(), "N": self.N.tolist(), "D": self.D.tolist(),
                   "loss": self.loss.tolist()},
        "n_curves": int(self.n_curves),
        "envelope": {"C": self.envelope_C.tolist(), "N": self.envelope_N.tolist(),
                     "loss": self.envelope_loss.tolist()},
    }


def curves_of(runs: Runs) -> list[Curve]:
  """The runs' loss curves, plus one curve per N from the runs that have no curve."""
  with_curve = {c.name for c in runs.curves}
  curves = list(runs.curves)
  rest = np.array([n not in with_curve for n in runs.name], bool)
  for N in np.unique(runs.N[rest]):
    idx = np.flatnonzero(rest & (runs.N == N))
    D, inverse = np.unique(runs.D[idx], return_inverse=True)
    mean = lambda x: np.bincount(inverse, weights=x) / np.bincount(inverse)
    curves.append(Curve(f"N={N:.4g}", float(N), D, mean(runs.C[idx]), mean(runs.loss[idx])))
  return [c for c in curves if len(c.C) >= 2]


@dataclasses.dataclass(frozen=True, eq=False)
class _Grid:
  """Every curve on one C grid: loss_KxG is NaN where curve k does not cover C_G[g]."""

  C_G: np.ndarray
  loss_KxG: np.ndarray
  N_K: np.ndarray
  flops_per_token_K: np.ndarray


def _grid(curves: list[Curve], n_grid: int) -> _Grid:
  if not curves:
    raise UserError("Approach 1 needs loss curves (metrics.jsonl) or runs of one N at two or "
                    "more D; got none")
  log_lo = min(np.log(c.C).min() for c in curves)
  log_hi = max(np.log(c.C).max() for c in curves)
  log_C_G = np.linspace(log_lo, log_hi, n_grid)
  loss_KxG = np.stack([
      np.interp(log_C_G, np.log(c.C), c.loss, left=np.nan, right=np.nan) for c in curves])
  N_K = np.array([c.N for c in curves], np.float64)
  f_K = np.array([np.exp(np.mean(np.log(c.C / c.D))) for c in curves], np.float64)
  return _Grid(np.exp(log_C_G), loss_KxG, N_K, f_K)


def _whole_segments(win_G: np.ndarray, cover_SxG: np.ndarray) -> np.ndarray:
  """Mask of grid points in runs of one winning size with a crossover at both ends."""
  keep = np.zeros(len(win_G), bool)
  starts = np.flatnonzero(np.diff(win_G, prepend=-2) != 0)
  for g0, g1 in zip(starts, [*starts[1:] - 1, len(win_G) - 1]):
    s = win_G[g0]
    if s < 0 or g0 == 0 or g1 == len(win_G) - 1:
      continue
    left, right = win_G[g0 - 1], win_G[g1 + 1]
    keep[g0:g1 + 1] = (left >= 0 and right >= 0
                       and cover_SxG[s, g0 - 1] and cover_SxG[left, g0]
                       and cover_SxG[s, g1 + 1] and cover_SxG[right, g1])
  return keep


def _fit(grid: _Grid, rows: np.ndarray) -> EnvelopeFit:
  loss_KxG = grid.loss_KxG[rows]
  covered_KxG = ~np.isnan(loss_KxG)
  sizes, size_K = np.unique(grid.N_K[rows], return_inverse=True)
  cover_SxG = np.zeros((len(sizes), len(grid.C_G)), bool)
  np.logical_or.at(cover_SxG, size_K, covered_KxG)
  masked_KxG = np.where(covered_KxG, loss_KxG, np.inf)
  best_G = np.argmin(masked_KxG, axis=0)
  covered_G = covered_KxG.any(axis=0)
  win_G = np.where(covered_G, size_K[best_G], -1)
  keep = _whole_segments(win_G, cover_SxG)
  k = rows[best_G]
  C, N = grid.C_G[covered_G], grid.N_K[k][covered_G]
  loss = masked_KxG.min(axis=0)[covered_G]
  won, inverse = np.unique(win_G[keep], return_inverse=True)
  if len(won) < 2:
    raise UserError(
        "Approach 1 needs at least two model sizes that are each the lowest loss over a "
        f"whole range of C, with a crossover to another size at both ends; found {len(won)}: "
        "train sizes on both sides of the optimum, with curves that overlap in C")
  count = np.bincount(inverse)
  log_C_S = np.bincount(inverse, weights=np.log(grid.C_G[keep])) / count
  log_f_S = np.bincount(inverse, weights=np.log(grid.flops_per_token_K[k[keep]])) / count
  N_S, D_S = sizes[won], np.exp(log_C_S - log_f_S)
  a, log_kN = np.polyfit(log_C_S, np.log(N_S), 1)
  b, log_kD = np.polyfit(log_C_S, np.log(D_S), 1)
  return EnvelopeFit(float(a), float(b), float(log_kN), float(log_kD), np.exp(log_C_S), N_S,
                     D_S, np.interp(log_C_S, np.log(C), loss), len(rows), C, N, loss)


def fit_envelope(runs: Runs, n_grid: int = N_GRID) -> EnvelopeFit:
  """Approach 1 on the runs' loss curves."""
  curves = curves_of(runs)
  return _fit(_grid(curves, n_grid), np.arange(len(curves)))


def bootstrap_envelope(runs: Runs, n_resamples: int = 1000, seed: int = 0,
                       n_grid: int = N_GRID) -> dict:
  """Samples of a, b, log_kN, log_kD from curves resampled with replacement."""
  curves = curves_of(runs)
  grid = _grid(curves, n_grid)
  _fit(grid, np.arange(len(curves)))  # the data itself must fit
  rng = np.random.default_rng(seed)
  rows_R = [rng.choice(len(curves), size=len(curves), replace=True) for _ in range(n_resamples)]

  def refit(rows_list) -> tuple[list[tuple[float, ...]], int]:
    samples, failed = [], 0
    for rows in rows_list:
      try:
        fit = _fit(grid, rows)
      except UserError:
        failed += 1
        continue
      samples.append((fit.a, fit.b, fit.log_kN, fit.log_kD))
    return samples, failed

  # The resamples drawn first, then refitted a share per core (`numerics.forks`): the same
  # draws wherever they are refitted.
  parts = forks.map_shares(refit, rows_R)
  samples, n_failed = [s for p, _ in parts for s in p], sum(f for _, f in parts)
  columns = np.array(samples, np.float64).reshape(-1, 4).T
  return {"a": columns[0], "b": columns[1], "log_kN": columns[2], "log_kD": columns[3],
          "n_resamples": n_resamples, "n_failed": n_failed, "seed": seed, "kind": KIND}
