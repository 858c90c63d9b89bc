"""The compute-optimal allocation as power laws: N*(C) = k_N·C^a, D*(C) = k_D·C^b.

Approaches 1 and 2 give these four numbers directly; Approach 3's law implies them
(scaling.numerics.optimum: a = beta/(alpha+beta), k_N = G/6^a, k_D = 1/(G·6^b)). A vector `P` has
shape (*S, 4) in the order [a, b, log_kN, log_kD] (one law, or S bootstrap draws); budgets C
have shape (*K); every function returns shape (*S, *K), like scaling.numerics.optimum.
"""

import numpy as np

from chinchax.scaling.numerics import optimum as opt

NAMES: tuple[str, ...] = ("a", "b", "log_kN", "log_kD")


def from_theta(theta) -> np.ndarray:
  """[a, b, log_kN, log_kD] of the law(s) theta = [E, A, B, alpha, beta], shape (*S, 4)."""
  theta = np.asarray(theta, np.float64)
  a, b = opt.exponents(theta)
  with np.errstate(all="ignore"):  # a degenerate bootstrap row gives inf/nan: dropped later
    log_G = np.log(opt.G(theta))
  return np.stack([a, b, log_G - a * np.log(6.0), -log_G - b * np.log(6.0)], axis=-1)


def at(C, exponent, log_k):
  """k·C^exponent, computed as exp(log k + exponent·log C): N*(C) from (a, log_kN), D*(C)
  from (b, log_kD). The one place the power law is evaluated, so every approach, table and
  figure gives the same digits."""
  return np.exp(log_k + exponent * np.log(C))


def _unpack(P, like):
  P = np.asarray(P, np.float64)
  if P.shape[-1:] != (4,):
    raise ValueError(f"P must end in 4 values {NAMES}, got shape {P.shape}")
  extra = (1,) * np.ndim(like)
  return tuple(P[..., i].reshape(P.shape[:-1] + extra) for i in range(4))


def optimum(C, P) -> tuple[np.ndarray, np.ndarray]:
  """(N*(C), D*(C)), each of shape (*S, *K)."""
  C = np.asarray(C, np.float64)
  a, b, log_kN, log_kD = _unpack(P, C)
  return at(C, a, log_kN), at(C, b, log_kD)


def budget_for_params(N, P) -> np.ndarray:
  """C at which N is compute-optimal."""
  log_N = np.log(np.asarray(N, np.float64))
  a, _, log_kN, _ = _unpack(P, log_N)
  return np.exp((log_N - log_kN) / a)


def budget_for_tokens(D, P) -> np.ndarray:
  """C at which D is compute-optimal."""
  log_D = np.log(np.asarray(D, np.float64))
  _, b, _, log_kD = _unpack(P, log_D)
  return np.exp((log_D - log_kD) / b)
