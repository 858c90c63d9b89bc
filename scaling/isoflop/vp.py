"""Approach 2's default estimator: the IsoFLOP profiles the law implies, fitted jointly.

Under L = E + A·N^-alpha + B·D^-beta the runs of budget k lie on

    L = c0_k + cN·(N/N_ref)^-alpha + cD_k·(D/D_ref)^-beta,

linear in the coefficients once (alpha, beta) is fixed. The exponents are shared by every
budget (they are properties of the model family, not of a budget), and so is cN (the N-term
does not depend on C); cD_k is free per budget, so N*(C) is not forced onto a power law:
Approach 2 stays an independent reading of the optimum. The level is shared (the law's E,
`shared_level`, method "vp") or free per budget (method "vp_levels": robust to a budget-wide
offset, as the parabola is). Free levels cost precision: on 5 budgets of 5 sizes with a
drifting grid, the spread of a over noise seeds is up to 3x that of a shared level, and
with 3 sizes per budget they are not identified (each budget's 3 points are fitted exactly
by its own level and cD_k whatever the exponents). So "vp" is the default.

Variable projection (Golub & Pereyra 1973): for each (alpha, beta) the coefficients are the
least-squares solution, so the fit is a search over two numbers. A grid over (alpha, beta)
(log-spaced, `GRID`) finds the basin; Levenberg-Marquardt steps in (log alpha, log beta)
with Kaufman's (1975) Jacobian polish it. Points where a budget's profile loses an arm
(cN <= 0 or cD_k <= 0) are excluded: such a profile has no minimum. Every array is batched
over R loss vectors of the same design, so a bootstrap is one call.

The minimum of budget k along its C, with log(C/D) = p0_k + p1_k·log N the budget's FLOPs
per token (p1 = 1 under 6ND), is in closed form:

    log N*_k = log N_ref + [log(alpha·cN / (beta·p1_k·cD_k)) + beta·g_k] / (alpha + beta·p1_k),
    g_k = log C_k - p0_k - p1_k·log N_ref - log D_ref.
"""

import dataclasses

import numpy as np

GRID = np.geomspace(0.02, 4.0, 30)  # alpha and beta values of the coarse search
LOG_BOUNDS = (np.log(0.01), np.log(8.0))  # exponents the refinement may reach
MAX_ITER = 100
_GRID_CHUNK = 64  # grid points per block in the coarse search


@dataclasses.dataclass(frozen=True, eq=False)
class Design:
  """What every resample shares: the runs' sizes and budgets (centred logs), not the losses."""

  log_N_n: np.ndarray  # log(N / N_ref)
  log_D_n: np.ndarray  # log(D / D_ref)
  budget_n: np.ndarray  # 0..K-1
  g_K: np.ndarray  # see the module docstring
  p1_K: np.ndarray
  log_N_ref: float
  shared_level: bool

  @property
  def K(self) -> int:
    return len(self.g_K)

  @property
  def n_params(self) -> int:
    """Linear coefficients plus the two exponents."""
    return (1 if self.shared_level else self.K) + 1 + self.K + 2

  @property
  def i_N(self) -> int:
    """Column of cN; the cD_k follow it."""
    return 1 if self.shared_level else self.K

  @classmethod
  def make(cls, log_N_n, log_D_n, budget_n, log_C_K, p0_K, p1_K,
           shared_level: bool) -> "Design":
    x_ref, y_ref = float(np.mean(log_N_n)), float(np.mean(log_D_n))
    g_K = np.asarray(log_C_K) - np.asarray(p0_K) - np.asarray(p1_K) * x_ref - y_ref
    return cls(np.asarray(log_N_n) - x_ref, np.asarray(log_D_n) - y_ref,
               np.asarray(budget_n), g_K, np.asarray(p1_K, np.float64), x_ref,
               bool(shared_level))

  def matrix(self, log_alpha_S, log_beta_S) -> np.ndarray:
    """(S, n, p) design matrices: level column(s), N-term, one D-term column per budget."""
    alpha_S, beta_S = np.exp(log_alpha_S), np.exp(log_beta_S)
    onehot_nxK = (self.budget_n[:, None] == np.arange(self.K)).astype(np.float64)
    levels = np.ones((len(self.budget_n), 1)) if self.shared_level else onehot_nxK
    S = len(alpha_S)
    u_Sxn = np.exp(-alpha_S[:, None] * self.log_N_n)
    v_Sxn = np.exp(-beta_S[:, None] * self.log_D_n)
    return np.concatenate([np.broadcast_to(levels, (S, *levels.shape)), u_Sxn[..., None],
                           v_Sxn[..., None] * onehot_nxK], axis=2)


