"""Approach 2 of Hoffmann et al. (2022, §3.2): IsoFLOP profiles.

For each budget (a group of runs of about equal C, `runs.budget_groups`) find the size N*
that minimises the loss along the budget, then, by least squares in log space over the
budgets,

    log N*(C) = log k_N + a·log C,      log D*(C) = log k_D + b·log C.

Methods for N* (`METHODS`), each budget's minimum read as `scaling.isoflop_minima` says:

* "auto" (default): "local" where the local fits measure the noise (a budget with more than
  3 sizes near its minimum), else "vp".
* "local": each budget's minimum from the runs near its lowest loss, a robust parabola in
  log N over the sizes within a factor 4 of it (`scaling.isoflop_local`).
* "vp", "vp_levels": every budget's profile as the law implies it,
  c0 + cN·N^-alpha + cD_k·D^-beta, all budgets fitted jointly (`scaling.isoflop_vp`).
  Unbiased whatever the grid when the profiles are of that family; when they are not (a
  term for undertrained runs, a Kaplan-form law, constant-LR runs), the runs far from the
  minima set its shape and place its minima wrongly, which the lack-of-fit check catches.
* "parabola": the paper's parabola in log N per budget over all its sizes, L ≈ p0·x² + p1·x
  + p2, N* = exp(−p1/(2·p0)). Biased when a budget's sizes are off-centre around its optimum
  and the profile is asymmetric (Czech et al. 2026). Kept for comparison.
Every method but "local" falls back to the local estimate when it does not fit (with a
warning naming the likely cause), and for a budget where its minimum is outside the sizes.

A budget is dropped, with a warning that names it and says why, when it has fewer than 3
distinct sizes, or when its lowest measured loss is at its smallest or largest size (the
data do not put its minimum inside the sizes). A budget whose lowest loss is at an interior
size is never dropped.

C of a budget is the geometric mean of its runs' C under the runs' FLOPs convention, so the
law speaks that convention whatever the nominal grid said. D* = C / f(N*), where the FLOPs
per token f is the least-squares line of log(C/D) on log N over the budget's runs: exactly
6·N* under `6ND`, the runs' own count under `chinchilla`. Under `6ND`, a + b = 1 and
k_N·k_D = 1/6 exactly.

The bootstrap is in `scaling.isoflop_bootstrap` (`bootstrap_isoflop`), the grid
diagnostics in `scaling.isoflop_diagnostics`.
"""

import dataclasses
import warnings

import numpy as np

from chinchax.scaling import isoflop_diagnostics, isoflop_vp
from chinchax.errors import UserError
from chinchax.scaling.runs import Runs, budget_groups

MIN_SIZES = 3
METHODS = ("auto", "local", "vp", "vp_levels", "parabola")
PARABOLA_FORM = "p[0]*x^2 + p[1]*x + p[2], x = ln N"
PROFILE_FORM = "L0 + P*(N/N_star)^-alpha + Q*(N/N_star)^gamma"  # alpha*P = gamma*Q


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
  profiles: tuple[dict, ...]  # per kept budget: the fitted curve, see `profile_loss`
  dropped: tuple[str, ...] = ()
  method: str = "vp"  # the method whose minima were read ("local" after a fallback)
  diagnostics: list[dict] = dataclasses.field(default_factory=list)
  warnings: tuple[str, ...] = ()  # every message a user should read, the dropped ones too
  exponents: dict | None = None  # the profile's alpha, beta (methods vp*)
  asked: str = "auto"
  lack_of_fit: dict | None = None  # of the method asked (scaling.lack_of_fit.check)

  def N_star(self, C):
    return np.exp(self.log_kN + self.a * np.log(C))

  def D_star(self, C):
    return np.exp(self.log_kD + self.b * np.log(C))

  def profile_loss(self, i: int, N) -> np.ndarray:
    """The fitted loss of kept budget i at sizes N along that budget."""
    return profile_loss(self.profiles[i], N)

  def to_dict(self) -> dict:
    return {
        "method": self.method, "method_asked": self.asked, "lack_of_fit": self.lack_of_fit,
        "a": float(self.a), "b": float(self.b),
        "log_kN": float(self.log_kN), "log_kD": float(self.log_kD),
        "points": {"C": self.budgets.tolist(), "N": self.N_opt.tolist(),
                   "D": self.D_opt.tolist(), "loss": self.L_opt.tolist()},
        "profiles": [dict(p) for p in self.profiles],
        "exponents": self.exponents,
        "diagnostics": [dict(d) for d in self.diagnostics],
        "dropped": list(self.dropped),
        "warnings": list(self.warnings),
    }


