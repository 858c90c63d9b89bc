"""Approach 2's resampling core: an estimator's minima on many loss vectors of one design,
read as the data are (`combine`), and the local fits' noise model; shared by the point fit's
agreement check (`isoflop_minima`) and the bootstrap (`isoflop_bootstrap`)."""

import numpy as np

from chinchax.scaling import isoflop_budgets as budgets
from chinchax.scaling import isoflop_local
from chinchax.errors import UserError


def combine(bud: budgets.Budgets, est: budgets.Estimate, loc: isoflop_local.Local):
  """(log N*, L*, keep, local) per row and budget: est's minima, loc's where est has none
  strictly inside the sizes; keep where the data's lowest loss is interior or est's minimum
  is inside the sizes (a fit that passed the lack-of-fit check can place a minimum between
  the lowest-loss size at an end and its neighbour)."""
  data_in = loc.convex_RxK
  method_in = budgets.inside(bud, est)
  keep = data_in | method_in
  use_local = data_in & ~method_in
  x = np.where(use_local, loc.log_N_star_RxK, est.log_N_star_RxK)
  L = np.where(use_local, loc.L_star_RxK, est.L_star_RxK)
  return x, L, keep, use_local


def local_estimate(bud: budgets.Budgets, Y_Rxn: np.ndarray, loc=None) -> budgets.Estimate:
  loc = loc if loc is not None else isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K),
                                                      Y_Rxn)
  return budgets.Estimate(loc.log_N_star_RxK, loc.L_star_RxK, loc.convex_RxK, None,
                          loc.coef_RxKx3)


def estimate(bud: budgets.Budgets, Y_Rxn: np.ndarray, method: str):
  """(Estimate of `method`, Local) for each row of losses; method "local" or a fit's."""
  loc = isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K), Y_Rxn)
  if method == "local":
    return local_estimate(bud, Y_Rxn, loc), loc
  return budgets.estimate(bud, Y_Rxn, method), loc


def local_noise(loc: isoflop_local.Local, y_n: np.ndarray):
  """(mean losses, which runs get noise, sigma, dof) of the local fits (first row): the
  window parabolas at the runs they kept, the observed loss elsewhere; a rejected run keeps
  its loss (it stays an outlier, as in the data)."""
  in_window = np.isfinite(loc.fitted_Rxn[0])
  rejected = in_window & (loc.weight_Rxn[0] == 0)
  sigma, dof = float(loc.sigma_R[0]), int(round(float(loc.dof_R[0])))
  if not (np.isfinite(sigma) and dof >= 1):
    raise UserError(
        "Approach 2's bootstrap needs the noise the local fits measure, and no budget has "
        "more than 3 sizes near its minimum; add sizes around the minima")
  return np.where(in_window & ~rejected, loc.fitted_Rxn[0], y_n), ~rejected, sigma, dof


def draws(bud: budgets.Budgets, model, method: str, n_resamples: int, seed: int,
          chunk: int = 500, keep=None):
  """(a, log_kN, b, log_kD) draws, (4, S), as `power_laws`, and the failed count: losses
  drawn from model = (mean, noisy, sigma, dof), sigma itself drawn (scaled inverse chi²), by
  `method` refitted; each resample keeps its own budgets (`combine`), or `keep` (K,) if
  given."""
  mu, noisy, sigma, dof = model
  n = len(mu)
  rng = np.random.default_rng(seed)
  columns, n_failed = [], 0
  for start in range(0, n_resamples, chunk):
    R = min(chunk, n_resamples - start)
    sigma_R = sigma * np.sqrt(dof / rng.chisquare(dof, size=R))
    Y = mu + noisy * sigma_R[:, None] * rng.standard_normal((R, n))
    est, loc = estimate(bud, Y, method)
    x, _, kept, _ = combine(bud, est, loc)  # the estimator's own rule
    if keep is not None:
      kept = np.broadcast_to(keep, kept.shape)
    ok = kept.sum(axis=1) >= 2
    n_failed += int(R - ok.sum())
    columns.append(np.stack(budgets.power_laws(bud, x[ok], kept[ok])))
  return np.concatenate(columns, axis=1), n_failed
