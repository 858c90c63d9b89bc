"""dc_fit.fit_data_constrained recovers R_D*, R_N* from synthetic runs of known values."""

import numpy as np
import pytest

from chinchax.scaling.constrained import law as dc
from chinchax.scaling.constrained import fit as dc_fit
from chinchax.errors import UserError

THETA = np.array([1.69, 406.4, 410.7, 0.34, 0.28])  # Hoffmann et al. 2022


def synthetic(R_D, R_N, noise=0.0):
  rng = np.random.default_rng(0)
  N, D, U = [], [], []
  for n in np.logspace(7, 9, 5):
    for u in (3e8, 3e9):
      for epochs in (0.5, 1, 2, 4, 8, 16, 40):
        N.append(n), D.append(epochs * u), U.append(u)
  N, D, U = map(np.array, (N, D, U))
  loss = dc.loss(N, D, U, THETA, R_D, R_N) * np.exp(noise * rng.standard_normal(len(N)))
  return N, D, U, loss


@pytest.mark.parametrize("R_D, R_N", [(15.4, 5.3), (4.0, 20.0)])
def test_recovers_known_decay_constants(R_D, R_N):
  fit = dc_fit.fit_data_constrained(*synthetic(R_D, R_N), THETA)
  assert fit["R_D_star"] == pytest.approx(R_D, rel=1e-3)
  assert fit["R_N_star"] == pytest.approx(R_N, rel=1e-3)


def test_noisy_runs_still_close():
  fit = dc_fit.fit_data_constrained(*synthetic(15.4, 5.3, noise=2e-3), THETA)
  assert fit["R_D_star"] == pytest.approx(15.4, rel=0.25)
  assert fit["R_N_star"] == pytest.approx(5.3, rel=0.5)


def test_refuses_runs_without_repeats():
  N, D, U, loss = synthetic(15.4, 5.3)
  keep = D <= U
  with pytest.raises(UserError, match="repeats"):
    dc_fit.fit_data_constrained(N[keep], D[keep], U[keep], loss[keep], THETA)
