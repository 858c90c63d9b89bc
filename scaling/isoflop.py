"""Approach 2 of Hoffmann et al. (2022, §3.2): IsoFLOP profiles.

For each budget (a group of runs of about equal C, `runs.budget_groups`) fit a parabola of
the loss in x = log N by least squares,

    L(x) ≈ p0·x² + p1·x + p2,     N* = exp(−p1 / (2·p0)),     L* = L(log N*).

A budget is dropped, with a warning that names it and says why, when it has fewer than 3
distinct sizes, when p0 ≤ 0 (the profile has no minimum), or when N* is not strictly inside
the sizes it sampled (an extrapolated minimum is not a measurement).

C of a budget is the geometric mean of its runs' C under the runs' FLOPs convention, so the
law speaks that convention whatever the nominal grid said. D* = C / f(N*), where the FLOPs
per token f is the least-squares line of log(C/D) on log N over the budget's runs: exactly
6·N* under `6ND`, the runs' own count under `chinchilla`.

Then, by least squares in log space over the kept budgets,

    log N*(C) = log k_N + a·log C,      log D*(C) = log k_D + b·log C.

Under `6ND`, a + b = 1 and k_N·k_D = 1/6 exactly.

The bootstrap is a residual bootstrap (Davison & Hinkley 1997, Algorithm 6.1): the sizes of a
budget are a design, not a sample, so every resample keeps them and draws new losses, each
budget's fitted parabola plus residuals drawn with replacement from the pool of all kept
budgets' residuals. Each residual is divided by sqrt(1 − h), h its leverage in its parabola,
and the pool is centred, so the draws have the spread of the noise rather than of what a
3-parameter fit leaves of it. Resampling the runs themselves instead (a pairs bootstrap)
repeats sizes: with the 4-6 sizes per budget a sweep can afford, most resamples lose a
budget's minimum, and those that survive understate the spread. A budget with 3 sizes leaves
no residual, so at least one budget needs 4 or more. A resample is degenerate, skipped and
counted, when it does not keep exactly the budgets the full fit kept: the exponents of
different budget sets are not the same estimate.
"""

import dataclasses
import warnings

import numpy as np

from chinchax.scaling.errors import UserError
from chinchax.scaling.runs import Runs, budget_groups

MIN_SIZES = 3


@dataclasses.dataclass(frozen=True, eq=False)
class IsoflopFit:
  a: float
  b: float
  log_kN: float
  log_kD: float
  budgets: np.ndarray  # C of each kept budget
  N_opt: np.ndarray
  D_opt: np.ndarray
  L_opt: np.ndarray
  parabolas: np.ndarray  # (n_budgets, 3): p0, p1, p2 of L in log N
  dropped: tuple[str, ...] = ()

  def N_star(self, C):
    return np.exp(self.log_kN + self.a * np.log(C))

  def D_star(self, C):
    return np.exp(self.log_kD + self.b * np.log(C))

  def to_dict(self) -> dict:
    return {
        "a": float(self.a), "b": float(self.b),
        "log_kN": float(self.log_kN), "log_kD": float(self.log_kD),
        "points": {"C": self.budgets.tolist(), "N": self.N_opt.tolist(),
                   "D": self.D_opt.tolist(), "loss": self.L_opt.tolist()},
        "parabolas": self.parabolas.tolist(),
        "dropped": list(self.dropped),
    }


def budget_C(runs: Runs, idx: np.ndarray) -> float:
  """The C of a budget group: the geometric mean of its runs' C."""
  return float(np.exp(np.mean(np.log(runs.C[idx]))))


def _budget_optimum(runs: Runs, idx: np.ndarray, loss: np.ndarray):
  """(C, N*, D*, L*, parabola) of one budget, or the reason it is dropped."""
  C = budget_C(runs, idx)
  x, loss = np.log(runs.N[idx]), loss[idx]
  sizes = np.unique(runs.N[idx])
  if len(sizes) < MIN_SIZES:
    return f"budget C={C:.3g} dropped: {len(sizes)} distinct sizes, need {MIN_SIZES}"
  p = np.polyfit(x, loss, 2)
  if p[0] <= 0:
    return (f"budget C={C:.3g} dropped: its loss is not convex in log N (the parabola opens "
            "downward), so it has no minimum; sample sizes on both sides of the optimum")
  x_opt = -p[1] / (2.0 * p[0])
  if not x.min() < x_opt < x.max():
    side = "smaller" if x_opt <= x.min() else "larger"
    return (f"budget C={C:.3g} dropped: the parabola's minimum N={np.exp(x_opt):.3g} is not "
            f"inside the sampled sizes [{sizes[0]:.3g}, {sizes[-1]:.3g}]; add {side} models")
  log_f = np.polyval(np.polyfit(x, np.log(runs.C[idx] / runs.D[idx]), 1), x_opt)
  return C, np.exp(x_opt), C / np.exp(log_f), np.polyval(p, x_opt), p


