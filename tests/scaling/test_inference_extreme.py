"""The inference-aware optimum with exponents so steep that the reducible loss vanishes
beside E in float64 (it used to end in ZeroDivisionError or OverflowError)."""

import numpy as np
import pytest

from chinchax.scaling.plan import inference
from chinchax.scaling.numerics import optimum as opt


def brute_force(C, T, theta):
  """min N·(6D + 2T) on the iso-loss curve of the reducible loss alone (E never added,
  so nothing cancels), over a dense grid of log N."""
  _, A, B, alpha, beta = theta
  N0, D0 = (float(v) for v in opt.optimum(C, np.asarray(theta)))
  r = A / N0**alpha + B / D0**beta
  log_N = np.linspace(np.log(N0) - 3.0, np.log(N0) + 0.5, 400_001)
  left = r - A * np.exp(-alpha * log_N)  # what B/D^beta must be
  ok = left > 0
  log_D = (np.log(B) - np.log(left[ok])) / beta
  total = np.exp(log_N[ok]) * (6 * np.exp(log_D) + 2 * T)
  i = int(np.argmin(total))
  return float(np.exp(log_N[ok][i])), float(np.exp(log_D[i])), float(total[i])


@pytest.mark.parametrize("theta,C,T", [
    ((1.69, 406.4, 410.7, 3.0, 3.0), 1e24, 1e13),    # r ~ 1e-31: ℓ - E is 0 in float64
    ((1.69, 1e-3, 1e-3, 5.0, 5.0), 1e30, 1e16),
    ((1.69, 406.4, 410.7, 0.001, 0.001), 1e24, 1e13),  # (A/(s·r))^(1/alpha) overflows
])
def test_extreme_exponents_give_the_brute_force_optimum(theta, C, T):
  out = inference.optimum(C, T, theta)
  N, D, total = brute_force(C, T, theta)
  aware = out["inference_optimal"]
  assert np.isfinite([aware["N"], aware["D"], out["saving_fraction"]]).all()
  assert aware["N"] == pytest.approx(N, rel=1e-3)
  assert aware["D"] == pytest.approx(D, rel=1e-3)
  assert aware["total_flops"] <= total * (1 + 1e-6)
  assert out["saving_fraction"] >= -1e-9
