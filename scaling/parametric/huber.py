"""The Approach-3 objective and its batched minimiser.

With theta = (a, b, e, alpha, beta) = (log A, log B, log E, alpha, beta), x = log N,
y = log D, l = log L (natural logs), the objective is, in float64,

    F(theta) = sum_i w_i Huber_delta(r_i),
    r_i      = LSE(a - alpha x_i, b - beta y_i, e) - l_i,
    Huber_delta(r) = r^2/2 if |r| <= delta else delta (|r| - delta/2),

a *sum* over points (Hoffmann et al. 2022, App. D.2). `minimize_batched` carries many
starts (or many bootstrap weightings) to a local minimum at once by trust-region Newton
steps with the exact gradient and Hessian; `polish` carries the best few on with tighter
stops. Both the variable-projection fit
(`scaling.parametric.vp`) and the 4,500-start reference (`scaling.parametric.multistart`) end
here.
"""

import concurrent.futures
import dataclasses

import numpy as np

from chinchax.scaling.numerics import forks

DEFAULT_DELTA = 1e-3
RADIUS0 = 1.0  # initial trust radius in centred coordinates.
_CHOLESKY_MIN_STARTS = 256  # below this, `eigh`'s call per start costs less than 60 vector ops

# --------------------------------------------------------------------------- batched Newton
#
# Centred coordinates a' = a - alpha*mean(x), b' = b - beta*mean(y) decorrelate (a, alpha)
# and (b, beta), so the damping and the stopping tests see a well-conditioned problem. With
# u = (a' - alpha x~, b' - beta y~, e), p = softmax(u), r = LSE(u) - l and
# g = dr/dtheta = (p1, p2, p3, -p1 x~, -p2 y~):
#
#   dF  = sum_i w h'(r) g
#   d2F = sum_i w [h''(r) g g^T + h'(r) (J^T diag(p) J - g g^T)]
#
# with h' = clip(r, -delta, delta), h'' = [|r| <= delta] and J the constant 3x5 map
# theta -> u. Every sum over points is a (starts, n) @ (n, 6) product against the moments
# (1, x~, y~, x~^2, x~y~, y~^2), so a Newton step for thousands of starts is a few BLAS calls.


@dataclasses.dataclass(frozen=True)
class Problem:
  """Log-data in centred coordinates; `moments` is (n, 6): 1, x, y, x^2, xy, y^2."""

  x: np.ndarray
  y: np.ndarray
  l: np.ndarray
  x_mean: float
  y_mean: float
  delta: float
  moments: np.ndarray

  @classmethod
  def make(cls, x, y, l, delta) -> "Problem":
    x_mean, y_mean = float(np.mean(x)), float(np.mean(y))
    x, y = x - x_mean, y - y_mean
    moments = np.stack([np.ones_like(x), x, y, x * x, x * y, y * y], axis=1)
    return cls(x, y, np.asarray(l), x_mean, y_mean, float(delta), moments)

  def to_centered(self, th: np.ndarray) -> np.ndarray:
    th = np.array(th, np.float64)
    th[:, 0] -= th[:, 3] * self.x_mean
    th[:, 1] -= th[:, 4] * self.y_mean
    return th

  def from_centered(self, th: np.ndarray) -> np.ndarray:
    th = np.array(th, np.float64)
    th[:, 0] += th[:, 3] * self.x_mean
    th[:, 1] += th[:, 4] * self.y_mean
    return th


_CHUNK_ELEMENTS = 1 << 16  # starts x points per block: keeps temporaries in cache.


