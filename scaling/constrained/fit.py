"""Stage 2 of the data-constrained fit: R_D* and R_N* with the base law held.

The law (scaling.constrained.law) replaces D and N in L = E + A/N^alpha + B/D^beta by their
effective values D' and N', with two decay constants R_D* (repeated tokens) and R_N* (excess
parameters). Muennighoff et al. (2023) fit it in two stages: the base law (E, A, B, alpha,
beta) first, from the runs the constants do not touch (scaling.constrained.base), then R_D*, R_N* with
it held. This module is the second stage; scaling.constrained.two_stage runs both inside one bootstrap.

The objective is the summed Huber loss (delta as scaling.parametric.fit) of log L − log loss over
(log R_D*, log R_N*). Its starts: every point of a grid over the search box (scaling.constrained.bounds:
a decade beyond where the runs stop telling R from 0 or ∞), evaluated at once, and a given
start (the full fit's, for a bootstrap resample); the one with the lower objective is
polished by scipy's trust-region least squares with its Huber loss and the closed-form
Jacobian of `residuals_and_jacobian`.

R_D* is identified only by runs that repeat data (D > U), R_N* only by runs larger than
compute-optimal for their unique tokens (N > N*(min(D, U))). Without any of the latter R_N*
has no effect on the loss and is held (at the published value, by the caller).
"""

import numpy as np
# scipy is imported in the functions that use it: a fit needs none of it (0.5 s of import).

from chinchax.errors import UserError
from chinchax.scaling.constrained import law as dc
from chinchax.scaling.constrained import bounds as dc_bounds
from chinchax.scaling.numerics import optimum as opt

GRID = 13  # grid points per constant over its search box


def residuals_and_jacobian(p, N, D, U, log_loss):
  """r = log L(N, D, U; p) − log loss and dr/dp (n, 7), p = (log E, log A, log B, alpha,
  beta, log R_D*, log R_N*), in closed form (the effective sizes of scaling.constrained.law)."""
  lE, lA, lB, alpha, beta, lRD, lRN = p
  E, A, B, RD, RN = np.exp([lE, lA, lB, lRD, lRN])
  U_D = np.minimum(D, U)
  x = D / U_D - 1.0
  ex = np.exp(-x / RD)
  D_eff = U_D + U_D * RD * (1.0 - ex)
  dD_dlRD = RD * U_D * ((1.0 - ex) - (x / RD) * ex)
  # N*(U_D) = G·(G·U_D)^(beta/alpha), in logs, and its derivatives.
  g = (np.log(alpha) - np.log(beta) + lA - lB) / (alpha + beta)
  log_N_opt = ((alpha + beta) * g + beta * np.log(U_D)) / alpha
  dlogNopt = np.stack([np.zeros_like(U_D), np.full_like(U_D, 1 / alpha),
                       np.full_like(U_D, -1 / alpha),
                       -beta / alpha**2 * (g + np.log(U_D)) + (1 / alpha - g) / alpha,
                       (np.log(U_D) - 1 / beta) / alpha], axis=1)
  N_opt = np.exp(log_N_opt)
  excess = N > N_opt
  U_N = np.where(excess, N_opt, N)
  y = N / U_N - 1.0
  ey = np.exp(-y / RN)
  N_eff = U_N + U_N * RN * (1.0 - ey)
  dN_dUN = np.where(excess, 1.0 + RN * (1.0 - ey) - (N / U_N) * ey, 0.0)
  dN_dlRN = RN * U_N * ((1.0 - ey) - (y / RN) * ey)
  tN, tD = A * N_eff**-alpha, B * D_eff**-beta
  L = E + tN + tD
  dL_dN, dL_dD = -alpha * tN / N_eff, -beta * tD / D_eff
  J = np.empty((len(N), 7))
  J[:, 0] = E
  J[:, 1] = tN
  J[:, 2] = tD
  J[:, 3] = -tN * np.log(N_eff)
  J[:, 4] = -tD * np.log(D_eff)
  J[:, 5] = dL_dD * dD_dlRD
  J[:, 6] = dL_dN * dN_dlRN
  J[:, :5] += (dL_dN * dN_dUN * U_N)[:, None] * dlogNopt  # through N*(U_D)
  return np.log(L) - log_loss, J / L[:, None]


def excess_ratios(N, D, U, theta) -> tuple[np.ndarray, np.ndarray]:
  """(D/U_D − 1, N/U_N − 1) per run under the base law `theta`."""
  N, D, U = (np.asarray(x, np.float64) for x in (N, D, U))
  U_D = np.minimum(D, U)
  U_N = np.minimum(N, opt.optimal_params_for_tokens(U_D, theta))
  return D / U_D - 1.0, N / U_N - 1.0


def _huber_sum(r, delta):
  from scipy import special
  return np.sum(special.huber(delta, r), axis=-1)


