"""The data-constrained law fitted in two stages, both inside one bootstrap.

Stage 1 (scaling.constrained.base): the base law E + A/N^alpha + B/D^beta by Approach 3 on the runs
that neither repeat data nor exceed the compute-optimal size for their unique tokens, or a
base law fitted elsewhere (`chinchax fit --base-law=law.json`). Stage 2 (scaling.constrained.fit):
R_D*, R_N* with that base law held. Fitting all seven numbers jointly lets the base law bend
to absorb the repeated runs and drives a weakly identified constant to the optimizer's bound
(on a published 182-run study, R_N* = 1e4, the bound, read as an estimate).

The bootstrap resamples the runs (pairs) and, per resample, refits stage 1 on the resampled
base runs (batched, scaling.constrained.base.refit) or draws the given base law's own bootstrap row,
then stage 2 from its grid of starts and the full fit's constants. A constant the runs cannot
tell from ∞ or 0 is stated as a one-sided interval, never a number (scaling.constrained.bounds).
R_D* and R_N* are only meaningful with the base law they were fitted under: law.json's block
names it (`base_source`, `base`) and says so (`depends_on_base`).
"""

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.constrained import law as dc
from chinchax.scaling.constrained import base as dc_base
from chinchax.scaling.constrained import bounds as dc_bounds
from chinchax.scaling.constrained import fit as dc_fit
from chinchax.scaling.numerics import fmt
from chinchax.scaling.numerics import optimum as opt

POORLY_PINNED = 10.0  # an interval wider than this ratio pins its constant poorly
NAMES = ("R_D_star", "R_N_star")


def _caveat(label, point, pair, text, level, who) -> str | None:
  """The warning a constant's interval deserves, or None: open, or wider than 10x."""
  lo, hi = pair
  if point is None:
    return (f"data-constrained: {label} {text}: these runs cannot tell it from "
            f"{'no decay' if hi is None else 'worthless repeats'}; it is identified only by "
            f"{who}")
  if lo is None or hi is None:
    return (f"data-constrained: {label} {text}: its {fmt.percent(level)} interval is open; "
            f"it is identified only by {who}")
  if hi <= POORLY_PINNED * lo:
    return None
  return (f"data-constrained: {label} = {fmt.num(point)} is poorly pinned: its "
          f"{fmt.percent(level)} interval {fmt.interval(pair)} spans more than "
          f"{POORLY_PINNED:g}x; it is identified only by {who}")


def _resample_R(N, D, U, loss, counts_Rxn, thetas_Rx5, box, free_N, R0, delta):
  out = np.full((len(counts_Rxn), 2), np.nan)
  for r, (counts, theta) in enumerate(zip(counts_Rxn, thetas_Rx5)):
    if not np.all(np.isfinite(theta)) or np.any(theta[1:] <= 0):
      continue
    rows = np.repeat(np.arange(len(N)), counts.astype(np.int64))
    x, y = dc_fit.excess_ratios(N[rows], D[rows], U[rows], theta)
    if not np.any(x > 0):
      continue  # no repeated run drawn: R_D* has nothing to fit
    touched = (x > 0) | (y > 0)  # the other runs add a constant to the objective
    rows = rows[touched]
    out[r, 0], out[r, 1], _ = dc_fit.fit_R(
        N[rows], D[rows], U[rows], loss[rows], theta, box, free_N=free_N, R_N=R0[1],
        start=R0, delta=delta, tol=1e-9)
  return out


