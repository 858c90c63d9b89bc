"""The candidate cells a selection chooses from: (N, D, budget) rows and their cost C = 6ND.

A pool is a CSV with columns N and D (or C) and optionally budget (`chinchax next
--candidates=CSV`), or a sweep config's grid (`sweeps/adaptive.py`). Every bad row is one
UserError naming its file, line and field, read by the same pieces as a CSV of runs
(scaling/runs/files.py). A cell's cost is its training FLOPs: 6·N·D, or the C column a CSV
gives (a chinchilla count). Cells within `SAME` (relative) in both N and D of a run already
made are that run: they are not offered again."""

import dataclasses
import math

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.runs import files

SAME = 0.02  # relative difference in N and in D below which a cell is a run already made


@dataclasses.dataclass(frozen=True, eq=False)
class Pool:
  """Candidate cells, float64, one entry each; `budget` NaN where the pool gives none."""

  N: np.ndarray
  D: np.ndarray
  cost: np.ndarray
  budget: np.ndarray
  source: str = ""

  def __len__(self) -> int:
    return len(self.N)

  def subset(self, idx) -> "Pool":
    idx = np.asarray(idx)
    return dataclasses.replace(self, N=self.N[idx], D=self.D[idx], cost=self.cost[idx],
                               budget=self.budget[idx])


def make_pool(N, D, *, cost=None, budget=None, source: str = "<arrays>") -> Pool:
  """A pool from arrays (cost: 6ND where not given); refused if a value is not positive."""
  N, D = np.asarray(N, np.float64).ravel(), np.asarray(D, np.float64).ravel()
  n = len(N)
  cost = 6.0 * N * D if cost is None else np.asarray(cost, np.float64).ravel()
  budget = np.full(n, np.nan) if budget is None else np.asarray(budget, np.float64).ravel()
  for name, x in (("N", N), ("D", D), ("cost", cost), ("budget", budget)):
    if x.shape != (n,):
      raise UserError(f"{source}: {name} has {x.size} values for {n} cells")
    bad = ~(np.isfinite(x) & (x > 0)) & ~(np.isnan(x) if name == "budget" else False)
    if bad.any():
      raise UserError(f"{source}: cell {int(np.flatnonzero(bad)[0])} has {name}="
                      f"{x[bad][0]!r}; every value must be positive and finite")
  if not n:
    raise UserError(f"{source}: no candidate cells")
  return Pool(N, D, cost, budget, source)


def read_pool(path: str) -> Pool:
  """The candidate cells of a CSV: N, D (or C), optional budget; other columns ignored."""

  def check(header):
    if "N" not in header:
      raise UserError(f"{path}: missing column 'N' (candidate cells need N and D, or N and "
                      "C; optionally budget)")
    if "D" not in header and "C" not in header:
      raise UserError(f"{path}: needs a column 'D' (tokens) or 'C' (FLOPs) beside N")

  rows = files.csv_table(path, check)
  N, D, cost, budget, seen = [], [], [], [], {}
  for line, raw in rows:
    where = f"{path}:{line}"
    r = {k: (v.strip() if isinstance(v, str) else v) for k, v in raw.items()}
    n = files.positive(where, "N", r["N"])
    d, c = files.tokens_and_flops(where, r, n)
    b = math.nan if files.is_missing(r.get("budget")) else files.positive(where, "budget",
                                                                           r["budget"])
    key = (float(f"{n:.6g}"), float(f"{d:.6g}"))
    if key in seen:
      raise UserError(f"{where}: the cell N={n:g}, D={d:g} repeats line {seen[key]}; list "
                      "each candidate once")
    seen[key] = line
    N.append(n), D.append(d), cost.append(c), budget.append(b)
  return make_pool(N, D, cost=cost, budget=budget, source=path)


def made(pool: Pool, N_run, D_run) -> np.ndarray:
  """Mask of the pool's cells that a run (N_run[i], D_run[i]) already made (within SAME)."""
  if len(N_run) == 0:
    return np.zeros(len(pool), bool)
  rN = np.abs(np.log(pool.N[:, None] / np.asarray(N_run, np.float64)[None]))
  rD = np.abs(np.log(pool.D[:, None] / np.asarray(D_run, np.float64)[None]))
  tol = math.log1p(SAME)
  return np.any((rN <= tol) & (rD <= tol), axis=1)


def budgets_of(pool: Pool) -> np.ndarray:
  """Each cell's budget: its own where given, else its cost rounded to 2 significant digits
  (cells of one IsoFLOP budget share it)."""
  rounded = np.array([float(f"{c:.2g}") for c in pool.cost])
  return np.where(np.isnan(pool.budget), rounded, pool.budget)
