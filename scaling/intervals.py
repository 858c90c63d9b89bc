"""Percentile intervals at any level from bootstrap samples.

Two kinds of samples come out of the bootstraps:

* (S, 5) rows [E, A, B, alpha, beta] of the law (Approach 3, `scaling.parametric.bootstrap_parametric`):
  `law_intervals` gives intervals of each parameter, of a and b, of N*(C) and D*(C) at the
  budgets asked for (`scaling.optimum`, C = 6ND), and of the predicted loss L(N, D);
* {"a", "b", "log_kN", "log_kD"} arrays of the power laws N* = k_N·C^a, D* = k_D·C^b
  (Approaches 1 and 2): `power_law_intervals` gives a, b, N*(C) and D*(C).

An interval at level q is [quantile (1 − q)/2, quantile (1 + q)/2] of the finite samples.
A law row that is no law (a value not finite, or A, B, alpha or beta not positive: a refit
that ran off) is dropped and counted, as law.json does. Every interval is a [lo, hi] list,
one per budget or per (N, D) where those are arrays.
"""

from collections.abc import Mapping

import numpy as np

from chinchax.scaling import optimum
from chinchax.errors import UserError

DEFAULT_LEVEL = 0.9


def check_level(level) -> float:
  """`level` as a float strictly between 0 and 1, or UserError."""
  try:
    q = float(level)
  except (TypeError, ValueError):
    raise UserError(f"interval level must be a number between 0 and 1, got {level!r}") from None
  if not 0.0 < q < 1.0:
    raise UserError(f"interval level must be strictly between 0 and 1 (0.9 for 90%), "
                    f"got {level!r}")
  return q


def interval(samples_S, level: float = DEFAULT_LEVEL) -> list[float] | None:
  """[lo, hi] of the finite samples at `level`; None when there are none."""
  q = check_level(level)
  x = np.asarray(samples_S, np.float64).ravel()
  x = x[np.isfinite(x)]
  if not x.size:
    return None
  lo, hi = np.quantile(x, [(1 - q) / 2, (1 + q) / 2])
  return [float(lo), float(hi)]


def _bands(values_SxK: np.ndarray, q: float, scalar: bool):
  """Intervals of each column of a (S, K) array: one [lo, hi], or a list of them."""
  rows = [interval(values_SxK[:, k], q) for k in range(values_SxK.shape[1])]
  return rows[0] if scalar else rows


def _as_columns(x) -> tuple[np.ndarray, bool]:
  x = np.asarray(x, np.float64)
  return x.reshape(-1), x.ndim == 0


def valid_law_rows(samples_Sx5) -> np.ndarray:
  """Mask of rows that are a law: finite, A, B, alpha, beta > 0."""
  s = np.asarray(samples_Sx5, np.float64)
  return np.all(np.isfinite(s), axis=1) & np.all(s[:, 1:] > 0, axis=1)


def law_intervals(samples_Sx5, level: float = DEFAULT_LEVEL, *, C=None, N=None,
                  D=None) -> dict:
  """Intervals of the law's parameters, a, b and, where asked, N*(C), D*(C), L(N, D)."""
  q = check_level(level)
  s = np.asarray(samples_Sx5, np.float64)
  if s.ndim != 2 or s.shape[1] != 5:
    raise ValueError(f"samples must have shape (S, 5) [E, A, B, alpha, beta], got {s.shape}")
  keep = valid_law_rows(s)
  s = s[keep]
  out = {"level": q, "n": int(len(s)), "dropped": int((~keep).sum())}
  for i, name in enumerate(optimum.PARAM_NAMES):
    out[name] = interval(s[:, i], q)
  a_S, b_S = optimum.exponents(s)
  out["a"], out["b"] = interval(a_S, q), interval(b_S, q)
  if C is not None:
    C_K, scalar = _as_columns(C)
    with np.errstate(all="ignore"):
      N_SxK, D_SxK = optimum.optimum(C_K, s)
    out["N_star"], out["D_star"] = _bands(N_SxK, q, scalar), _bands(D_SxK, q, scalar)
  if N is not None or D is not None:
    if N is None or D is None:
      raise ValueError("the loss interval needs both N and D")
    N_K, scalar = _as_columns(N)
    D_K, _ = _as_columns(D)
    N_K, D_K = np.broadcast_arrays(N_K, D_K)
    with np.errstate(all="ignore"):
      out["loss"] = _bands(optimum.loss(N_K, D_K, s), q, scalar and N_K.size == 1)
  return out


def power_law_intervals(samples: Mapping, level: float = DEFAULT_LEVEL, *, C=None) -> dict:
  """Intervals of a, b and, at budgets C, of N*(C) = k_N·C^a and D*(C) = k_D·C^b."""
  q = check_level(level)
  cols = {k: np.asarray(samples[k], np.float64) for k in ("a", "b", "log_kN", "log_kD")}
  out = {"level": q, "n": int(len(cols["a"])), "a": interval(cols["a"], q),
         "b": interval(cols["b"], q)}
  if C is not None:
    C_K, scalar = _as_columns(C)
    log_C = np.log(C_K)[None]
    with np.errstate(all="ignore"):
      N_SxK = np.exp(cols["log_kN"][:, None] + cols["a"][:, None] * log_C)
      D_SxK = np.exp(cols["log_kD"][:, None] + cols["b"][:, None] * log_C)
    out["N_star"], out["D_star"] = _bands(N_SxK, q, scalar), _bands(D_SxK, q, scalar)
  return out