def fit(N, D, U, loss, *, base=None, base_samples=None, base_source: str = "",
        n_resamples: int = 0, seed: int = 0, level: float = 0.9, delta: float = 1e-3) -> dict:
  """law.json's `data_constrained` block (scaling.law.schema), with its own warnings.

  base: [E, A, B, alpha, beta] held in stage 2, or None to fit it in stage 1;
  base_samples: that law's bootstrap rows (n, 5), drawn one per resample (None: held fixed).
  """
  N, D, U, loss = (np.asarray(x, np.float64) for x in (N, D, U, loss))
  U = np.nan_to_num(U, nan=np.inf)
  repeated = int(np.sum(D > U))
  if not repeated:
    raise UserError("data-constrained fit: no run repeats data (D > U); R_D* cannot be "
                    "fitted without runs whose unique pool is smaller than their tokens")
  fit3 = None
  if base is None:
    fit3, base_mask = dc_base.fit_base(N, D, U, loss, delta)
    theta = np.array([fit3.E, fit3.A, fit3.B, fit3.alpha, fit3.beta])
    source = (f"stage 1: Approach 3 on the {int(base_mask.sum())} runs that neither repeat "
              "data nor exceed the compute-optimal size for their unique tokens")
  else:
    theta = np.asarray(base, np.float64)
    base_mask = dc_base.is_base(N, D, U, theta)
    source = f"given: {base_source or 'a base law'}"
  box, ranges = dc_fit.search_box(N, D, U, theta)
  excess = int(np.sum(dc_fit.excess_ratios(N, D, U, theta)[1] > 0))
  free_N = excess > 0
  R_D, R_N, F = dc_fit.fit_R(N, D, U, loss, theta, box, free_N=free_N, delta=delta)
  who = {"R_D_star": f"runs that repeat data (D > U; {repeated} here)",
         "R_N_star": "runs larger than compute-optimal for their unique tokens "
                     f"(N > N*(min(D, U)); {excess} here)"}
  warnings = []
  if not free_N:
    warnings.append("data-constrained: R_N* is not identified by these runs (none is larger "
                    "than compute-optimal for its unique tokens, N > N*(min(D, U))): the "
                    f"published {fmt.num(dc.R_N_STAR)} (Muennighoff et al. 2023) is used")
  draws, boot = np.empty((0, 2)), None
  if n_resamples:
    rng = np.random.default_rng(seed)
    counts_Rxn = rng.multinomial(len(N), np.full(len(N), 1 / len(N)),
                                 size=n_resamples).astype(np.float64)
    if fit3 is not None:
      thetas = dc_base.refit(N[base_mask], D[base_mask], loss[base_mask],
                             counts_Rxn[:, base_mask], fit3, delta)
    elif base_samples is not None and len(base_samples):
      thetas = np.asarray(base_samples, np.float64)[np.arange(n_resamples) % len(base_samples)]
    else:
      thetas = np.repeat(theta[None], n_resamples, axis=0)
    raw = _resample_R(N, D, U, loss, counts_Rxn, thetas, box, free_N, (R_D, R_N), delta)
    ok = np.all(np.isfinite(raw), axis=1)
    draws = raw[ok]
    boot = {"kind": "pairs, both stages" if fit3 is not None else "pairs, base law "
            + ("drawn from its bootstrap" if base_samples is not None else "held"),
            "n_resamples": int(n_resamples), "dropped": int((~ok).sum()), "seed": int(seed)}
  values, ci, statements = {}, {"level": float(level)}, {}
  for i, name in enumerate(NAMES):
    if name == "R_N_star" and not free_N:
      values[name], ci[name] = dc.R_N_STAR, None
      statements[name] = f"R_N* = {fmt.num(dc.R_N_STAR)} (published, not fitted)"
      continue
    point, pair, text = dc_bounds.interval((R_D, R_N)[i], draws[:, i], *ranges[i], level)
    values[name] = point
    ci[name] = pair if len(draws) else None
    label = name.replace("_star", "*")
    statements[name] = f"{label} {text}"
    w = _caveat(label, point, pair, text, level, who[name]) if len(draws) or (
        point is None) else None
    warnings += [w] if w else []
  if not n_resamples:
    warnings.append("data-constrained: no bootstrap (--bootstrap=0), so R_D* and R_N* have "
                    "no intervals")
  return {
      "R_D_star": values["R_D_star"],
      "R_N_star": values["R_N_star"],
      "ci": ci if n_resamples else None,
      "statements": statements,
      "open_range": {name: [float(v) for v in ranges[i]] for i, name in enumerate(NAMES)},
      "fixed": [] if free_N else ["R_N_star"],
      "base": {k: float(v) for k, v in zip(opt.PARAM_NAMES, theta)},
      "base_source": source,
      "base_runs": int(base_mask.sum()),
      "depends_on_base": ("R_D* and R_N* were fitted with this base law held and hold only "
                          "with it: a plan must use this base law, not another law's E, A, B, "
                          "alpha, beta"),
      "points": int(len(N)),
      "repeated": repeated,
      "excess_params": excess,
      "objective": F,
      "bootstrap": boot,
      "warnings": warnings,
  }
