"""Studies replayed on a synthetic truth from one dense pool of cells: the full grid, the
adaptive study of `chinchax next` (scaling/select), and two naive studies at the adaptive
study's FLOPs (the largest budgets dropped; three sizes per budget around the prior). Every
study of one replicate reads the same noisy loss of a cell, so they differ only in which
cells they train. For bench/select_bench.py and tests/select/test_select.py."""

import dataclasses
import warnings

import numpy as np

import chinchax
from chinchax.errors import UserError
from chinchax.scaling.runs.table import make_runs
from chinchax.scaling.select import decide
from chinchax.scaling.select import pool as pool_lib

from tests.helpers import truths

BUDGETS = np.logspace(18, 21, 10)


@dataclasses.dataclass(frozen=True)
class World:
  """One replicate: the pool, each cell's observed loss (NaN: the run diverged), the truth."""

  pool: pool_lib.Pool
  loss: np.ndarray
  centre: np.ndarray  # index of each cell's budget's middle size (the prior's N*)
  a_true: float


def world(truth: truths.Truth, seed: int, *, budgets=BUDGETS, sizes: int = 8,
          spread: float = 6.0, noise: float = 0.005, n_diverged: int = 2,
          drift: float = 0.3) -> World:
  """A pool of `sizes` log-spaced sizes per budget over [N*/spread, N*·spread] around a prior
  that wanders ±drift in log N from the true N*; losses × (1 + noise·z); `n_diverged` cells
  give no loss."""
  rng = np.random.default_rng(seed)
  N, C = [], []
  for k, c in enumerate(budgets):
    centre = np.log(truths.N_star(truth.loss, c)) + drift * np.sin(1.7 * k + seed)
    N.append(np.exp(centre + np.linspace(-np.log(spread), np.log(spread), sizes)))
    C.append(np.full(sizes, c))
  N, C = np.concatenate(N), np.concatenate(C)
  D = C / (6 * N)
  loss = truth.loss(N, D) * (1 + noise * rng.standard_normal(len(N)))
  loss[rng.choice(len(N), n_diverged, replace=False)] = np.nan
  return World(pool_lib.make_pool(N, D, budget=C), loss, np.zeros(0), truth.a(budgets))


# The smoke sweep's pool (sweeps/configs/smoke.py: 6 budgets x 9 rungs) and a truth like its
# runs: the law Approach 3 fits to the smoke grid (a = 0.627) plus 0.05·(N/D)², a term only badly
# undertrained cells feel, with the 1.3% noise the smoke's local fits measure. On these small
# cheap budgets E and A are hard to separate and the undertrained corner is out of the law's form.
SMOKE_LAW = np.array([0.922, 16.0, 547.0, 0.313, 0.526])
SMOKE_RUNGS = np.array([10096, 20136, 33504, 48280, 67920, 90888, 114112, 143352, 175920.0])
SMOKE_BUDGETS = np.array([5e10, 1e11, 2e11, 4e11, 8e11, 1.5e12])
SMOKE_WINDOW = (0, 0, 0, 1, 2, 4)  # each budget's first rung of the smoke grid's five


def smoke_loss(N, D):
  E, A, B, alpha, beta = SMOKE_LAW
  return E + A / N**alpha + B / D**beta + 0.05 * (N / D)**2


SMOKE = truths.Truth("smoke", smoke_loss)


def smoke_world(seed: int, noise: float = 0.013) -> World:
  """The smoke's pool and its stand-in losses (above); `smoke_grid` is the smoke sweep's cells."""
  rng = np.random.default_rng(seed)
  N = np.tile(SMOKE_RUNGS, len(SMOKE_BUDGETS))
  C = np.repeat(SMOKE_BUDGETS, len(SMOKE_RUNGS))
  D = C / (6 * N)
  loss = smoke_loss(N, D) * (1 + noise * rng.standard_normal(len(N)))
  return World(pool_lib.make_pool(N, D, budget=C), loss, np.zeros(0), SMOKE.a(SMOKE_BUDGETS))


def smoke_grid(w: World) -> np.ndarray:
  return np.concatenate([np.flatnonzero(w.pool.budget == b)[s:s + 5]
                         for b, s in zip(SMOKE_BUDGETS, SMOKE_WINDOW)])


def interval_a(w: World, chosen: np.ndarray, bootstrap: int = 200, ci: float = 0.9):
  """(a, [lo, hi]) of chinchax.fit's recommended law on the chosen cells that did not diverge;
  None when no law with an interval comes out."""
  keep = np.asarray(chosen)[np.isfinite(w.loss[chosen])]
  p = w.pool
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      law = chinchax.fit(make_runs(p.N[keep], p.D[keep], w.loss[keep], budget=p.budget[keep]),
                         bootstrap=bootstrap, ci=ci)
  except UserError:
    return None
  ci_a = (law.approaches[law.approach].get("ci") or {}).get("a")
  return None if ci_a is None else (law.a, ci_a)


def full(w: World) -> np.ndarray:
  return np.arange(len(w.pool))


def drop_largest(w: World, flops: float) -> np.ndarray:
  """The full grid's budgets from the smallest up, while their FLOPs fit in `flops`."""
  out, spent = [], 0.0
  for b in np.unique(w.pool.budget):
    at = np.flatnonzero(w.pool.budget == b)
    if spent + w.pool.cost[at].sum() > flops:
      break
    out += list(at)
    spent += w.pool.cost[at].sum()
  return np.array(out, int)


def three_per_budget(w: World, flops: float) -> np.ndarray:
  """The three sizes nearest the prior's N* at each budget, the largest budgets dropped until
  they fit in `flops`."""
  groups = []
  for b in np.unique(w.pool.budget):
    at = np.flatnonzero(w.pool.budget == b)
    mid = len(at) // 2
    groups.append(at[np.argsort(w.pool.N[at])][max(mid - 2, 0):mid + 1])
  while len(groups) > 2 and sum(w.pool.cost[g].sum() for g in groups) > flops:
    groups.pop()
  return np.concatenate(groups)


def adaptive(w: World, max_flops: float, *, first: int = 10, k: int = 4, target: str = "a",
             width: float | None = None, resamples: int = 200) -> tuple[np.ndarray, list]:
  """`chinchax next` in a loop: a first design of `first` cells, then `k` cells a round, each
  round's losses revealed, until the decision stops or `max_flops` is spent. Returns the
  cells trained and each round's decision."""
  chosen, rounds = [], []
  while True:
    spent = float(w.pool.cost[chosen].sum()) if chosen else 0.0
    ok = [j for j in chosen if np.isfinite(w.loss[j])]
    runs = make_runs(w.pool.N[ok], w.pool.D[ok], w.loss[ok]) if ok else None
    tried = pool_lib.made(w.pool, w.pool.N[chosen], w.pool.D[chosen]) if chosen else None
    d = decide.choose(runs, w.pool, first if not chosen else k, flops_left=max(max_flops - spent, 1e-300),
                      target=target, width=width, resamples=resamples, tried=tried)
    rounds.append(d)
    if d.stop or not d.cells:
      return np.array(chosen, int), rounds
    for c in d.cells:
      j = int(np.flatnonzero(pool_lib.made(w.pool, [c.N], [c.D]))[0])
      chosen.append(j)
