"""Fitting Muennighoff et al.'s data-constrained law to runs that vary the unique pool U.

The law (scaling.data_constrained) replaces D and N in L = E + A/N^alpha + B/D^beta by their
effective values D' and N', with two decay constants R_D* (repeated tokens) and R_N* (excess
parameters). Two ways to get the base law (E, A, B, alpha, beta):

* `joint=False`: a given parametric law (`chinchax fit --base-law=`), held fixed; only R_D*
  and R_N* are fitted (the paper's second stage).
* `joint=True`: all seven numbers fitted together, from a start that is Approach 3 on the
  runs that do not repeat data and the best of a small grid of (R_D*, R_N*) for it.

The objective is the summed Huber loss (delta as scaling.parametric) of log L − log loss
over p = (log E, log A, log B, alpha, beta, log R_D*, log R_N*), minimised by scipy's
trust-region least squares with its Huber loss (the same objective) and the closed-form
Jacobian of `residuals_and_jacobian`. Intervals: a pairs bootstrap (resample the runs,
refit from the full fit) at the requested level.

R_D* is identified only by runs that repeat data (D > U; without any the fit is refused),
R_N* only by runs larger than compute-optimal for their unique tokens (N > N*(min(D, U))).
Without any of those R_N* has no effect on the loss: it is held at the published value
(scaling.data_constrained.R_N_STAR) with a warning and no interval, because a bootstrap
started at an arbitrary value would report it as pinned there. A constant whose interval
spans more than POORLY_PINNED x is reported as poorly pinned.
"""

import numpy as np
from scipy import optimize, special

from chinchax.scaling import data_constrained as dc
from chinchax.scaling import fmt
from chinchax.scaling import optimum as opt
from chinchax.errors import UserError

POORLY_PINNED = 10.0  # an interval wider than this ratio pins its constant poorly
_LOG_R_BOUNDS = (np.log(1e-2), np.log(1e4))
_EXPONENT_BOUNDS = (1e-3, 3.0)


def _theta(p: np.ndarray) -> np.ndarray:
  return np.array([np.exp(p[0]), np.exp(p[1]), np.exp(p[2]), p[3], p[4]])


def residuals_and_jacobian(p, N, D, U, log_loss):
  """r = log L(N, D, U; p) − log loss and dr/dp (n, 7), p = (log E, log A, log B, alpha,
  beta, log R_D*, log R_N*), in closed form (the effective sizes of scaling.data_constrained)."""
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


_BOUNDS = (np.array([-np.inf] * 3 + [_EXPONENT_BOUNDS[0]] * 2 + [_LOG_R_BOUNDS[0]] * 2),
           np.array([np.inf] * 3 + [_EXPONENT_BOUNDS[1]] * 2 + [_LOG_R_BOUNDS[1]] * 2))
_R_FREE = np.array([5, 6])


def _minimize(p0, free, N, D, U, log_loss, delta, tol=1e-14) -> tuple[np.ndarray, float]:
  """The summed Huber loss of the log-residuals over the `free` coordinates of p, by
  scipy's trust-region least squares (loss='huber', f_scale=delta: the same objective)."""
  p0 = np.clip(np.asarray(p0, np.float64), _BOUNDS[0] + 1e-12, _BOUNDS[1] - 1e-12)

  def full(z):
    p = p0.copy()
    p[free] = z
    return p

  cache = {}

  def both(z):  # trf asks for r and J at the same z: compute them once
    key = z.tobytes()
    if key not in cache:
      cache.clear()
      cache[key] = residuals_and_jacobian(full(z), N, D, U, log_loss)
    return cache[key]

  with np.errstate(all="ignore"):
    res = optimize.least_squares(
        lambda z: both(z)[0], p0[free], jac=lambda z: both(z)[1][:, free],
        bounds=(_BOUNDS[0][free], _BOUNDS[1][free]), loss="huber", f_scale=delta,
        method="trf", x_scale="jac", ftol=tol, xtol=tol, gtol=tol, max_nfev=500)
  r = res.fun
  return full(res.x), float(np.sum(special.huber(delta, r)))


def _poorly_pinned(name: str, value: float, pair, level: float, who: str) -> str | None:
  lo, hi = pair
  if hi <= POORLY_PINNED * lo:
    return None
  return (f"data-constrained: {name} = {fmt.num(value)} is poorly pinned: its "
          f"{fmt.percent(level)} interval {fmt.interval(pair)} spans more than "
          f"{POORLY_PINNED:g}x; it is identified only by {who}")