def evaluate(pb: Problem, th_Sx5: np.ndarray, W_Sxn: np.ndarray, order: int = 2,
             better_than: np.ndarray | None = None):
  """(F,) or (F, dF) or (F, dF, d2F) at S centred starts; W is (S, n) or shared (1, n).

  With `better_than` (S,), the derivatives are computed only where F falls below it and are
  NaN elsewhere: a rejected trial step needs its value alone, and the derivatives are most
  of the cost."""
  S, n = len(th_Sx5), len(pb.x)
  chunk = max(1, _CHUNK_ELEMENTS // n)
  if S <= chunk:
    return _evaluate(pb, th_Sx5, W_Sxn, order, better_than)
  parts = [_evaluate(pb, th_Sx5[i:i + chunk], W_Sxn if len(W_Sxn) == 1 else W_Sxn[i:i + chunk],
                     order, None if better_than is None else better_than[i:i + chunk])
           for i in range(0, S, chunk)]
  return tuple(np.concatenate(p) for p in zip(*parts))


def _evaluate(pb, th_Sx5, W_Sxn, order, better_than):
  a, b, e, alpha, beta = (th_Sx5[:, k:k + 1] for k in range(5))
  delta = pb.delta
  e1, e2, e3, s = _terms(pb, a, b, e, alpha, beta)
  with np.errstate(divide="ignore"):  # every term underflowed to 0: shifted below
    r = np.log(s)
  r -= pb.l
  # A term overflowed (r = inf), or all three underflowed to zero or to subnormals, which
  # hold fewer digits (r below -700, as l is a log-loss of order 1): those rows shifted.
  if not -700.0 < r.min() <= r.max() < np.inf:
    rows = np.flatnonzero(~np.all((r > -700.0) & (r < np.inf), axis=1))
    e3 = np.broadcast_to(e3, e1.shape).copy()
    u1, u2 = a[rows] - alpha[rows] * pb.x, b[rows] - beta[rows] * pb.y
    m = np.maximum(np.maximum(u1, u2), e[rows])
    e1[rows], e2[rows], e3[rows] = np.exp(u1 - m), np.exp(u2 - m), np.exp(e[rows] - m)
    s[rows] = e1[rows] + e2[rows] + e3[rows]
    r[rows] = np.log(s[rows]) + m - pb.l
  h = np.clip(r, -delta, delta)  # Huber'(r); Huber(r) = h (r - h/2).
  huber = r - 0.5 * h
  huber *= h
  shared = len(W_Sxn) == 1
  F_S = huber @ W_Sxn[0] if shared else np.einsum("sn,sn->s", W_Sxn, huber)
  if order == 0:
    return (F_S,)
  if better_than is None or np.all(keep := F_S < better_than):
    return (F_S, *_derivatives(pb, W_Sxn, order, r, h, e1, e2, e3, s))
  rows = np.flatnonzero(keep)
  out = [np.full((len(F_S), 5), np.nan), np.full((len(F_S), 5, 5), np.nan)][:order]
  if rows.size:
    for o, v in zip(out, _derivatives(pb, W_Sxn if shared else W_Sxn[rows], order,
                                      *(x[rows] for x in (r, h, e1, e2, e3, s)))):
      o[rows] = v
  return (F_S, *out)


def _terms(pb, a, b, e, alpha, beta):
  """A/N^alpha, B/D^beta, E (S, 1) and their sum, in centred coordinates: exp of the exponents
  as they are, with no log-sum-exp shift (six passes of the value's fifteen); only a row far
  from any fit (exponents past 700 in size) needs the shift, which `_evaluate` then applies."""
  with np.errstate(over="ignore", under="ignore"):
    e1 = np.multiply(alpha, pb.x)
    np.exp(np.subtract(a, e1, out=e1), out=e1)
    e2 = np.multiply(beta, pb.y)
    np.exp(np.subtract(b, e2, out=e2), out=e2)
    e3 = np.exp(e)
  s = e1 + e2
  s += e3
  return e1, e2, e3, s


def _derivatives(pb, W_Sxn, order, r, h, e1, e2, e3, s):
  """(dF,) or (dF, d2F) from the residuals r, h = Huber'(r), the exponentials and their sum."""
  shared = len(W_Sxn) == 1
  # Shared weights fold into the moments; per-start weights multiply the terms.
  mom = pb.moments * W_Sxn[0][:, None] if shared else pb.moments
  inside = h == r  # Huber''(r)
  if not shared:
    h = h * W_Sxn
  s = np.divide(1.0, s)
  p1, p2, p3 = e1 * s, e2 * s, e3 * s
  T1, T2, T3 = (h * p1) @ mom, (h * p2) @ mom, (h * p3) @ mom
  dF_Sx5 = np.stack([T1[:, 0], T2[:, 0], T3[:, 0], -T1[:, 1], -T2[:, 2]], axis=1)
  if order == 1:
    return (dF_Sx5,)
  c2 = inside * W_Sxn if not shared else inside.astype(np.float64)
  c2 -= h
  p1c = p1 * c2
  Q11, Q12, Q13 = (p1c * p1) @ mom, (p1c * p2) @ mom, (p1c * p3) @ mom
  p2 *= c2  # now c2 p2
  Q22, Q23 = (p2 * e2 * s) @ mom, (p2 * p3) @ mom
  Q33 = (c2 * p3 * p3) @ mom
  upper = {
      (0, 0): Q11[:, 0] + T1[:, 0], (0, 1): Q12[:, 0], (0, 2): Q13[:, 0],
      (0, 3): -Q11[:, 1] - T1[:, 1], (0, 4): -Q12[:, 2],
      (1, 1): Q22[:, 0] + T2[:, 0], (1, 2): Q23[:, 0], (1, 3): -Q12[:, 1],
      (1, 4): -Q22[:, 2] - T2[:, 2],
      (2, 2): Q33[:, 0] + T3[:, 0], (2, 3): -Q13[:, 1], (2, 4): -Q23[:, 2],
      (3, 3): Q11[:, 3] + T1[:, 3], (3, 4): Q12[:, 4], (4, 4): Q22[:, 5] + T2[:, 5],
  }
  H = np.empty((len(dF_Sx5), 5, 5))
  for (i, j), v in upper.items():
    H[:, i, j] = H[:, j, i] = v
  return dF_Sx5, H


def _newton_by_cholesky(dF_Sx5, H_Sx5x5):
  """The Newton step -H^-1 dF and its predicted decrease dF^T H^-1 dF / 2 for each start, and
  whether it is the step `_trust_region_eigh` would take if it fits the region, by a Cholesky
  factorisation H = L L^T written over the batch: five columns of vector operations on S
  starts, where LAPACK's batched routines pay a call per 5x5 matrix (`eigh` was a third of a
  bootstrap's time).

  eigh takes the Newton step only where eig_min > 1e-12 (|eig|_max + |dF|). Here a start
  passes where 1 / |L^-1|_F^2, a lower bound on eig_min, exceeds 1e-12 (trace H + |dF|), an
  upper bound on that threshold: a nearly singular H on a plateau is left to eigh's damped
  step, as before."""
  H = np.ascontiguousarray(H_Sx5x5.transpose(1, 2, 0))  # (5, 5, S): rows of contiguous starts
  S = H.shape[2]
  trace = np.einsum("iis->s", H)
  L = np.zeros_like(H)
  ok = np.ones(S, bool)
  for j in range(5):
    d = H[j, j] - np.einsum("ks,ks->s", L[j, :j], L[j, :j])
    ok &= d > 1e-300
    L[j, j] = np.sqrt(np.where(ok, d, 1.0))
    for i in range(j + 1, 5):
      L[i, j] = (H[i, j] - np.einsum("ks,ks->s", L[i, :j], L[j, :j])) / L[j, j]
  Linv = np.zeros_like(L)  # L^-1, lower triangular, by forward substitution
  for i in range(5):
    Linv[i, i] = 1.0 / L[i, i]
    for j in range(i):
      Linv[i, j] = -np.einsum("ks,ks->s", L[i, j:i], Linv[j:i, j]) / L[i, i]
  g = dF_Sx5.T
  with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
    eig_min_bound = 1.0 / np.einsum("ijs,ijs->s", Linv, Linv)
    ok &= eig_min_bound > 1e-12 * (trace + np.sqrt(np.einsum("is,is->s", g, g)))
    z = np.einsum("ijs,js->is", Linv, g)  # L z = g
    s = -np.einsum("jis,js->is", Linv, z)  # L^T s = -z
  return s.T, 0.5 * np.einsum("is,is->s", z, z), ok


def _trust_region_step(dF_Sx5, H_Sx5x5, radius_S):
  """argmin of the quadratic model within |s| <= radius, and the decrease it predicts.

  Where H is positive definite and the Newton step fits in the region, the step is the Newton
  step (`_newton_by_cholesky`); the rest take the eigendecomposition below.

  In H's eigenbasis the step is -(H + mu I)^-1 dF with mu >= max(0, -eig_min) such that
  |s| = radius unless the Newton step already fits (More & Sorensen 1983). 1/|s(mu)| is
  concave and nearly linear in mu, so Newton's method from the left converges monotonically.
  """
  if len(dF_Sx5) < _CHOLESKY_MIN_STARTS:
    return _trust_region_eigh(dF_Sx5, H_Sx5x5, radius_S)
  step_Sx5, predicted_S, ok = _newton_by_cholesky(dF_Sx5, H_Sx5x5)
  with np.errstate(invalid="ignore"):
    ok &= np.isfinite(predicted_S) & (np.einsum("si,si->s", step_Sx5, step_Sx5) <= radius_S**2)
  rest = np.flatnonzero(~ok)
  if rest.size:
    step_Sx5[rest], predicted_S[rest] = _trust_region_eigh(dF_Sx5[rest], H_Sx5x5[rest],
                                                           radius_S[rest])
  return step_Sx5, predicted_S


def _trust_region_eigh(dF_Sx5, H_Sx5x5, radius_S):
  eig_Sx5, Q_Sx5x5 = np.linalg.eigh(H_Sx5x5)
  gq_Sx5 = np.einsum("sji,sj->si", Q_Sx5x5, dF_Sx5)
  g2_Sx5 = gq_Sx5**2
  scale = np.abs(eig_Sx5).max(1) + np.sqrt(g2_Sx5.sum(1)) + 1e-300
  mu = np.maximum(0.0, -eig_Sx5[:, 0]) + 1e-12 * scale
  with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # 0/0: no Newton step
    newton_norm2 = np.sum(g2_Sx5 / eig_Sx5**2, 1)
  newton_fits = (eig_Sx5[:, 0] > 1e-12 * scale) & (newton_norm2 <= radius_S**2)
  mu = np.where(newton_fits, 0.0, mu)
  for _ in range(12):
    d = eig_Sx5 + mu[:, None]
    norm2 = np.sum(g2_Sx5 / d**2, 1)
    norm = np.sqrt(norm2)
    dnorm2 = np.sum(g2_Sx5 / d**3, 1)
    update = np.where(newton_fits, 0.0, np.maximum(
        (norm / radius_S - 1.0) * norm2 / np.maximum(dnorm2, 1e-300), 0.0))
    mu = mu + update
    if np.all(update <= 1e-15 * mu):  # every start's mu has stopped moving
      break
  sq_Sx5 = gq_Sx5 / (eig_Sx5 + mu[:, None])
  predicted_S = np.sum(gq_Sx5 * sq_Sx5 - 0.5 * eig_Sx5 * sq_Sx5**2, 1)
  return -np.einsum("sij,sj->si", Q_Sx5x5, sq_Sx5), predicted_S


def minimize_batched(pb: Problem, th0_Sx5: np.ndarray, W_Sxn: np.ndarray, *, group_S=None,
                     max_iter: int = 500, xtol: float = 1e-9, merge_tol: float = 1e-7,
                     stall_rtol: float = 1e-10):
  """Trust-region Newton from every centred start at once: (theta, F, converged) per start.

  A start stops when a step shorter than `xtol` gains (almost) nothing, when the model
  predicts no gain, when the region has collapsed, or when ten steps gained less than
  `stall_rtol` of F. A start that creeps along a plateau where a term has died (E -> 0,
  A -> 0, ...) at a pace that cannot reach its group's best within `max_iter` is dropped
  unconverged: it can neither be nor join the best fit. Starts of the same `group` (the same
  row of W) whose iterates meet within `merge_tol` go on as one, so duplicates cost nothing;
  each then reports its representative's result.
  """
  S = len(th0_Sx5)
  th = np.array(th0_Sx5, np.float64)
  group_S = np.zeros(S, np.int64) if group_S is None else np.asarray(group_S)
  n_groups = int(group_S.max()) + 1 if S else 0
  shared = W_Sxn.shape[0] == 1
  F, dF, H = evaluate(pb, th, W_Sxn)
  radius = np.full(S, RADIUS0)
  converged = np.zeros(S, bool)
  active = np.isfinite(F)
  alias = np.arange(S)
  F_checkpoint = F.copy()
  for it in range(max_iter):
    idx = np.flatnonzero(active)
    if not idx.size:
      break
    step, predicted = _trust_region_step(dF[idx], H[idx], radius[idx])
    trial = th[idx] + step
    Ft, dFt, Ht = evaluate(pb, trial, W_Sxn if shared else W_Sxn[idx], better_than=F[idx])
    gain = F[idx] - Ft
    ok = np.isfinite(Ft) & (gain > 0)
    step_norm = np.sqrt(np.sum(step**2, 1))
    acc = idx[ok]
    th[acc], F[acc], dF[acc], H[acc] = trial[ok], Ft[ok], dFt[ok], Ht[ok]
    rho = np.where(ok, gain, -1.0) / np.maximum(predicted, 1e-300)
    r = radius[idx]
    r = np.where(rho < 0.25, 0.25 * step_norm,
                 np.where((rho > 0.75) & (step_norm > 0.99 * r), 2.0 * r, r))
    radius[idx] = np.clip(r, 1e-14, 1e3)
    f_scale = np.abs(F[idx]) + 1e-300
    done = ((step_norm <= xtol) & (gain <= 1e-13 * f_scale)) | (
        predicted <= 1e-16 * f_scale) | (radius[idx] <= 1e-13)
    converged[idx[done]] = True
    if it % 10 == 9:
      gain10 = F_checkpoint[idx] - F[idx]
      F_checkpoint[idx] = F[idx]
      done |= gain10 <= stall_rtol * f_scale
      converged[idx[done]] = True
      # At this pace the start cannot reach its group's best within max_iter: drop it.
      best = np.full(n_groups, np.inf)
      np.minimum.at(best, group_S, F)
      done |= gain10 * (max_iter / 10) < F[idx] - best[group_S[idx]]
    active[idx[done]] = False
    idx = np.flatnonzero(active)
    # Only a start with another of its group still active can meet it.
    idx = idx[np.bincount(group_S[idx], minlength=n_groups)[group_S[idx]] > 1]
    if not idx.size:
      continue
    keys = np.column_stack([group_S[idx], np.round(th[idx] / merge_tol)])
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    rep = idx[first[inverse.ravel()]]
    merged = rep != idx
    alias[idx[merged]] = rep[merged]
    active[idx[merged]] = False
  while np.any(alias[alias] != alias):
    alias = alias[alias]
  return th[alias], F[alias], converged[alias]


def on_all_cores(minimize, th_Sx5: np.ndarray, *also: np.ndarray, group_S=None):
  """`minimize(th, *also)` over the starts (or any rows: `vp`'s grid) in one chunk per core:
  in forked children where the process allows it (`numerics.forks`: `chinchax fit`), else in
  threads (numpy's batched linear algebra and ufuncs release the GIL, so the chunks run in
  parallel, though they contend for it between operations). `also`: arrays
  with a row per start, cut where the starts are; with `group_S` (non-decreasing), chunks
  hold whole groups (the starts of one resample, which merge and stop by each other's best)."""
  S = len(th_Sx5)
  n = max(1, min(forks.cores(), 8, S // 256))
  if n == 1:
    return minimize(th_Sx5, *also)
  cuts = np.linspace(0, S, n + 1).astype(int)
  if group_S is not None:  # each cut moved back to where its group begins
    cuts = np.searchsorted(group_S, group_S[np.minimum(cuts, S - 1)], side="left")
    cuts[-1] = S
  chunks = [[x[i:j] for x in (th_Sx5, *also)] for i, j in zip(cuts[:-1], cuts[1:]) if j > i]
  parts = forks.map_chunks(lambda c: minimize(*c), chunks)
  if parts is None:  # this process may not fork (a library call, the sweep's process)
    with concurrent.futures.ThreadPoolExecutor(len(chunks)) as pool:
      parts = list(pool.map(lambda c: minimize(*c), chunks))
  return tuple(np.concatenate(p) for p in zip(*parts))


def polish(problem: Problem, th_Kx5: np.ndarray, w: np.ndarray):
  """(theta, F) for each of K centred minima carried on by the same Newton steps with a fresh
  region and tighter stops (xtol 1e-12; ten steps that gain under 1e-12 of F, about where
  scipy's L-BFGS-B with ftol 1e-15, which this replaces, stopped): on a plateau where a term
  dies (E -> 0), the batch's stall test ends a start early, and this carries it on."""
  th, F, _ = minimize_batched(problem, th_Kx5, w[None], group_S=np.arange(len(th_Kx5)),
                              xtol=1e-12, stall_rtol=1e-12)
  return th, F
