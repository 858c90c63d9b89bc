"""Where each budget's minimum is: the method asked for, checked against the data.

"Inside" is read from the data: a budget enters the power-law fit when its lowest measured
loss is at an interior size (`isoflop_local.Local.edge_RxK` = 0), whatever a fitted curve
says, or when a fit that passed the lack-of-fit check puts its minimum inside the sizes; any
other budget is dropped with advice to add smaller (larger) models when its lowest loss is
at its smallest (largest) size, the side where the data put the minimum. A method whose minimum
for a kept budget falls outside its sizes (a curve that does not describe that budget) gets
the local estimate for that budget, with a warning naming it.

The method ("auto" by default):
* "local": `isoflop_local`, each budget's minimum from the runs near it;
* "vp", "vp_levels", "parabola": that fit, checked for lack of fit (`lack_of_fit`): when its
  residuals are more than lack_of_fit.RATIO times the noise local fits measure, a warning
  names the likely cause and the local estimate is used instead;
* "auto": "vp" when it fits (it pools the profile's shape over budgets, so three sizes per
  budget suffice and its minima are the most precise), else "local".
Where no local window has more than three sizes nothing measures the noise: the method's
estimate is used unchecked, and a note says so.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from chinchax.scaling import isoflop, isoflop_local, lack_of_fit
from chinchax.errors import UserError
from chinchax.scaling.runs import Runs, budget_groups

NAMES = {"vp": "the joint profile fit (vp)", "vp_levels": "the joint profile fit (vp_levels)",
         "parabola": "the parabola per budget"}


@dataclasses.dataclass(frozen=True, eq=False)
class Minima:
  bud: isoflop.Budgets
  y_n: np.ndarray
  loc: isoflop_local.Local  # one row: the data's losses
  asked: str
  used: str  # the method whose minima are read ("local" after a fallback)
  est: isoflop.Estimate  # of `used`
  log_N_star_K: np.ndarray  # `used`'s minima, the local ones where it had none inside
  L_star_K: np.ndarray
  keep_K: np.ndarray  # the data's lowest loss is at an interior size
  local_K: np.ndarray  # the minimum read is the local estimate's
  lack_of_fit: dict | None  # of the method asked (None for "local")
  dropped: tuple[str, ...]
  messages: tuple[str, ...]  # every warning, the dropped budgets' first


def combine(bud: isoflop.Budgets, est: isoflop.Estimate, loc: isoflop_local.Local):
  """(log N*, L*, keep, local) per row and budget: est's minima, loc's where est has none
  strictly inside the sizes; keep where the data's lowest loss is interior or est's minimum
  is inside the sizes (a fit that passed the lack-of-fit check can place a minimum between
  the lowest-loss size at an end and its neighbour)."""
  data_in = loc.edge_RxK == 0
  method_in = isoflop.inside(bud, est)
  keep = data_in | method_in
  use_local = data_in & ~method_in
  x = np.where(use_local, loc.log_N_star_RxK, est.log_N_star_RxK)
  L = np.where(use_local, loc.L_star_RxK, est.L_star_RxK)
  return x, L, keep, use_local


def local_estimate(bud: isoflop.Budgets, Y_Rxn: np.ndarray, loc=None) -> isoflop.Estimate:
  loc = loc if loc is not None else isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K),
                                                      Y_Rxn)
  return isoflop.Estimate(loc.log_N_star_RxK, loc.L_star_RxK, loc.edge_RxK == 0, None,
                          loc.coef_RxKx3)


def estimate(bud: isoflop.Budgets, Y_Rxn: np.ndarray, method: str):
  """(Estimate of `method`, Local) for each row of losses; method "local" or a fit's."""
  loc = isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K), Y_Rxn)
  if method == "local":
    return local_estimate(bud, Y_Rxn, loc), loc
  return isoflop.estimate(bud, Y_Rxn, method), loc


