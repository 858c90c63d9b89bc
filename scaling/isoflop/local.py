"""Approach 2's local estimator: each budget's minimum placed by the runs near it.

Per budget (sizes sorted, repeated sizes averaged), the lowest measured loss picks the size
N_j. Where it is the smallest or the largest size, the data put the minimum outside the
sizes (`edge_RxK`, −1 or +1) and the budget gives no estimate. Otherwise the window is every
size within a factor WINDOW of N_j, and at least its neighbours on each side; a parabola in
log N is fitted to the window by least squares with rejection: from a start that leaves out
the window's worst size, a run further than REJECT = 6 noise scales off the parabola is left
out, and the fit repeated, so a diverged run in the window is out instead of moving the
minimum. Only gross outliers are rejected: a smooth downweighting (Tukey's biweight) also
downweights the parabola's own misfit at a window's ends, by an amount that changes with the
budget's curvature, and biased a by up to 0.007 on coarse grids of asymmetric profiles
drawn from the law itself. The scale is the least-squares window fits' studentised MAD,
pooled over budgets, and held (re-estimated from the refits, it collapses onto the few runs
a parabola interpolates). N* is the parabola's vertex, kept inside the window
(a window whose fit has no minimum gives N_j itself, and `convex_RxK` False: the losses
around the lowest do not curve up, so the data do not locate a minimum there).

Why local: the minimum of a profile is a property of the runs near it; runs far from it
(badly undertrained models, tiny ones) say little about where it is and, in a joint fit of
a profile family that does not quite describe them, decide where the family puts it (a law
with a term that only matters at D/N < 1 moved vp's a from 0.452 to 0.538, Hoffmann et al.'s
exponents). A parabola over a window a factor WINDOW wide is biased by the profile's
asymmetry only to third order in the window's width.

The scale: the window fits' residuals pooled over budgets, sigma² = Σ w·r² / Σ_k max(Σ_k w
− 3, 0) over the budgets with an estimate, w the final weights (a rejected run counts for
nothing, and a window that keeps 3 runs or fewer adds no degree of freedom).
That is `sigma_R`, the noise that local fits measure (the lack-of-fit check's yardstick and
the local bootstrap's noise), with `dof_R` degrees of freedom; NaN when no window keeps more
than 3 runs. Every array is batched over R loss vectors of one design.

Approach 2's resampling core lives here too, since the local fits are its noise model: any
estimator's minima on many loss vectors of one design (`estimate`, `draws`), read as the data
are (`combine`), and the noise the local fits measure (`local_noise`); shared by the point
fit's agreement check (`isoflop_minima`) and the bootstrap (`isoflop_bootstrap`)."""

import dataclasses
import warnings

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.isoflop import budgets
from chinchax.scaling.numerics import forks


WINDOW = 4.0  # sizes within this factor of the lowest-loss size fit its parabola
REJECT = 6.0  # a run further than this many noise scales off its window's parabola is out
ITERATIONS = 8


@dataclasses.dataclass(frozen=True, eq=False)
class Local:
  log_N_star_RxK: np.ndarray
  L_star_RxK: np.ndarray
  edge_RxK: np.ndarray  # −1: lowest loss at the smallest size, +1 at the largest, 0 inside
  convex_RxK: np.ndarray  # the window's parabola has a minimum (the losses curve up)
  fitted_Rxn: np.ndarray  # the window parabolas at their runs; NaN outside the windows
  weight_Rxn: np.ndarray  # 1 for a run its window's fit kept, 0 rejected or outside
  sigma_R: np.ndarray
  dof_R: np.ndarray
  coef_RxKx3: np.ndarray  # the window parabolas, p0·x² + p1·x + p2 in x = log N
  window_RxKx2: np.ndarray  # each window's log N range