def fit(N, D, U, loss, theta0, *, joint: bool, n_resamples: int = 0, seed: int = 0,
        level: float = 0.9, delta: float = 1e-3, base_source: str = "") -> dict:
  """R_D*, R_N* (and, when `joint`, the base law) with bootstrap intervals.

  theta0: the base law [E, A, B, alpha, beta]: held fixed unless `joint`, else the start.
  R_N* is not identified when no run is larger than compute-optimal for its unique tokens:
  it is then held at the published value, with a warning, and has no interval.
  Returns law.json's `data_constrained` block (scaling.law_schema), with its own warnings.
  """
  N, D, U, loss = (np.asarray(x, np.float64) for x in (N, D, U, loss))
  repeated = int(np.sum(D > U))
  if not repeated:
    raise UserError("data-constrained fit: no run repeats data (D > U); R_D* cannot be "
                    "fitted without runs whose unique pool is smaller than their tokens")
  theta0 = np.asarray(theta0, np.float64)
  excess0 = int(np.sum(N > opt.optimal_params_for_tokens(np.minimum(D, U), theta0)))
  free_R = _R_FREE if excess0 else _R_FREE[:1]
  free_all = np.r_[np.arange(5), free_R] if joint else free_R
  data = (N, D, U, np.log(loss))
  base = np.array([np.log(theta0[0]), np.log(theta0[1]), np.log(theta0[2]), theta0[3],
                   theta0[4]])
  R_N_starts = (1.0, 5.0, 15.0, 40.0) if excess0 else (dc.R_N_STAR,)
  starts = [np.r_[base, np.log(r_d), np.log(r_n)]
            for r_d in (1.0, 5.0, 15.0, 40.0) for r_n in R_N_starts]
  p_best, F_best = min((_minimize(p0, free_R, *data, delta) for p0 in starts),
                       key=lambda t: t[1])
  if joint:
    p_best, F_best = _minimize(p_best, free_all, *data, delta)

  theta = _theta(p_best[:5])
  excess = int(np.sum(N > opt.optimal_params_for_tokens(np.minimum(D, U), theta)))
  who = {"R_D_star": f"runs that repeat data (D > U; {repeated} here)",
         "R_N_star": "runs larger than compute-optimal for their unique tokens "
                     f"(N > N*(min(D, U)); {excess} here)"}
  warnings, ci, boot = [], None, None
  if not excess0:
    warnings.append("data-constrained: R_N* is not identified by these runs (none is larger "
                    "than compute-optimal for its unique tokens, N > N*(min(D, U))): the "
                    f"published {fmt.num(dc.R_N_STAR)} (Muennighoff et al. 2023) is used")
  if n_resamples:
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(N), size=(n_resamples, len(N)))
    R_Sx2 = np.array([np.exp(_minimize(p_best, free_all, *[x[i] for x in data], delta,
                                       tol=1e-10)[0][5:]) for i in rows])
    ok = np.all(np.isfinite(R_Sx2), axis=1)
    R_Sx2 = R_Sx2[ok]
    q = [(1 - level) / 2, (1 + level) / 2]
    ci = {"level": float(level), "R_D_star": np.quantile(R_Sx2[:, 0], q).tolist(),
          "R_N_star": np.quantile(R_Sx2[:, 1], q).tolist() if excess0 else None}
    boot = {"kind": "pairs", "n_resamples": int(n_resamples), "dropped": int((~ok).sum()),
            "seed": int(seed)}
    for i, name in enumerate(("R_D_star", "R_N_star")):
      if ci[name] is not None:
        w = _poorly_pinned(name.replace("_star", "*"), float(np.exp(p_best[5 + i])), ci[name],
                           level, who[name])
        warnings += [w] if w else []
  else:
    warnings.append("data-constrained: no bootstrap (--bootstrap=0), so R_D* and R_N* have "
                    "no intervals")
  return {
      "R_D_star": float(np.exp(p_best[5])),
      "R_N_star": float(np.exp(p_best[6])),
      "ci": ci,
      "fixed": [] if excess0 else ["R_N_star"],
      "base": {k: float(v) for k, v in zip(opt.PARAM_NAMES, theta)},
      "base_source": "joint" if joint else (base_source or "given"),
      "points": int(len(N)),
      "repeated": repeated,
      "excess_params": excess,
      "objective": F_best,
      "bootstrap": boot,
      "warnings": warnings,
  }


def fit_data_constrained(N, D, U, loss, theta, delta: float = 1e-3) -> dict[str, float]:
  """R_D*, R_N* for runs (N, D, U, loss) under the fixed base law `theta` (E, A, B, alpha, beta).

  Returns R_D_star, R_N_star and the objective at the fit (`fit` below also fits the base law
  jointly and gives bootstrap intervals).
  """
  N, D, U, loss = (np.asarray(x, np.float64) for x in (N, D, U, loss))
  if not (N.shape == D.shape == U.shape == loss.shape) or N.ndim != 1:
    raise UserError("fit_data_constrained: N, D, U and loss must be 1-D and of one length")
  for name, x in (("N", N), ("D", D), ("U", U), ("loss", loss)):
    if not np.all(np.isfinite(x) & (x > 0)):
      raise UserError(f"fit_data_constrained: {name} must be finite and positive")
  out = fit(N, D, U, loss, theta, joint=False, delta=delta)
  return {k: out[k] for k in ("R_D_star", "R_N_star", "objective")}
