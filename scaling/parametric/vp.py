"""Approach 3 by variable projection: a 2-D search over (alpha, beta), then the exact objective.

For fixed exponents the law L = E + A·N^-alpha + B·D^-beta is linear in (E, A, B), so the
five-parameter fit is a search over two numbers (Golub & Pereyra 1973):

1. On a grid of (alpha, beta) (`GRID`, log-spaced), (E, A, B) >= 0 minimise the Huber loss
   of the relative residuals pred/L − 1 (≈ the log-residuals the objective uses) by
   iteratively reweighted non-negative least squares: Huber's weights min(1, delta/|r|),
   r the exact log-residual, and for three unknowns the NNLS solution is the best of the
   seven supports whose unconstrained solution is non-negative.
2. The paper's objective (`scaling.parametric.huber`) is evaluated at every grid point; its local
   minima on the grid, best first (`N_CANDIDATES`), are the starts.
3. The batched trust-region Newton of `scaling.parametric.huber` carries each start to a local minimum
   of the exact objective (all five parameters); `scaling.parametric.fit` polishes the best.

A handful of starts replaces the paper's 4,500 because each start already sits in a basin
of the exact objective: the grid has profiled out the three linear parameters that make the
paper's grid so large. `tests/scaling/test_parametric_vp.py` checks it reaches the
4,500-start reference's optimum.
"""

import numpy as np

from chinchax.scaling.parametric import huber

GRID = np.geomspace(0.02, 2.5, 36)  # alpha and beta values of the search
N_CANDIDATES = 8  # grid basins carried to the exact objective
IRLS_ITERATIONS = 8
E_FLOOR = 1e-8  # relative to the smallest loss: a term NNLS dropped starts this small
_CHUNK_ELEMENTS = 1 << 18  # grid points x data points per block


def _nnls3(M_Gx3x3: np.ndarray, b_Gx3: np.ndarray) -> np.ndarray:
  """argmin_{c >= 0} c^T M c - 2 b^T c for each of G 3x3 problems (all supports tried)."""
  G = len(M_Gx3x3)
  best_c, best_q = np.zeros((G, 3)), np.zeros(G)  # the empty support: c = 0, q = 0
  for mask in range(1, 8):
    S = [k for k in range(3) if mask >> k & 1]
    with np.errstate(all="ignore"):
      c_S = _solve_small(M_Gx3x3[:, S][:, :, S], b_Gx3[:, S])
    q = -np.sum(b_Gx3[:, S] * c_S, axis=1)
    better = np.all(c_S >= 0, axis=1) & np.isfinite(q) & (q < best_q)
    c = np.zeros((G, 3))
    c[:, S] = c_S
    best_c[better], best_q[better] = c[better], q[better]
  return best_c


def _solve_small(M_Gxkxk: np.ndarray, b_Gxk: np.ndarray) -> np.ndarray:
  """M^-1 b for G symmetric k x k systems, k <= 3, by the adjugate over the batch (LAPACK's
  batched solve pays a call per system: 9,000 of them per fit). A singular system gives
  inf or NaN, which `_nnls3` passes over."""
  k = M_Gxkxk.shape[1]
  m = lambda i, j: M_Gxkxk[:, i, j]
  if k == 1:
    return b_Gxk / m(0, 0)[:, None]
  if k == 2:
    det = m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0)
    return np.stack([m(1, 1) * b_Gxk[:, 0] - m(0, 1) * b_Gxk[:, 1],
                     m(0, 0) * b_Gxk[:, 1] - m(1, 0) * b_Gxk[:, 0]], axis=1) / det[:, None]
  cof = np.stack([np.stack([m((i + 1) % 3, (j + 1) % 3) * m((i + 2) % 3, (j + 2) % 3)
                            - m((i + 1) % 3, (j + 2) % 3) * m((i + 2) % 3, (j + 1) % 3)
                            for j in range(3)], axis=1) for i in range(3)], axis=1)
  det = np.einsum("gj,gj->g", M_Gxkxk[:, 0], cof[:, 0])
  return np.einsum("gij,gi->gj", cof, b_Gxk) / det[:, None]  # adj = cof^T