def _grid_start(N, D, U, log_loss, theta, box, free_N, R_N, delta) -> np.ndarray:
  """The best (log R_D*, log R_N*) of a GRID x GRID grid over `box` (log bounds, (2, 2))."""
  E, A, B, alpha, beta = theta
  x, y = excess_ratios(N, D, U, theta)
  U_D, U_N = D / (1.0 + x), N / (1.0 + y)
  t_D = np.linspace(*box[0], GRID)
  t_N = np.linspace(*box[1], GRID) if free_N else np.array([np.log(R_N)])
  R_d, R_n = np.exp(t_D)[:, None], np.exp(t_N)[:, None]
  D_eff_Gxn = U_D + U_D * R_d * -np.expm1(-x / R_d)
  N_eff_Hxn = U_N + U_N * R_n * -np.expm1(-y / R_n)
  L_GxHxn = E + (A * N_eff_Hxn**-alpha)[None] + (B * D_eff_Gxn**-beta)[:, None]
  F_GxH = _huber_sum(np.log(L_GxHxn) - log_loss, delta)
  i, j = np.unravel_index(np.argmin(F_GxH), F_GxH.shape)
  return np.array([t_D[i], t_N[j]])


def _polish(t0, free, p_base, data, box, delta, tol) -> tuple[np.ndarray, float]:
  """Least squares over log R_D* (and log R_N* when `free` has both) from t0."""
  from scipy import optimize, special
  lo, hi = box[free, 0], box[free, 1]
  p0 = np.r_[p_base, t0]

  def full(z):
    p = p0.copy()
    p[5 + free] = z
    return p

  cache = {}

  def both(z):  # trf asks for r and J at the same z: compute them once
    key = z.tobytes()
    if key not in cache:
      cache.clear()
      cache[key] = residuals_and_jacobian(full(z), *data)
    return cache[key]

  z0 = np.clip(t0[free], lo + 1e-9, hi - 1e-9)
  with np.errstate(all="ignore"):
    res = optimize.least_squares(
        lambda z: both(z)[0], z0, jac=lambda z: both(z)[1][:, 5 + free], bounds=(lo, hi),
        loss="huber", f_scale=delta, method="trf", x_scale="jac", ftol=tol, xtol=tol,
        gtol=tol, max_nfev=200)
  t = t0.copy()
  t[free] = res.x
  return t, float(np.sum(special.huber(delta, res.fun)))


def fit_R(N, D, U, loss, theta, box, *, free_N: bool, R_N: float = dc.R_N_STAR,
          start=None, delta: float = 1e-3, tol: float = 1e-12) -> tuple[float, float, float]:
  """(R_D*, R_N*, objective) with the base law `theta` held; R_N* held at `R_N` unless
  `free_N`. box: the search bounds in log R, rows R_D*, R_N* (scaling.constrained.bounds)."""
  N, D, U, loss = (np.asarray(x, np.float64) for x in (N, D, U, loss))
  theta = np.asarray(theta, np.float64)
  box = np.asarray(box, np.float64)
  data = (N, D, U, np.log(loss))
  p_base = np.array([np.log(theta[0]), np.log(theta[1]), np.log(theta[2]), theta[3],
                     theta[4]])
  free = np.array([0, 1]) if free_N else np.array([0])
  starts = [_grid_start(*data, theta, box, free_N, R_N, delta)]
  if start is not None:
    starts.append(np.log(np.clip(np.asarray(start, np.float64), 1e-300, None)))
  if not free_N:
    for s in starts:
      s[1] = np.log(R_N)
  # Polish the start the objective prefers: from the grid's best and the full fit's, a
  # second polish changed no resample's result in the tests' designs and doubled the time.
  lo, hi = box[:, 0], box[:, 1]
  F0 = [_huber_sum(residuals_and_jacobian(np.r_[p_base, np.clip(t, lo, hi)], *data)[0], delta)
        for t in starts]
  best = _polish(starts[int(np.argmin(F0))], free, p_base, data, box, delta, tol)
  return float(np.exp(best[0][0])), float(np.exp(best[0][1])), best[1]


def search_box(N, D, U, theta) -> tuple[np.ndarray, np.ndarray]:
  """(box in log R (2, 2), open ranges (2, 2)): rows R_D*, R_N*, from the runs' ratios."""
  x, y = excess_ratios(N, D, U, theta)
  ranges = np.array([dc_bounds.open_range(x[x > 0]), dc_bounds.open_range(y[y > 0])])
  box = np.array([dc_bounds.search_bounds(*r) for r in ranges])
  return box, ranges


def fit_data_constrained(N, D, U, loss, theta, delta: float = 1e-3) -> dict[str, float]:
  """R_D*, R_N* for runs (N, D, U, loss) under the fixed base law `theta` (E, A, B, alpha, beta).

  Returns R_D_star, R_N_star and the objective at the fit (scaling.constrained.two_stage also fits the
  base law and gives bootstrap intervals).
  """
  N, D, U, loss = (np.asarray(x, np.float64) for x in (N, D, U, loss))
  if not (N.shape == D.shape == U.shape == loss.shape) or N.ndim != 1:
    raise UserError("fit_data_constrained: N, D, U and loss must be 1-D and of one length")
  for name, x in (("N", N), ("D", D), ("U", U), ("loss", loss)):
    if not np.all(np.isfinite(x) & (x > 0)):
      raise UserError(f"fit_data_constrained: {name} must be finite and positive")
  if not np.any(D > U):
    raise UserError("data-constrained fit: no run repeats data (D > U); R_D* cannot be "
                    "fitted without runs whose unique pool is smaller than their tokens")
  box, _ = search_box(N, D, U, theta)
  free_N = bool(np.any(excess_ratios(N, D, U, theta)[1] > 0))
  R_D, R_N, F = fit_R(N, D, U, loss, theta, box, free_N=free_N, delta=delta)
  return {"R_D_star": R_D, "R_N_star": R_N, "objective": F}
