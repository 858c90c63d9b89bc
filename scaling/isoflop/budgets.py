"""What every Approach 2 estimator shares: the budgets (screened for sizes), the design each
needs but the losses, the minima of the joint profile fit or of per-budget parabolas, which
minima lie inside the sizes, and the power laws through the minima (`scaling.isoflop.fit`)."""

import dataclasses

import numpy as np

from chinchax.scaling.isoflop import vp as isoflop_vp
from chinchax.scaling.numerics import fmt
from chinchax.errors import UserError
from chinchax.scaling.runs.table import Runs

MIN_SIZES = 3


def budget_C(runs: Runs, idx: np.ndarray) -> float:
  """The C of a budget group: the geometric mean of its runs' C."""
  return float(np.exp(np.mean(np.log(runs.C[idx]))))


@dataclasses.dataclass(frozen=True, eq=False)
class Budgets:
  """The budgets with enough sizes, and what every estimator needs of them but the loss."""

  groups: tuple[np.ndarray, ...]  # run indices per budget
  C_K: np.ndarray
  p0_K: np.ndarray  # log(C/D) = p0 + p1·log N within the budget
  p1_K: np.ndarray
  x_lo_K: np.ndarray  # sampled log N range
  x_hi_K: np.ndarray
  n_sizes_K: np.ndarray
  idx_n: np.ndarray  # the runs, budget after budget
  budget_n: np.ndarray
  log_N_n: np.ndarray
  log_D_n: np.ndarray

  def design(self, method: str) -> isoflop_vp.Design:
    if method == "vp_levels" and self.n_sizes_K.min() < 4:
      raise UserError(
          "Approach 2: method 'vp_levels' needs 4 or more sizes in every budget: with 3, a "
          "budget's own level and D-term fit its 3 losses whatever the exponents; use 'vp'")
    return isoflop_vp.Design.make(self.log_N_n, self.log_D_n, self.budget_n,
                                  np.log(self.C_K), self.p0_K, self.p1_K,
                                  shared_level=method != "vp_levels")


def screen(runs: Runs, groups: list[np.ndarray], loss: np.ndarray) -> tuple[Budgets, list[str]]:
  """The budgets with MIN_SIZES distinct sizes; why not the rest. (`loss` is unused: whether
  a budget has a minimum is read from its losses by `scaling.isoflop.minima`.)"""
  del loss
  keep, dropped = [], []
  for idx in groups:
    sizes = np.unique(runs.N[idx])
    if len(sizes) < MIN_SIZES:
      dropped.append(f"budget C={fmt.num(budget_C(runs, idx))} dropped: {len(sizes)} distinct "
                     f"sizes, need {MIN_SIZES}")
    else:
      keep.append(idx)
  x = [np.log(runs.N[idx]) for idx in keep]
  lines = [np.polyfit(xk, np.log(runs.C[idx] / runs.D[idx]), 1) for xk, idx in zip(x, keep)]
  idx_n = np.concatenate(keep) if keep else np.zeros(0, np.int64)
  budget_n = np.concatenate([np.full(len(idx), k) for k, idx in enumerate(keep)] or [[]])
  return Budgets(
      tuple(keep), np.array([budget_C(runs, idx) for idx in keep]),
      np.array([l[1] for l in lines]), np.array([l[0] for l in lines]),
      np.array([xk.min() for xk in x]), np.array([xk.max() for xk in x]),
      np.array([len(np.unique(xk)) for xk in x]), idx_n, budget_n.astype(np.int64),
      np.log(runs.N[idx_n]), np.log(runs.D[idx_n])), dropped


def parabolas(bud: Budgets, Y_Rxn: np.ndarray) -> np.ndarray:
  """(R, K, 3) parabola coefficients in log N of each budget, for each row of losses."""
  out = []
  for k in range(len(bud.C_K)):
    sel = bud.budget_n == k
    out.append(np.polyfit(bud.log_N_n[sel], Y_Rxn[:, sel].T, 2).T)
  return np.stack(out, axis=1)


@dataclasses.dataclass(frozen=True, eq=False)
class Estimate:
  """R estimates of every budget's optimum (rows: loss vectors of one design)."""

  log_N_star_RxK: np.ndarray
  L_star_RxK: np.ndarray
  convex_RxK: np.ndarray  # the budget's curve has a minimum at all
  vp: isoflop_vp.Fit | None
  parabola_RxKx3: np.ndarray


def estimate(bud: Budgets, Y_Rxn: np.ndarray, method: str) -> Estimate:
  P = parabolas(bud, Y_Rxn)
  if method == "parabola":  # a budget screened in can open downward in a resample
    with np.errstate(all="ignore"):
      x = -P[..., 1] / (2 * P[..., 0])
    L = P[..., 0] * x * x + P[..., 1] * x + P[..., 2]
    return Estimate(x, L, P[..., 0] > 0, None, P)
  fit = isoflop_vp.fit(bud.design(method), Y_Rxn)
  has_min = np.broadcast_to(fit.ok_R[:, None], fit.log_N_star_RxK.shape)
  return Estimate(fit.log_N_star_RxK, fit.L_star_RxK, has_min, fit, P)


def inside(bud: Budgets, est: Estimate) -> np.ndarray:
  """(R, K): the budget's minimum exists and lies strictly inside its sampled sizes."""
  x = est.log_N_star_RxK
  with np.errstate(invalid="ignore"):
    return est.convex_RxK & (bud.x_lo_K < x) & (x < bud.x_hi_K)


def power_laws(bud: Budgets, log_N_star_RxK: np.ndarray, keep: np.ndarray):
  """(a, log_kN, b, log_kD), each (R,), by least squares over the kept budgets.

  keep: (K,) for the same budgets in every row, or (R, K) for each row its own (each row
  must keep at least two budgets with distinct C).
  """
  w_RxK = np.broadcast_to(np.asarray(keep, bool), log_N_star_RxK.shape).astype(np.float64)
  n_R = w_RxK.sum(axis=1)
  mean = lambda v_RxK: (w_RxK * v_RxK).sum(axis=1) / n_R
  log_C_K = np.log(bud.C_K)
  with np.errstate(invalid="ignore"):  # a dropped budget's N* may be nan; its weight is 0
    x_RxK = np.where(w_RxK > 0, log_N_star_RxK, 0.0)
  log_D_RxK = log_C_K - bud.p0_K - bud.p1_K * x_RxK
  log_C_R = mean(np.broadcast_to(log_C_K, w_RxK.shape))
  lc_RxK = w_RxK * (log_C_K - log_C_R[:, None])
  slope = lambda y_RxK: (lc_RxK * y_RxK).sum(axis=1) / (lc_RxK * lc_RxK).sum(axis=1)
  a, b = slope(x_RxK), slope(log_D_RxK)
  return a, mean(x_RxK) - a * log_C_R, b, mean(log_D_RxK) - b * log_C_R


def too_few(n_kept: int, n_groups: int, dropped: list[str]) -> UserError:
  return UserError(
      f"Approach 2 needs at least two budgets whose lowest loss is at an interior size "
      f"(a minimum inside their sampled sizes); {n_kept} of {n_groups} usable"
      + "".join(f"; {d}" for d in dropped))