def fitted(bud: isoflop.Budgets, est: isoflop.Estimate) -> np.ndarray:
  """(n,) the method's fitted loss at every run of the screened budgets (first row)."""
  if est.vp is not None:
    return est.vp.fitted_Rxn[0]
  P = est.parabola_RxKx3[0]
  return np.polyval(P[bud.budget_n].T, bud.log_N_n) if len(P) else np.zeros(0)


def _edge_line(bud: isoflop.Budgets, runs: Runs, k: int, edge: int) -> str:
  sel = bud.idx_n[bud.budget_n == k]
  j = sel[np.argmin(runs.N[sel])] if edge < 0 else sel[np.argmax(runs.N[sel])]
  side, add = ("smallest", "smaller") if edge < 0 else ("largest", "larger")
  return (f"budget C={bud.C_K[k]:.3g} dropped: its lowest loss is at its {side} size "
          f"N={runs.N[j]:.3g}, so its minimum is not inside the sampled sizes "
          f"[{np.exp(bud.x_lo_K[k]):.3g}, {np.exp(bud.x_hi_K[k]):.3g}]; add {add} models")


def read(runs: Runs, method: str = "auto") -> Minima:
  """Every budget's minimum by `method`, as the module docstring says."""
  if method not in isoflop.METHODS:
    raise UserError(f"Approach 2: unknown method {method!r}; use one of "
                    f"{', '.join(isoflop.METHODS)}")
  groups = budget_groups(runs)
  bud, dropped = isoflop.screen(runs, groups, runs.loss)
  if len(bud.C_K) < 2:
    raise isoflop.too_few(len(bud.C_K), len(groups), dropped)
  y = runs.loss[bud.idx_n]
  loc, sigma = lack_of_fit.noise(bud, y)
  edge = loc.edge_RxK[0]
  messages, record, used = [], None, method
  est = local_estimate(bud, y[None], loc)
  if method != "local":
    fit_method = "vp" if method == "auto" else method
    est_m = isoflop.estimate(bud, y[None], fit_method)
    has_fit = est_m.vp is None or bool(est_m.vp.ok_R[0])
    in_window = np.isfinite(loc.fitted_Rxn[0])
    if has_fit:
      record = lack_of_fit.check(y - fitted(bud, est_m), sigma, N_n=runs.N[bud.idx_n],
                                 D_n=runs.D[bud.idx_n], in_window_n=in_window, loss_n=y)
    if has_fit and record["fits"] is not False:
      est, used = est_m, fit_method
      if record["fits"] is None:  # said in law.json, not warned: nothing found wrong
        record["cause"] = ("not checked: no budget has more than 3 sizes near its minimum to "
                           "measure the noise by")
    elif has_fit:
      messages.append(lack_of_fit.message(record, NAMES[fit_method])
                      + "; the local estimate (each budget's minimum from the runs near it) "
                      "is used instead")
      used = "local"
    else:
      messages.append(f"{NAMES[fit_method]} has no minimum in every budget; the local "
                      "estimate (each budget's minimum from the runs near it) is used instead")
      used = "local"
  x, L, keep, use_local = (v[0] for v in combine(bud, est, loc))
  dropped += [_edge_line(bud, runs, k, edge[k]) for k in np.flatnonzero(~keep)]
  if keep.sum() < 2:
    raise isoflop.too_few(int(keep.sum()), len(groups), dropped)
  if used != "local":
    for k in np.flatnonzero(use_local):
      messages.append(
          f"budget C={bud.C_K[k]:.3g}: {NAMES[used]} puts its minimum outside the sampled "
          f"sizes [{np.exp(bud.x_lo_K[k]):.3g}, {np.exp(bud.x_hi_K[k]):.3g}] while its "
          f"lowest loss is at an interior size: the curve does not describe this budget; "
          f"its local estimate N={np.exp(x[k]):.3g} is used")
  return Minima(bud, y, loc, method, used, est, x, L, keep, use_local, record,
                tuple(dropped), tuple(dropped) + tuple(messages))
