"""The compute-optimal allocation implied by L(N, D) = E + A/N^alpha + B/D^beta.

Minimising L under the constraint C = 6·N·D (Hoffmann et al. 2022, Sec. 3.3 and App. D.2):

    a = beta / (alpha + beta)            b = alpha / (alpha + beta)          (a + b = 1)
    G = (alpha·A / (beta·B))^(1 / (alpha + beta))
    N*(C) = G · (C/6)^a                  D*(C) = G^-1 · (C/6)^b
    D*/N* = G^-2 · (C/6)^(b - a)         (tokens per parameter)

Inverting D*(C) = D gives the compute-optimal model for a token count:
    N*(D) = G · (G·D)^(a/b).

Broadcasting: a parameter vector `theta` has shape (*S, 5) in the order
[E, A, B, alpha, beta] (one law, or S bootstrap samples); budgets C have shape (*K).
Every function returns shape (*S, *K), so a bootstrap band is one call.

A sixth value gamma is the nesting form L = E + (A/N^alpha + B/D^beta)^gamma
(scaling.parametric.form). The optimum is where the inner sum is least along C = 6ND, so
every allocation above holds for it unchanged; only the loss itself takes gamma.
"""

from collections.abc import Callable

import numpy as np
# scipy is imported in the functions that use it: a fit needs none of it (0.5 s of import).

PARAM_NAMES: tuple[str, ...] = ("E", "A", "B", "alpha", "beta")
NESTED_NAMES: tuple[str, ...] = PARAM_NAMES + ("gamma",)


def _checked(theta) -> np.ndarray:
  theta = np.asarray(theta, dtype=np.float64)
  if theta.shape[-1:] not in ((5,), (6,)):
    raise ValueError(f"theta must end in 5 values {PARAM_NAMES} (or 6, with gamma), "
                     f"got shape {theta.shape}")
  return theta


def unpack(theta, like=None) -> tuple[np.ndarray, ...]:
  """E, A, B, alpha, beta, each shaped (*S, 1, ..., 1) to broadcast against `like`."""
  theta = _checked(theta)
  extra = () if like is None else (1,) * np.ndim(like)
  return tuple(theta[..., i].reshape(theta.shape[:-1] + extra) for i in range(5))


def gamma(theta, like=None) -> np.ndarray | float:
  """The nesting form's outer power, shaped like `unpack`'s values; 1.0 for the law."""
  theta = _checked(theta)
  if theta.shape[-1] == 5:
    return 1.0
  return theta[..., 5].reshape(theta.shape[:-1] + (() if like is None else (1,) * np.ndim(like)))


def loss(N, D, theta) -> np.ndarray:
  """L(N, D) for arrays N, D of one shape (*K): shape (*S, *K)."""
  N, D = np.broadcast_arrays(np.asarray(N, np.float64), np.asarray(D, np.float64))
  return _at(N, D, theta, N)


def exponents(theta) -> tuple[np.ndarray, np.ndarray]:
  """(a, b): N* ∝ C^a, D* ∝ C^b."""
  _, _, _, alpha, beta = unpack(theta)
  return beta / (alpha + beta), alpha / (alpha + beta)


def G(theta, like=None) -> np.ndarray:
  _, A, B, alpha, beta = unpack(theta, like)
  return (alpha * A / (beta * B))**(1.0 / (alpha + beta))


def optimum(C, theta) -> tuple[np.ndarray, np.ndarray]:
  """(N*(C), D*(C)), each of shape (*S, *K)."""
  C = np.asarray(C, np.float64)
  _, _, _, alpha, beta = unpack(theta, C)
  g = G(theta, C)
  a, b = beta / (alpha + beta), alpha / (alpha + beta)
  return g * (C / 6.0)**a, (C / 6.0)**b / g


def tokens_per_param(C, theta) -> np.ndarray:
  N, D = optimum(C, theta)
  return D / N


def optimal_loss(C, theta) -> np.ndarray:
  """L(N*(C), D*(C))."""
  C = np.asarray(C, np.float64)
  N, D = optimum(C, theta)
  return _at(N, D, theta, C)


def _at(N, D, theta, like) -> np.ndarray:
  """The loss at (N, D), theta broadcast against `like`; the law's sum in its own order, so
  its digits do not move with the nesting form beside it."""
  E, A, B, alpha, beta = unpack(theta, like)
  if _checked(theta).shape[-1] == 5:
    return E + A / N**alpha + B / D**beta
  return E + (A / N**alpha + B / D**beta)**gamma(theta, like)


def optimal_params_for_tokens(D, theta) -> np.ndarray:
  """N such that (N, D) is compute-optimal: N*(D) = G·(G·D)^(a/b)."""
  D = np.asarray(D, np.float64)
  _, _, _, alpha, beta = unpack(theta, D)
  g = G(theta, D)
  return g * (g * D)**(beta / alpha)


def budget_for_params(N, theta) -> np.ndarray:
  """C at which N is compute-optimal: C = 6·(N/G)^(1/a)."""
  N = np.asarray(N, np.float64)
  _, _, _, alpha, beta = unpack(theta, N)
  g = G(theta, N)
  return 6.0 * (N / g)**((alpha + beta) / beta)


def budget_for_tokens(D, theta) -> np.ndarray:
  """C at which D is compute-optimal: C = 6·(G·D)^(1/b)."""
  D = np.asarray(D, np.float64)
  _, _, _, alpha, beta = unpack(theta, D)
  g = G(theta, D)
  return 6.0 * (g * D)**((alpha + beta) / alpha)


def budget_for_loss(target: float, theta, lo: float = 1.0, hi: float = 1e40) -> float:
  """C at which the compute-optimal model reaches `target` loss (one law), or inf.

  L*(C) decreases monotonically towards E, so this is a root of a monotone function.
  """
  from scipy import optimize
  E = float(np.asarray(theta, np.float64)[0])
  if target <= E:
    return float("inf")
  f = lambda logC: float(optimal_loss(np.exp(logC), theta)) - target
  if f(np.log(hi)) > 0:
    return float("inf")
  if f(np.log(lo)) < 0:
    return lo
  return float(np.exp(optimize.brentq(f, np.log(lo), np.log(hi), xtol=1e-13, rtol=1e-14)))


def argmin_1d(f: Callable[[float], float], lo: float, hi: float,
              n_grid: int = 2001) -> tuple[float, bool]:
  """Global minimiser of a scalar function on [lo, hi]: a dense grid, then Brent.

  The grid protects against kinks and several local minima (the data-constrained loss is only
  piecewise smooth); bounded Brent between the best grid point's neighbours polishes it.
  Returns (x, at_edge) where at_edge says the minimum sits on the bracket's boundary.
  """
  from scipy import optimize
  x = np.linspace(lo, hi, n_grid)
  y = np.array([f(xi) for xi in x])
  i = int(np.nanargmin(y))
  left, right = x[max(i - 1, 0)], x[min(i + 1, n_grid - 1)]
  res = optimize.minimize_scalar(f, bounds=(left, right), method="bounded",
                                 options={"xatol": 1e-12 * max(1.0, abs(x[i]))})
  best = float(res.x) if res.fun <= y[i] else float(x[i])
  return best, i in (0, n_grid - 1)
