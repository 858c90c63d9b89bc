"""Where each budget's minimum is: the method asked for, checked against the data.

"Inside" is read from the data: a budget enters the power-law fit when its lowest measured
loss is at an interior size and the losses around it curve up (`isoflop_local.Local
.convex_RxK`), whatever a fitted curve says, or when a fit that passed the lack-of-fit
check puts its minimum inside the sizes. Any other budget is dropped, with advice to add
smaller (larger) models when its lowest loss is at its smallest (largest) size: the side
where the data put the minimum. A method whose minimum for a kept budget falls outside its
sizes (a curve that does not describe that budget) gets the local estimate for that budget,
with a warning naming it.

The method ("auto" by default):
* "local": `isoflop_local`, each budget's minimum from the runs near it;
* "vp", "vp_levels", "parabola": that fit, checked for lack of fit (`lack_of_fit`): when its
  residuals are more than fit_check.RATIO times the noise local fits measure, a warning
  names the likely cause and the local estimate is used instead;
* "auto": "local" where every budget's lowest loss is inside (and the local fits measure
  the noise). Where some budget holds its lowest loss at an end, the joint fit can still
  place that budget's minimum, so "vp" is read when it fits: by the lack-of-fit check, and
  in what matters, its a minus the local estimate's a (over the budgets whose lowest loss is
  inside) in the central AGREE_LEVEL = 99% of that difference on loss vectors drawn from
  vp's own fit and noise (both estimators on each: the null is paired, and it carries the
  local estimate's own bias on that grid); else "local". On the smoke sweep's design (5
  sizes per budget, minima near the ends) that keeps every budget where the local estimate
  drops those whose lowest loss is at an end; at 95% one of 20 noisy copies switched to the
  local estimate, whose interval of a was 0.38 wide.
Where no local window has more than three sizes nothing measures the noise: the method's
estimate is used unchecked, and its lack-of-fit record says so.

Why local wherever it can: on the synthetic truths of constant-LR runs and of a broken
power law (tests/helpers/truths.py) without diverged runs, vp's residuals are 1.1-1.4x the
noise and its a is off by 0.004-0.007, about one sd of the local estimate, so no check
rejects it: read whenever it fitted, its 90% interval held the truth in 24 and 62 of 100
sweeps, the local estimate's in 86 and 95 (bench/approach2_coverage.py --resamples=200
--diverged=0). The price in the family itself: the local estimate's sd of a is 1-2x vp's,
and on coarse grids of strongly asymmetric profiles it is biased by up to 0.007. Asked for
explicitly, a method gets the lack-of-fit check only (the user chose). When "auto" reads a
joint fit, its `notes` name the budgets whose minima come from that fit's profile shape rather
than from their runs, which no check here can confirm; the interval of a then mixes in the
local estimate's reading (`Minima.mixes_local`, `isoflop_bootstrap`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.isoflop import lack_of_fit as fit_check
from chinchax.scaling.isoflop import local as isoflop_local
from chinchax.scaling.isoflop import budgets
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs.table import Runs, budget_groups

METHODS = ("auto", "local", "vp", "vp_levels", "parabola")
AGREE_LEVEL = 0.99  # the central share of the null differences that counts as agreeing
AGREE_RESAMPLES = 200
NAMES = {"vp": "the joint profile fit (vp)", "vp_levels": "the joint profile fit (vp_levels)",
         "parabola": "the parabola per budget"}


@dataclasses.dataclass(frozen=True, eq=False)
class Minima:
  bud: budgets.Budgets
  y_n: np.ndarray
  loc: isoflop_local.Local  # one row: the data's losses
  asked: str
  used: str  # the method whose minima are read ("local" after a fallback)
  est: budgets.Estimate  # of `used`
  log_N_star_K: np.ndarray  # `used`'s minima, the local ones where it had none inside
  L_star_K: np.ndarray
  keep_K: np.ndarray  # the data's lowest loss is at an interior size
  local_K: np.ndarray  # the minimum read is the local estimate's
  lack_of_fit: dict | None  # of the method asked (None for "local")
  dropped: tuple[str, ...]
  messages: tuple[str, ...]  # every warning, the dropped budgets' first
  notes: tuple[str, ...] = ()  # what the reading rests on that no check can see

  @property
  def rests_on_shape(self) -> bool:
    """The default read a joint fit because the runs of some budget do not place its
    minimum: that minimum comes from the fit's profile shape alone."""
    return self.asked == "auto" and self.used != "local" and not self.loc.convex_RxK[0].all()

  @property
  def mixes_local(self) -> bool:
    """The interval of a minimum that rests on the shape also draws from the local estimate
    (`isoflop_bootstrap`): where the runs place 2 budgets or more and the local fits measure
    the noise."""
    return (self.rests_on_shape and self.loc.convex_RxK[0].sum() >= 2
            and isoflop_local.measures_noise(self.loc))