def _window(x_u: np.ndarray, j_R: np.ndarray) -> np.ndarray:
  """(R, u): the sizes within WINDOW of size j_R, and its neighbours on each side."""
  u = len(x_u)
  near = np.abs(x_u[None] - x_u[j_R][:, None]) <= np.log(WINDOW) * (1 + 1e-9)
  pos = np.arange(u)[None] - j_R[:, None]
  return near | (np.abs(pos) <= 1)


def _wls(x_u, y_Rxu, w_Rxu):
  """(R, 3) weighted least-squares parabola coefficients [p0, p1, p2] in x."""
  V = np.stack([x_u**2, x_u, np.ones_like(x_u)], axis=1)  # (u, 3)
  VtWV = np.einsum("ui,ru,uj->rij", V, w_Rxu, V) + 1e-12 * np.eye(3)
  VtWy = np.einsum("ui,ru->ri", V, w_Rxu * y_Rxu)
  with np.errstate(all="ignore"):
    return np.linalg.solve(VtWV, VtWy[..., None])[..., 0]


def _robust_start(x_u, y_Rxu, win_Rxu) -> np.ndarray:
  """(R, u) start weights: the window less the one size whose omission leaves the parabola
  the smallest residual (least trimmed squares, one out), where 4 or more sizes remain; a
  diverged run in the window would otherwise drag the least-squares start so far that every
  run is rejected. Windows of 3 or 4 sizes start from least squares."""
  best_w = win_Rxu.astype(np.float64)
  best = np.full(len(y_Rxu), np.inf)
  for d in range(len(x_u)):
    w = win_Rxu & (np.arange(len(x_u)) != d)[None]
    ok = win_Rxu[:, d] & (w.sum(axis=1) >= 4)
    p = _wls(x_u, y_Rxu, w.astype(np.float64))
    r = y_Rxu - (p[:, :1] * x_u**2 + p[:, 1:2] * x_u + p[:, 2:])
    rss = np.where(ok, np.sum(np.where(w, r * r, 0), axis=1), np.inf)
    better = rss < best
    best_w[better], best[better] = w[better], rss[better]
  return best_w


def _scale(windows) -> np.ndarray:
  """(R,) the noise scale the rejection holds: the MAD of the least-squares window fits'
  studentised residuals r/sqrt(1 − h), pooled over budgets. Not the start's (it left out
  each window's worst run, so its residuals understate the noise) and not re-estimated (the
  reweighted fits interpolate their few runs, and a scale from them collapses)."""
  z = []
  for x_u, y_Rxu, win in windows:
    w = win.astype(np.float64)
    V = np.stack([x_u**2, x_u, np.ones_like(x_u)], axis=1)
    VtWV = np.einsum("ui,ru,uj->rij", V, w, V) + 1e-12 * np.eye(3)
    with np.errstate(all="ignore"):
      h = np.einsum("ui,rij,uj->ru", V, np.linalg.inv(VtWV), V)
      p = _wls(x_u, y_Rxu, w)
      r = y_Rxu - (p[:, :1] * x_u**2 + p[:, 1:2] * x_u + p[:, 2:])
      z.append(np.where(win & (h < 1 - 1e-9), np.abs(r) / np.sqrt(np.abs(1 - h)), np.nan))
  with np.errstate(all="ignore"), warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # no window with a residual: NaN
    return 1.4826 * np.nanmedian(np.concatenate(z, axis=1), axis=1)


def _budget_arrays(log_N_k: np.ndarray):
  """Sorted distinct sizes of a budget and the (u, n_k) averaging matrix onto them."""
  x_u, inv = np.unique(log_N_k, return_inverse=True)
  M = (inv[None] == np.arange(len(x_u))[:, None]).astype(np.float64)
  return x_u, M / M.sum(axis=1, keepdims=True), inv


