"""Grid diagnostics of Approach 2: where each budget's sizes sit around its optimum.

A parabola in log N is a biased reading of an IsoFLOP profile c0 + P·(N/N*)^-alpha +
Q·(N/N*)^gamma (gamma = beta under 6ND) unless the profile is symmetric (alpha = gamma) or
the sizes are centred on N* (Czech et al. 2026). Per budget:

* `n_sizes`, `width_decades` = log10(N_max/N_min) of the sampled sizes;
* `off_centre`: where the profile fit's N* sits in the sampled log N range, 0 at the
  smallest size, 1 at the largest, 0.5 centred;
* `asymmetry`: (rise(+h) − rise(−h)) / (rise(+h) + rise(−h)) of the fitted profile, h half
  the grid's log width: 0 symmetric, > 0 the loss rises faster toward larger N;
* `parabola_bias`: the parabola's N* on the fitted profile's own values at the sampled sizes,
  over the profile's N*, minus 1: the bias the grid gives the naive estimate, noise aside.
  Its sign is the direction; |parabola_bias| > BIAS_WARN makes a warning naming the budget.

`N_star_parabola` (on the data) and `N_star_profile` are both given where they exist. A
profile exponent at the end of its search range is warned about too: the sizes do not pin
the profile's shape down. Both readings take the profile fit as the truth of the profile's
shape, so neither is warned about when it fails the lack-of-fit check (`vp_fits` False):
then it is no reference for the parabola's bias.
"""

import numpy as np

from chinchax.scaling.isoflop import vp as isoflop_vp
from chinchax.scaling.numerics import fmt

BIAS_WARN = 0.05


def asymmetry(alpha: float, gamma: float, h: float) -> float:
  """Asymmetry of t -> P e^{-alpha t} + Q e^{gamma t} (alpha P = gamma Q) at offsets ±h."""
  rise = lambda t: np.expm1(-alpha * t) / alpha + np.expm1(gamma * t) / gamma
  up, down = rise(h), rise(-h)
  return float((up - down) / (up + down))


def _parabola_x(x_n: np.ndarray, y_n: np.ndarray) -> float:
  p = np.polyfit(x_n, y_n, 2)
  return float(-p[1] / (2 * p[0])) if p[0] > 0 else float("nan")


def diagnose(bud, y_n: np.ndarray, est, method: str, vp_fits: bool = True
             ) -> tuple[list[dict], tuple[str, ...]]:
  """Per-budget diagnostics of `Budgets` bud and its `Estimate` est, and their warnings."""
  vp = est.vp
  if vp is None:  # the parabola ran: fit the profile too, to have something to compare with
    vp = isoflop_vp.fit(bud.design("vp"), y_n[None])
  has_vp = bool(vp.ok_R[0])
  out, warnings = [], []
  if has_vp and vp_fits:
    for name, v in (("alpha", vp.alpha_R[0]), ("beta", vp.beta_R[0])):
      if not np.exp(isoflop_vp.LOG_BOUNDS[0]) * 1.01 < v < np.exp(isoflop_vp.LOG_BOUNDS[1]) / 1.01:
        warnings.append(f"the profile fit's {name}={v:.3g} sits at the end of its search range: "
                        "these sizes do not determine the profile's shape; sample wider grids")
  for k, C in enumerate(bud.C_K):
    sel = bud.budget_n == k
    x_n = bud.log_N_n[sel]
    lo, hi = bud.x_lo_K[k], bud.x_hi_K[k]
    x_parabola = _parabola_x(x_n, y_n[sel])
    row = {"C": float(C), "n_sizes": int(bud.n_sizes_K[k]),
           "width_decades": float((hi - lo) / np.log(10)),
           "N_star_parabola": float(np.exp(x_parabola)) if np.isfinite(x_parabola) else None,
           "N_star_profile": None, "off_centre": None, "asymmetry": None,
           "parabola_bias": None}
    x_ref = x_parabola
    if has_vp:
      x_ref = float(vp.log_N_star_RxK[0, k])
      alpha, gamma = float(vp.alpha_R[0]), float(vp.gamma_RxK[0, k])
      x_naive = _parabola_x(x_n, vp.fitted_Rxn[0, sel])
      row.update(N_star_profile=float(np.exp(x_ref)),
                 asymmetry=asymmetry(alpha, gamma, (hi - lo) / 2),
                 parabola_bias=float(np.expm1(x_naive - x_ref)))
    if np.isfinite(x_ref):
      row["off_centre"] = float((x_ref - lo) / (hi - lo))
    out.append(row)
    bias = row["parabola_bias"]
    if bias is not None and abs(bias) > BIAS_WARN and vp_fits:
      tail = {"parabola": "; this fit used the parabola: method 'vp' removes that bias",
              "local": "; the local estimate used here reads a narrower window around each "
                       "minimum"}.get(method, "; the profile fit used here does not have it")
      warnings.append(
          f"budget C={fmt.num(C)}: its {row['n_sizes']} sizes "
          f"[{fmt.num(np.exp(lo))}, {fmt.num(np.exp(hi))}] "
          f"put the optimum at {row['off_centre']:.2f} of their log range and the profile is "
          f"asymmetric (alpha={fmt.num(alpha)}, gamma={fmt.num(gamma)}, asymmetry "
          f"{row['asymmetry']:+.2f}): a parabola in log N places N* "
          f"{'high' if bias > 0 else 'low'} by {abs(bias):.1%}{tail}")
  return out, tuple(warnings)