def fitted(bud: budgets.Budgets, est: budgets.Estimate) -> np.ndarray:
  """(n,) the method's fitted loss at every run of the screened budgets (first row)."""
  if est.vp is not None:
    return est.vp.fitted_Rxn[0]
  P = est.parabola_RxKx3[0]
  return np.polyval(P[bud.budget_n].T, bud.log_N_n) if len(P) else np.zeros(0)


def _agreement(bud, est_m, loc, y) -> dict | None:
  """Is est_m's a minus the local estimate's a (over the budgets whose lowest loss is inside)
  what it would be if the profiles were est_m's? Both estimators on AGREE_RESAMPLES loss
  vectors drawn from est_m's fit and noise: the paired differences are the null; None where
  that cannot be drawn."""
  data_in = loc.convex_RxK[0]
  vp = est_m.vp
  n, p = len(y), bud.design("vp").n_params
  if data_in.sum() < 2 or not np.isfinite(loc.sigma_R[0]) or vp is None or n <= p:
    return None
  a_m = float(budgets.power_laws(bud, est_m.log_N_star_RxK, data_in)[0][0])
  a_local = float(budgets.power_laws(bud, loc.log_N_star_RxK, data_in)[0][0])
  rng = np.random.default_rng(0)
  dof = n - p
  sigma_R = np.sqrt(vp.rss_R[0] / dof) * np.sqrt(dof / rng.chisquare(dof, AGREE_RESAMPLES))
  Y = vp.fitted_Rxn[0] + sigma_R[:, None] * rng.standard_normal((AGREE_RESAMPLES, n))
  x_m = budgets.estimate(bud, Y, "vp").log_N_star_RxK
  boot = isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K), Y)
  keep = data_in & boot.convex_RxK
  ok = keep.sum(axis=1) >= 2
  if ok.sum() < AGREE_RESAMPLES // 2:
    return None
  d_R = (budgets.power_laws(bud, x_m[ok], keep[ok])[0]
         - budgets.power_laws(bud, boot.log_N_star_RxK[ok], keep[ok])[0])
  d_R = d_R[np.isfinite(d_R)]
  lo, mid, hi = np.quantile(d_R, [(1 - AGREE_LEVEL) / 2, 0.5, (1 + AGREE_LEVEL) / 2])
  d = a_m - a_local
  return {"a": a_m, "a_local": a_local, "difference": float(d),
          "null_interval": [float(lo), float(hi)], "null_median": float(mid),
          "level": AGREE_LEVEL, "agrees": bool(lo <= d <= hi)}


def _edge_line(bud: budgets.Budgets, runs: Runs, k: int, edge: int) -> str:
  sel = bud.idx_n[bud.budget_n == k]
  if edge == 0:
    j = sel[np.argmin(runs.loss[sel])]
    return (f"budget C={fmt.num(bud.C_K[k])} dropped: its lowest loss is at the interior size "
            f"N={fmt.num(runs.N[j])}, but the losses around it do not curve up (the local "
            "parabola has no minimum): the data do not locate its minimum; add sizes around "
            "it or repeat its runs")
  j = sel[np.argmin(runs.N[sel])] if edge < 0 else sel[np.argmax(runs.N[sel])]
  side, add = ("smallest", "smaller") if edge < 0 else ("largest", "larger")
  return (f"budget C={fmt.num(bud.C_K[k])} dropped: its lowest loss is at its {side} size "
          f"N={fmt.num(runs.N[j])}, so its minimum is not inside the sampled sizes "
          f"[{fmt.num(np.exp(bud.x_lo_K[k]))}, {fmt.num(np.exp(bud.x_hi_K[k]))}]; add {add} models")


