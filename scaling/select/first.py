"""The first cells, when there is no law to ask: a small space-filling design over the pool.

Each cell is a point (x, u): x its budget's log C scaled to [0, 1] over the pool's budgets,
u its size's rank among its budget's sizes scaled to [0, 1] (the small end 0, the large 1),
so that every budget's span of sizes counts alike. Only the cells of the cheaper half of the
pool's budgets (x <= 0.5) and the middle of their sizes (0.2 <= u <= 0.8: around the prior the
pool is centred on, not the badly over- or undertrained ends) are offered while they hold at
least the cells asked for (else the cheaper half, else the whole pool): the first design spends
little, and what it shows decides where the rest goes.
The design is greedy maximin: the offered cell nearest the centre of its region first (or,
with runs already made, the cell farthest from them), then each time the cell farthest from
every cell already placed (runs and picks), within the FLOPs left; ties go to the cheaper."""

import numpy as np

from chinchax.scaling.select import pool as pool_lib


def coordinates(pool: pool_lib.Pool) -> np.ndarray:
  """(M, 2): each cell's (x, u) as the module docstring defines them."""
  budgets = pool_lib.budgets_of(pool)
  log_b = np.log(budgets)
  span = np.ptp(log_b)
  x = (log_b - log_b.min()) / span if span > 0 else np.full(len(pool), 0.5)
  u = np.full(len(pool), 0.5)
  for b in np.unique(budgets):
    at = np.flatnonzero(budgets == b)
    if len(at) > 1:
      u[at[np.argsort(pool.N[at])]] = np.linspace(0.0, 1.0, len(at))
  return np.stack([x, u], axis=1)


def design(pool: pool_lib.Pool, k: int, flops_left: float = np.inf,
           allowed: np.ndarray | None = None, placed: np.ndarray | None = None) -> list[int]:
  """Up to k indices of the pool, as the module docstring chooses them; `placed`: the (x, u)
  of runs already made (they repel the picks)."""
  xy = coordinates(pool)
  free = np.ones(len(pool), bool) if allowed is None else np.array(allowed, bool)
  cheap = free & (xy[:, 0] <= 0.5)
  middle = cheap & (xy[:, 1] >= 0.2 - 1e-9) & (xy[:, 1] <= 0.8 + 1e-9)
  offered = next(m for m in (middle, cheap, free) if m.sum() >= k or m is free).copy()
  region = xy[offered]
  centre = (region.min(axis=0) + region.max(axis=0)) / 2 if len(region) else np.full(2, 0.5)
  others = np.zeros((0, 2)) if placed is None else np.asarray(placed, np.float64).reshape(-1, 2)
  picks, left = [], float(flops_left)
  for _ in range(k):
    ok = offered & (pool.cost <= left)
    if not ok.any():
      break
    if len(others):
      far = np.min(np.linalg.norm(xy[:, None] - others[None], axis=2), axis=1)
    else:
      far = -np.linalg.norm(xy - centre, axis=1)
    # Farthest first; among equals (to 1e-9) the cheaper.
    order = np.lexsort((pool.cost, -np.round(far, 9)))
    j = int(next(i for i in order if ok[i]))
    picks.append(j)
    offered[j] = False
    left -= pool.cost[j]
    others = np.vstack([others, xy[j]])
  return picks


def placed_of(pool: pool_lib.Pool, N_run, D_run) -> np.ndarray:
  """The (x, u) of the runs that are cells of the pool (the others are not in its space)."""
  made = []
  for n, d in zip(N_run, D_run):
    hit = pool_lib.made(pool, [n], [d])
    if hit.any():
      made.append(int(np.flatnonzero(hit)[0]))
  return coordinates(pool)[made] if made else np.zeros((0, 2))
