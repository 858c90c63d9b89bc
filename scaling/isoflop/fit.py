"""Approach 2 of Hoffmann et al. (2022, §3.2): IsoFLOP profiles.

For each budget (a group of runs of about equal C, `runs.budget_groups`) find the size N*
that minimises the loss along the budget, then, by least squares in log space over the
budgets,

    log N*(C) = log k_N + a·log C,      log D*(C) = log k_D + b·log C.

Methods for N* (`METHODS`), each budget's minimum read as `scaling.isoflop.minima` says:

* "auto" (default): "local" where every budget's lowest loss is inside; else "vp" when it
  fits the runs (the lack-of-fit check, ``lack_of_fit``, and agreement with the local
  estimate), else "local".
* "local": each budget's minimum from the runs near its lowest loss, a robust parabola in
  log N over the sizes within a factor 4 of it (`scaling.isoflop.local`).
* "vp", "vp_levels": every budget's profile as the law implies it,
  c0 + cN·N^-alpha + cD_k·D^-beta, all budgets fitted jointly (`scaling.isoflop.vp`).
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

The bootstrap is in `scaling.isoflop.bootstrap` (`bootstrap_isoflop`), the grid
diagnostics in `scaling.isoflop.diagnostics`.
"""

import dataclasses
import warnings

import numpy as np

from chinchax.scaling.isoflop import diagnostics as isoflop_diagnostics
from chinchax.scaling.isoflop import minima as isoflop_minima
# The shared machinery, here under the names its callers have always used.
from chinchax.scaling.isoflop.budgets import (  # pylint: disable=unused-import
    MIN_SIZES, Budgets, Estimate, budget_C, estimate, inside, parabolas, power_laws, screen,
    too_few)
from chinchax.scaling.runs.table import Runs
from chinchax.scaling.numerics import power

METHODS = isoflop_minima.METHODS
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
  lack_of_fit: dict | None = None  # of the method asked (`lack_of_fit`)
  notes: tuple[str, ...] = ()  # what the reading rests on (isoflop_minima.Minima.notes)

  def N_star(self, C):
    return power.at(C, self.a, self.log_kN)

  def D_star(self, C):
    return power.at(C, self.b, self.log_kD)

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
        "notes": list(self.notes),
    }


def profile_loss(profile: dict, N) -> np.ndarray:
  """Loss on a profile dict of `IsoflopFit.profiles` (its "form" says which curve)."""
  x = np.log(np.asarray(N, np.float64))
  if profile["form"] == PARABOLA_FORM:
    return np.polyval(profile["p"], x)
  t = x - np.log(profile["N_star"])  # PROFILE_FORM
  return profile["L0"] + profile["P"] * np.exp(-profile["alpha"] * t) + profile["Q"] * np.exp(
      profile["gamma"] * t)


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
      diagnostics, m.messages + grid_warnings, exponents, m.asked, m.lack_of_fit, m.notes)