def _fit(runs: Runs, groups: list[np.ndarray],
         loss: np.ndarray | None = None) -> tuple[IsoflopFit, tuple[int, ...]]:
  loss = runs.loss if loss is None else loss
  kept, rows, dropped = [], [], []
  for i, idx in enumerate(groups):
    out = _budget_optimum(runs, idx, loss)
    if isinstance(out, str):
      dropped.append(out)
    else:
      kept.append(i)
      rows.append(out)
  if len(rows) < 2:
    raise UserError(
        f"Approach 2 needs at least two budgets with a loss minimum inside their sampled "
        f"sizes; {len(rows)} of {len(groups)} usable" + "".join(f"; {d}" for d in dropped))
  C, N, D, L = (np.array([r[k] for r in rows], np.float64) for k in range(4))
  a, log_kN = np.polyfit(np.log(C), np.log(N), 1)
  b, log_kD = np.polyfit(np.log(C), np.log(D), 1)
  fit = IsoflopFit(float(a), float(b), float(log_kN), float(log_kD), C, N, D, L,
                   np.array([r[4] for r in rows]), tuple(dropped))
  return fit, tuple(kept)


def fit_isoflop(runs: Runs) -> IsoflopFit:
  """Approach 2 on `runs`; each dropped budget also becomes a `UserWarning`."""
  fit, _ = _fit(runs, budget_groups(runs))
  for message in fit.dropped:
    warnings.warn(f"Approach 2: {message}", stacklevel=2)
  return fit


def _scaled_residuals(runs: Runs, idx: np.ndarray, p: np.ndarray) -> np.ndarray:
  """A budget's residuals from its parabola, each divided by sqrt(1 − leverage)."""
  x = np.log(runs.N[idx])
  u = (x - x.mean()) / max(np.ptp(x), 1e-12)  # same column space, well conditioned
  Q_nx3, _ = np.linalg.qr(np.stack([u * u, u, np.ones_like(u)], axis=1))
  h = np.sum(Q_nx3 * Q_nx3, axis=1)
  free = 1.0 - h > 1e-9  # h = 1: the parabola passes through the point whatever its noise
  return (runs.loss[idx] - np.polyval(p, x))[free] / np.sqrt(1.0 - h[free])


def bootstrap_isoflop(runs: Runs, n_resamples: int = 1000, seed: int = 0) -> dict:
  """Samples of a, b, log_kN, log_kD by the residual bootstrap of the module docstring."""
  groups = budget_groups(runs)
  fit, kept = _fit(runs, groups)
  kept_idx = [groups[i] for i in kept]
  pool = np.concatenate([_scaled_residuals(runs, idx, p)
                         for idx, p in zip(kept_idx, fit.parabolas)])
  if len(pool) == 0:
    raise UserError(
        "Approach 2's bootstrap needs a budget with 4 or more sizes: through 3 sizes the "
        "parabola fits every loss exactly and leaves no residual to measure the noise by")
  pool = pool - pool.mean()
  fitted = runs.loss.copy()
  for idx, p in zip(kept_idx, fit.parabolas):
    fitted[idx] = np.polyval(p, np.log(runs.N[idx]))
  resampled = np.concatenate(kept_idx)
  rng = np.random.default_rng(seed)
  samples, n_failed = [], 0
  for _ in range(n_resamples):
    loss = fitted.copy()  # dropped budgets keep their losses, so they are dropped again
    loss[resampled] += rng.choice(pool, size=len(resampled), replace=True)
    try:
      boot, kept_here = _fit(runs, groups, loss)
    except UserError:
      kept_here = None
    if kept_here != kept:
      n_failed += 1
      continue
    samples.append((boot.a, boot.b, boot.log_kN, boot.log_kD))
  columns = np.array(samples, np.float64).reshape(-1, 4).T
  return {"a": columns[0], "b": columns[1], "log_kN": columns[2], "log_kD": columns[3],
          "n_resamples": n_resamples, "n_failed": n_failed, "seed": seed}