def fit(log_N_n: np.ndarray, budget_n: np.ndarray, K: int, Y_Rxn: np.ndarray) -> Local:
  """The local estimate of every budget's minimum, for each row of losses."""
  Y_Rxn = np.atleast_2d(np.asarray(Y_Rxn, np.float64))
  R, n = Y_Rxn.shape
  per = []
  for k in range(K):
    sel = np.flatnonzero(budget_n == k)
    x_u, M_uxn, inv = _budget_arrays(log_N_n[sel])
    x0 = x_u.mean()  # centred for conditioning
    y_Rxu = Y_Rxn[:, sel] @ M_uxn.T
    j_R = np.argmin(y_Rxu, axis=1)
    edge_R = np.where(j_R == 0, -1, np.where(j_R == len(x_u) - 1, 1, 0))
    win_Rxu = _window(x_u, j_R) & (edge_R == 0)[:, None]
    per.append((sel, x_u - x0, x0, inv, y_Rxu, j_R, edge_R, win_Rxu))

  def pooled_scale(w_list, r_list, used_list):
    num = sum((w * r * r).sum(axis=1) for w, r in zip(w_list, r_list))
    # A window's parabola leaves its kept runs less 3 to measure the noise by, and none when
    # 3 or fewer are kept (a window whose runs were all rejected measures nothing).
    den = sum(np.maximum(w.sum(axis=1) - 3 * u, 0) for w, u in zip(w_list, used_list))
    with np.errstate(all="ignore"):
      return np.where(den > 0.5, np.sqrt(num / np.maximum(den, 1e-300)), np.nan), den

  w_list = [_robust_start(x_u, y_Rxu, win) for (_, x_u, _, _, y_Rxu, _, _, win) in per]
  for it in range(ITERATIONS + 1):
    coef_list, r_list = [], []
    for (sel, x_u, x0, inv, y_Rxu, j_R, edge_R, win), w in zip(per, w_list):
      p = _wls(x_u, y_Rxu, w)
      coef_list.append(p)
      r_list.append(np.where(win, y_Rxu - (p[:, :1] * x_u**2 + p[:, 1:2] * x_u + p[:, 2:]), 0))
    used = [(b[6] == 0).astype(np.float64) for b in per]
    if it == 0:
      scale = _scale([(b[1], b[4], b[7]) for b in per])
    if it == ITERATIONS:
      break
    s = np.where(np.isfinite(scale) & (scale > 0), scale, np.inf)[:, None]
    w_list = [np.where(b[7] & (np.abs(r) <= REJECT * s), 1.0, 0.0) for b, r in zip(per, r_list)]
  sigma_R, den = pooled_scale(w_list, r_list, used)

  log_N_star = np.full((R, K), np.nan)
  L_star = np.full((R, K), np.nan)
  edge = np.zeros((R, K), np.int64)
  convex = np.zeros((R, K), bool)
  fitted = np.full((R, n), np.nan)
  weight = np.zeros((R, n))
  coef = np.full((R, K, 3), np.nan)
  window = np.full((R, K, 2), np.nan)
  for k, ((sel, x_u, x0, inv, y_Rxu, j_R, edge_R, win), p, w) in enumerate(
      zip(per, coef_list, w_list)):
    lo = np.where(win, x_u, np.inf).min(axis=1)
    hi = np.where(win, x_u, -np.inf).max(axis=1)
    with np.errstate(all="ignore"):
      vertex = -p[:, 1] / (2 * p[:, 0])
    x_star = np.where(p[:, 0] > 0, np.clip(vertex, lo, hi), x_u[j_R])
    L = p[:, 0] * x_star**2 + p[:, 1] * x_star + p[:, 2]
    inside = edge_R == 0
    log_N_star[:, k] = np.where(inside, x_star + x0, np.nan)
    L_star[:, k] = np.where(inside, L, np.nan)
    edge[:, k] = edge_R
    convex[:, k] = (edge_R == 0) & (p[:, 0] > 0)
    curve = p[:, :1] * x_u**2 + p[:, 1:2] * x_u + p[:, 2:]
    fitted[:, sel] = np.where(win, curve, np.nan)[:, inv]
    weight[:, sel] = w[:, inv]
    coef[:, k] = np.stack([p[:, 0], p[:, 1] - 2 * p[:, 0] * x0,
                           p[:, 0] * x0 * x0 - p[:, 1] * x0 + p[:, 2]], axis=1)
    window[:, k] = np.stack([lo + x0, hi + x0], axis=1)
  return Local(log_N_star, L_star, edge, convex, fitted, weight, sigma_R, den, coef, window)