def profile_loss(profile: dict, N) -> np.ndarray:
  """Loss on a profile dict of `IsoflopFit.profiles` (its "form" says which curve)."""
  x = np.log(np.asarray(N, np.float64))
  if profile["form"] == PARABOLA_FORM:
    return np.polyval(profile["p"], x)
  t = x - np.log(profile["N_star"])  # PROFILE_FORM
  return profile["L0"] + profile["P"] * np.exp(-profile["alpha"] * t) + profile["Q"] * np.exp(
      profile["gamma"] * t)


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
  a budget has a minimum is read from its losses by `scaling.isoflop_minima`.)"""
  del loss
  keep, dropped = [], []
  for idx in groups:
    sizes = np.unique(runs.N[idx])
    if len(sizes) < MIN_SIZES:
      dropped.append(f"budget C={budget_C(runs, idx):.3g} dropped: {len(sizes)} distinct "
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


def _profile(m, k: int) -> dict:
  """The curve kept budget k's minimum was read from (`isoflop_minima.Minima` m)."""
  C = float(m.bud.C_K[k])
  if m.local_K[k] or m.est.vp is None:
    local = m.local_K[k] or m.used == "local"
    p = m.loc.coef_RxKx3[0, k] if local else m.est.parabola_RxKx3[0, k]
    out = {"C": C, "form": PARABOLA_FORM, "p": p.tolist()}
    if local:
      out["window"] = np.exp(m.loc.window_RxKx2[0, k]).tolist()
    return out
  vp = m.est.vp
  alpha, gamma, P = float(vp.alpha_R[0]), float(vp.gamma_RxK[0, k]), float(vp.P_RxK[0, k])
  Q = alpha * P / gamma
  return {"C": C, "form": PROFILE_FORM, "N_star": float(np.exp(m.log_N_star_K[k])),
          "L0": float(m.L_star_K[k]) - P - Q, "P": P, "Q": Q, "alpha": alpha,
          "gamma": gamma}


def fit_isoflop(runs: Runs, method: str = "auto") -> IsoflopFit:
  """Approach 2 on `runs`; each dropped budget and every caveat also becomes a `UserWarning`."""
  from chinchax.scaling import isoflop_minima  # pylint: disable=g-import-not-at-top (cycle)
  m = isoflop_minima.read(runs, method)
  for message in m.messages:
    warnings.warn(f"Approach 2: {message}", stacklevel=2)
  bud, keep, x = m.bud, m.keep_K, m.log_N_star_K
  a, log_kN, b, log_kD = (float(v[0]) for v in power_laws(bud, x[None], keep))
  diagnostics, grid_warnings = isoflop_diagnostics.diagnose(
      bud, m.y_n, m.est, m.used, vp_fits=(m.lack_of_fit or {}).get("fits") is not False)
  exponents = None
  if m.est.vp is not None:
    exponents = {"alpha": float(m.est.vp.alpha_R[0]), "beta": float(m.est.vp.beta_R[0]),
                 "levels": "per_budget" if m.used == "vp_levels" else "shared"}
  xk = x[keep]
  return IsoflopFit(
      a, b, log_kN, log_kD, bud.C_K[keep], np.exp(xk),
      bud.C_K[keep] / np.exp(bud.p0_K[keep] + bud.p1_K[keep] * xk), m.L_star_K[keep],
      tuple(_profile(m, k) for k in np.flatnonzero(keep)), m.dropped, m.used,
      diagnostics, m.messages + grid_warnings, exponents, m.asked, m.lack_of_fit)