def read(runs: Runs, method: str = "auto") -> Minima:
  """Every budget's minimum by `method`, as the module docstring says."""
  if method not in METHODS:
    raise UserError(f"Approach 2: unknown method {method!r}; use one of "
                    f"{', '.join(METHODS)}")
  groups = budget_groups(runs)
  bud, dropped = budgets.screen(runs, groups, runs.loss)
  if len(bud.C_K) < 2:
    raise budgets.too_few(len(bud.C_K), len(groups), dropped)
  y = runs.loss[bud.idx_n]
  loc, sigma = fit_check.local_fits(bud, y)
  edge = loc.edge_RxK[0]
  target = method
  if method == "auto":  # vp only where it adds what local cannot: a minimum near an end
    target = "local" if np.isfinite(sigma) and loc.convex_RxK[0].all() else "vp"
  messages, record, used = [], None, target
  est = isoflop_local.local_estimate(bud, y[None], loc)
  if target != "local":
    fit_method = target
    est_m = budgets.estimate(bud, y[None], fit_method)
    has_fit = est_m.vp is None or bool(est_m.vp.ok_R[0])
    in_window = np.isfinite(loc.fitted_Rxn[0])
    if has_fit:
      record = fit_check.lack_of_fit(y - fitted(bud, est_m), sigma, N_n=runs.N[bud.idx_n],
                                 D_n=runs.D[bud.idx_n], in_window_n=in_window, loss_n=y)
    agrees = True
    if has_fit and record["fits"] and method == "auto":
      record["agreement"] = _agreement(bud, est_m, loc, y)
      agrees = (record["agreement"] or {}).get("agrees", True)
      if not agrees:
        g = record["agreement"]
        messages.append(
            f"{NAMES[fit_method]} fits the losses within the noise, but over the budgets whose "
            f"lowest loss is inside its a = {g['a']:.3f} and the local estimate's "
            f"{g['a_local']:.3f} differ by {g['difference']:+.3f}, outside the "
            f"{AGREE_LEVEL:.0%} range [{g['null_interval'][0]:+.3f}, "
            f"{g['null_interval'][1]:+.3f}] they differ by when the profiles are its own: it "
            "places the minima where the runs near them do not; the local estimate is used "
            "instead")
    if has_fit and record["fits"] is not False and agrees:
      est, used = est_m, fit_method
      if record["fits"] is None:  # said in law.json, not warned: nothing found wrong
        record["cause"] = ("not checked: no budget keeps more than 3 runs near its minimum to "
                           "measure the noise by")
    elif has_fit and record["fits"]:
      used = "local"
    elif has_fit:
      messages.append(fit_check.lack_of_fit_message(record, NAMES[fit_method])
                      + "; the local estimate (each budget's minimum from the runs near it) "
                      "is used instead")
      used = "local"
    else:
      messages.append(f"{NAMES[fit_method]} has no minimum in every budget; the local "
                      "estimate (each budget's minimum from the runs near it) is used instead")
      used = "local"
  x, L, keep, use_local = (v[0] for v in isoflop_local.combine(bud, est, loc))
  dropped += [_edge_line(bud, runs, k, edge[k]) for k in np.flatnonzero(~keep)]
  if keep.sum() < 2:
    raise budgets.too_few(int(keep.sum()), len(groups), dropped)
  if used != "local":
    for k in np.flatnonzero(use_local):
      messages.append(
          f"budget C={fmt.num(bud.C_K[k])}: {NAMES[used]} puts its minimum outside the sampled "
          f"sizes [{fmt.num(np.exp(bud.x_lo_K[k]))}, {fmt.num(np.exp(bud.x_hi_K[k]))}] while its "
          f"lowest loss is at an interior size: the curve does not describe this budget; "
          f"its local estimate N={fmt.num(np.exp(x[k]))} is used")
  m = Minima(bud, y, loc, method, used, est, x, L, keep, use_local, record, tuple(dropped),
             tuple(dropped) + tuple(messages))
  if m.rests_on_shape:
    m = dataclasses.replace(m, notes=(_rests_on_the_profile(bud, ~loc.convex_RxK[0],
                                                            NAMES[used]),))
  return m


def _rests_on_the_profile(bud: budgets.Budgets, unread_K: np.ndarray, name: str) -> str:
  """The default read a joint fit because the runs of some budgets do not place their
  minimum: those minima hold only if the fit's profile shape does (see "Why local" above),
  which no check on these runs can confirm. What the interval of a is then made of is the
  bootstrap's to say (`isoflop_bootstrap.interval_note`)."""
  Cs = ", ".join(f"{fmt.num(c)}" for c in bud.C_K[unread_K])
  which, them, come = ((f"budget C={Cs}", "its minimum", "that minimum comes")
                       if unread_K.sum() == 1 else
                       (f"budgets C={Cs}", "their minima", "those minima come"))
  return (f"read by {name}: the runs of {which} do not place {them} (the lowest loss at an "
          f"end of the sizes, or no upward curve around it), so {come} from the profile "
          "shape the fit assumes, which no check on these runs can confirm; add sizes beyond "
          "that end, or read only the budgets the runs place with --approach2-method=local")