def combine(bud: budgets.Budgets, est: budgets.Estimate, loc: Local):
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
  loc = loc if loc is not None else fit(bud.log_N_n, bud.budget_n, len(bud.C_K),
                                                      Y_Rxn)
  return budgets.Estimate(loc.log_N_star_RxK, loc.L_star_RxK, loc.convex_RxK, None,
                          loc.coef_RxKx3)


def estimate(bud: budgets.Budgets, Y_Rxn: np.ndarray, method: str):
  """(Estimate of `method`, Local) for each row of losses; method "local" or a fit's."""
  loc = fit(bud.log_N_n, bud.budget_n, len(bud.C_K), Y_Rxn)
  if method == "local":
    return local_estimate(bud, Y_Rxn, loc), loc
  return budgets.estimate(bud, Y_Rxn, method), loc


def measures_noise(loc: Local) -> bool:
  """Whether the local fits (first row) measure the noise: some window keeps more than 3 runs."""
  return bool(np.isfinite(loc.sigma_R[0]) and round(float(loc.dof_R[0])) >= 1)


def local_noise(loc: Local, y_n: np.ndarray):
  """(mean losses, which runs get noise, sigma, dof) of the local fits (first row): the
  window parabolas at the runs they kept, the observed loss elsewhere; a rejected run keeps
  its loss (it stays an outlier, as in the data)."""
  in_window = np.isfinite(loc.fitted_Rxn[0])
  rejected = in_window & (loc.weight_Rxn[0] == 0)
  sigma, dof = float(loc.sigma_R[0]), int(round(float(loc.dof_R[0])))
  if not measures_noise(loc):
    raise UserError(
        "Approach 2's bootstrap needs the noise the local fits measure, and no budget keeps "
        "more than 3 runs near its minimum (runs far off its parabola are rejected); add "
        "sizes around the minima or repeat their runs")
  return np.where(in_window & ~rejected, loc.fitted_Rxn[0], y_n), ~rejected, sigma, dof


def draws(bud: budgets.Budgets, model, method: str, n_resamples: int, seed: int,
          chunk: int = 500, keep=None):
  """(a, log_kN, b, log_kD) draws, (4, S), as `power_laws`, and the failed count: losses
  drawn from model = (mean, noisy, sigma, dof), sigma itself drawn (scaled inverse chi²), by
  `method` refitted; each resample keeps its own budgets (`combine`), or `keep` (K,) if
  given. The losses are drawn first, in chunks of `chunk` resamples, then the chunks are
  refitted a share per core in forked children where the process allows it
  (`numerics.forks`), else here one after the other: the same draws either way."""
  mu, noisy, sigma, dof = model
  n = len(mu)
  rng = np.random.default_rng(seed)
  Y_chunks = []
  for start in range(0, n_resamples, chunk):
    R = min(chunk, n_resamples - start)
    sigma_R = sigma * np.sqrt(dof / rng.chisquare(dof, size=R))
    Y_chunks.append(mu + noisy * sigma_R[:, None] * rng.standard_normal((R, n)))

  def refit(Y_Rxn):
    est, loc = estimate(bud, Y_Rxn, method)
    x, _, kept, _ = combine(bud, est, loc)  # the estimator's own rule
    if keep is not None:
      kept = np.broadcast_to(keep, kept.shape)
    ok = kept.sum(axis=1) >= 2
    return int(len(Y_Rxn) - ok.sum()), np.stack(budgets.power_laws(bud, x[ok], kept[ok]))

  parts = [p for share in forks.map_shares(lambda ys: [refit(Y) for Y in ys], Y_chunks)
           for p in share]
  return np.concatenate([c for _, c in parts], axis=1), sum(f for f, _ in parts)