@dataclasses.dataclass(frozen=True, eq=False)
class Fit:
  """R profile fits: exponents, coefficients, and what follows from them."""

  alpha_R: np.ndarray
  beta_R: np.ndarray
  coef_Rxp: np.ndarray
  fitted_Rxn: np.ndarray
  rss_R: np.ndarray
  ok_R: np.ndarray  # a profile with a minimum in every budget was found
  log_N_star_RxK: np.ndarray
  L_star_RxK: np.ndarray
  gamma_RxK: np.ndarray  # beta·p1: the exponent of the profile's right arm in N
  P_RxK: np.ndarray  # the N-term at N*; the D-term there is alpha·P/gamma


def _coarse(design: Design, Y_Rxn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(log alpha, log beta) of the best feasible grid point per row; NaN where none is."""
  la, lb = np.meshgrid(np.log(GRID), np.log(GRID), indexing="ij")
  la, lb = la.ravel(), lb.ravel()
  R = len(Y_Rxn)
  best_rss, best_g = np.full(R, np.inf), np.full(R, -1)
  yy_R = np.sum(Y_Rxn * Y_Rxn, axis=1)
  i_N = design.i_N
  for start in range(0, len(la), _GRID_CHUNK):
    sl = slice(start, start + _GRID_CHUNK)
    Q_Gxnxp, T_Gxpxp = np.linalg.qr(design.matrix(la[sl], lb[sl]))
    qty_GxpxR = np.matmul(Q_Gxnxp.transpose(0, 2, 1), Y_Rxn.T)
    with np.errstate(all="ignore"):
      coef_GxpxR = np.matmul(np.linalg.inv(T_Gxpxp)[:, i_N:], qty_GxpxR)
      rss_GxR = yy_R[None] - np.sum(qty_GxpxR**2, axis=1)
    feasible = np.all(coef_GxpxR > 0, axis=1) & np.isfinite(rss_GxR)
    rss_GxR = np.where(feasible, rss_GxR, np.inf)
    g = np.argmin(rss_GxR, axis=0)
    rss = rss_GxR[g, np.arange(R)]
    better = rss < best_rss
    best_rss[better], best_g[better] = rss[better], start + g[better]
  found = best_g >= 0
  return (np.where(found, la[best_g], np.nan), np.where(found, lb[best_g], np.nan))


def _project(design: Design, log_ab_Rx2: np.ndarray, Y_Rxn: np.ndarray):
  """Least-squares coefficients at each row's exponents: (X, Q, coef, residual, rss, ok)."""
  X = design.matrix(log_ab_Rx2[:, 0], log_ab_Rx2[:, 1])
  Q, T = np.linalg.qr(X)
  qty = np.einsum("rnp,rn->rp", Q, Y_Rxn)
  with np.errstate(all="ignore"):
    coef = np.linalg.solve(T, qty[..., None])[..., 0]
  res = Y_Rxn - np.einsum("rnp,rp->rn", Q, qty)
  rss = np.sum(res * res, axis=1)
  ok = np.all(coef[:, design.i_N:] > 0, axis=1) & np.isfinite(rss)
  return X, Q, coef, res, np.where(ok, rss, np.inf), ok


def _refine(design: Design, log_ab_Rx2: np.ndarray, Y_Rxn: np.ndarray) -> np.ndarray:
  """Levenberg-Marquardt in (log alpha, log beta) on the projected residual."""
  th = log_ab_Rx2.copy()
  X, Q, coef, res, rss, _ = _project(design, th, Y_Rxn)
  lam = np.full(len(th), 1e-3)
  active = np.isfinite(rss)
  i_N = design.i_N
  for _ in range(MAX_ITER):
    idx = np.flatnonzero(active)
    if not idx.size:
      break
    a, b = np.exp(th[idx, 0]), np.exp(th[idx, 1])
    c = coef[idx]
    # (dX/dlog alpha)·c and (dX/dlog beta)·c; Kaufman: J = -(I - QQ^T)(dX·c).
    w_a = -a[:, None] * design.log_N_n * X[idx, :, i_N] * c[:, i_N, None]
    cD_n = c[:, i_N + 1:][:, design.budget_n]
    w_b = -b[:, None] * design.log_D_n * X[idx, :, i_N + 1:].sum(axis=2) * cD_n
    W = np.stack([w_a, w_b], axis=2)
    Qi = Q[idx]
    J = -(W - np.einsum("rnp,rpk->rnk", Qi, np.einsum("rnp,rnk->rpk", Qi, W)))
    JtJ = np.einsum("rnk,rnl->rkl", J, J)
    grad = np.einsum("rnk,rn->rk", J, res[idx])
    damp = lam[idx, None, None] * (np.eye(2) * np.diagonal(JtJ, axis1=1, axis2=2)[:, None]
                                   + 1e-12 * np.eye(2))
    with np.errstate(all="ignore"):
      step = -np.linalg.solve(JtJ + damp, grad[..., None])[..., 0]
    trial = np.clip(th[idx] + step, *LOG_BOUNDS)
    Xt, Qt, ct, rt, rss_t, _ = _project(design, trial, Y_Rxn[idx])
    accept = rss_t < rss[idx]
    stalled = accept & (rss[idx] - rss_t <= 1e-14 * rss[idx])
    acc = idx[accept]
    th[acc], X[acc], Q[acc], coef[acc], res[acc], rss[acc] = (
        trial[accept], Xt[accept], Qt[accept], ct[accept], rt[accept], rss_t[accept])
    lam[idx] = np.where(accept, lam[idx] / 3, lam[idx] * 4)
    done = (np.abs(step).max(axis=1) < 1e-10) | (lam[idx] > 1e10) | stalled
    active[idx[done]] = False
  return th


def fit(design: Design, Y_Rxn: np.ndarray) -> Fit:
  """The profile fit of each row of losses (rows share the design)."""
  Y_Rxn = np.atleast_2d(np.asarray(Y_Rxn, np.float64))
  la, lb = _coarse(design, Y_Rxn)
  th = np.stack([la, lb], axis=1)
  found = np.isfinite(la)
  th[~found] = 0.0
  th = _refine(design, th, Y_Rxn)
  X, _, coef, _, rss, ok = _project(design, th, Y_Rxn)
  ok &= found
  alpha, beta = np.exp(th[:, 0]), np.exp(th[:, 1])
  i_N = design.i_N
  cN = coef[:, i_N, None]
  cD_RxK = coef[:, i_N + 1:]
  gamma = beta[:, None] * design.p1_K
  with np.errstate(all="ignore"):
    xc = (np.log(alpha[:, None] * cN / (gamma * cD_RxK)) + beta[:, None] * design.g_K) / (
        alpha[:, None] + gamma)
    level = coef[:, :1] if design.shared_level else coef[:, :design.K]
    P = cN * np.exp(-alpha[:, None] * xc)
    L_star = level + P + cD_RxK * np.exp(-beta[:, None] * (design.g_K - design.p1_K * xc))
  fitted = np.einsum("rnp,rp->rn", X, coef)
  return Fit(alpha, beta, coef, fitted, rss, ok & np.all(np.isfinite(xc), axis=1),
             xc + design.log_N_ref, L_star, gamma, P)