def profile_grid(pb: huber.Problem, w: np.ndarray) -> np.ndarray:
  """(G, 5) centred thetas: each grid (alpha, beta) with (E, A, B) profiled out."""
  la, lb = np.meshgrid(GRID, GRID, indexing="ij")
  alpha_G, beta_G = la.ravel(), lb.ravel()
  # One share of the grid per core (`huber.on_all_cores`: forked children or threads), each
  # in chunks that keep the temporaries in cache.
  chunk = max(1, _CHUNK_ELEMENTS // len(pb.x))
  return huber.on_all_cores(lambda a_G, b_G: (np.concatenate([
      _profile(pb, w, a_G[i:i + chunk], b_G[i:i + chunk]) for i in range(0, len(a_G), chunk)]),),
      alpha_G, beta_G)[0]


def _profile(pb, w, alpha_G, beta_G):
  L = np.exp(pb.l)
  # Columns over L, so that their combination is pred/L; (N/N_ref)^-alpha with N_ref the
  # geometric mean makes log A the centred coordinate a' of `huber.Problem`.
  f0_n = 1.0 / L
  f1_Gxn = np.exp(-alpha_G[:, None] * pb.x) * f0_n
  f2_Gxn = np.exp(-beta_G[:, None] * pb.y) * f0_n
  # The sums of the normal equations as products with fixed columns: sum omega f0^2 and
  # sum omega f0 are omega's products with (f0^2, f0), sum omega f_k f0 and sum omega f_k
  # are (omega f_k)'s with (f0, 1).
  f0sq_f0_nx2 = np.stack([f0_n * f0_n, f0_n], axis=1)
  f0_1_nx2 = np.stack([f0_n, np.ones_like(f0_n)], axis=1)
  delta_w_n = pb.delta * w
  omega_Gxn = np.broadcast_to(w, f1_Gxn.shape)
  for _ in range(IRLS_ITERATIONS):
    w1, w2 = omega_Gxn * f1_Gxn, omega_Gxn * f2_Gxn
    (m00, b0), (m01, b1), (m02, b2) = ((omega_Gxn @ f0sq_f0_nx2).T, (w1 @ f0_1_nx2).T,
                                       (w2 @ f0_1_nx2).T)
    m11, m12, m22 = (np.einsum("gn,gn->g", w1, f1_Gxn), np.einsum("gn,gn->g", w1, f2_Gxn),
                     np.einsum("gn,gn->g", w2, f2_Gxn))
    M = np.stack([m00, m01, m02, m01, m11, m12, m02, m12, m22], axis=1).reshape(-1, 3, 3)
    c_Gx3 = _nnls3(M, np.stack([b0, b1, b2], axis=1))
    with np.errstate(divide="ignore"):
      r = c_Gx3[:, 1:2] * f1_Gxn
      r += c_Gx3[:, 2:] * f2_Gxn
      r += c_Gx3[:, :1] * f0_n
      np.log(r, out=r)
    # Huber's weights w min(1, delta/|r|) = delta w / max(|r|, delta).
    omega_Gxn = np.abs(r, out=r)
    np.maximum(omega_Gxn, pb.delta, out=omega_Gxn)
    np.divide(delta_w_n, omega_Gxn, out=omega_Gxn)
  floor = np.log(E_FLOOR * L.min())
  with np.errstate(divide="ignore"):
    log_c = np.log(c_Gx3)
  th = np.stack([log_c[:, 1], log_c[:, 2], log_c[:, 0], alpha_G, beta_G], axis=1)
  return np.where(np.isfinite(th), th, floor)  # a dropped term starts negligible


def grid_minima(F_G: np.ndarray, n: int = N_CANDIDATES) -> np.ndarray:
  """Indices of up to n local minima of F on the (alpha, beta) grid, best first."""
  k = len(GRID)
  F = np.where(np.isfinite(F_G), F_G, np.inf).reshape(k, k)
  padded = np.pad(F, 1, constant_values=np.inf)
  neighbours = np.stack([padded[1 + di:1 + di + k, 1 + dj:1 + dj + k]
                         for di in (-1, 0, 1) for dj in (-1, 0, 1) if di or dj])
  is_min = np.isfinite(F) & np.all(F <= neighbours, axis=0)
  idx = np.flatnonzero(is_min.ravel())
  idx = idx[np.argsort(F.ravel()[idx], kind="stable")][:n]
  return idx if idx.size else np.array([int(np.argmin(F))])


def local_minima(pb: huber.Problem, w: np.ndarray):
  """Starts from the grid's basins carried to local minima: (theta, F, converged) each."""
  th_G = profile_grid(pb, w)
  F_G = huber.evaluate(pb, th_G, w[None], order=0)[0]
  starts = th_G[grid_minima(F_G)]
  return huber.minimize_batched(pb, starts, w[None])
