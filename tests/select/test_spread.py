"""scaling/select/spread.py: when the fit counts as poorly determined, the D-optimal design
against a brute-force log-determinant, and a replay of the smoke's adaptive study, where the
Gaussian update alone ended 3-4x wider than the smoke grid at a third of its FLOPs."""

import numpy as np
import pytest

from chinchax.scaling.select import spread
from tests.helpers import active_study

LAW = np.array([1.69, 406.4, 410.7, 0.34, 0.28])  # E, A, B, alpha, beta


def _log_loss(phi, N, D):
  """log L at phi = (log E, log A, log B, alpha, beta), written out here on its own."""
  return np.log(np.exp(phi[0]) + np.exp(phi[1]) * N**-phi[3] + np.exp(phi[2]) * D**-phi[4])


def _jacobian_fd(N, D):
  phi = np.array([np.log(LAW[0]), np.log(LAW[1]), np.log(LAW[2]), LAW[3], LAW[4]])
  cols = []
  for i in range(5):
    h = np.zeros(5)
    h[i] = 1e-6
    cols.append((_log_loss(phi + h, N, D) - _log_loss(phi - h, N, D)) / 2e-6)
  return np.stack(cols, axis=1)


def test_design_is_the_greedy_log_determinant_gain_per_flop():
  rng = np.random.default_rng(0)
  C_run = np.repeat(np.logspace(18, 20, 4), 3)
  N_run = np.exp(np.log(C_run) / 2 - 3.5 + rng.uniform(-1, 1, len(C_run)))
  D_run = C_run / (6 * N_run)
  C = np.repeat(np.logspace(18, 21, 6), 5)
  N = np.exp(np.log(C) / 2 - 3.5 + np.tile(np.linspace(-1.5, 1.5, 5), 6))
  D = C / (6 * N)
  cost = 6 * N * D
  picks = spread.design(LAW, N_run, D_run, N, D, cost, k=4)
  J_run, J = _jacobian_fd(N_run, D_run), _jacobian_fd(N, D)
  M = J_run.T @ J_run
  expect = []
  for _ in range(4):
    base = np.linalg.slogdet(M)[1]
    gain = np.array([np.linalg.slogdet(M + np.outer(j, j))[1] - base for j in J]) / cost
    gain[expect] = -np.inf
    expect.append(int(np.argmax(gain)))
    M = M + np.outer(J[expect[-1]], J[expect[-1]])
  assert picks == expect


def test_design_keeps_within_the_flops_left():
  N = np.array([1e8, 2e8, 4e8])
  D = np.array([2e9, 2e9, 2e9])
  cost = 6 * N * D
  picks = spread.design(LAW, N[:0], D[:0], N, D, cost, k=3, flops_left=cost[0] + cost[1])
  assert sum(cost[picks]) <= cost[0] + cost[1] and len(picks) <= 2


def test_problems_name_what_is_poorly_determined():
  rng = np.random.default_rng(1)
  q = 0.5 + 0.02 * rng.standard_normal(400)
  lo, hi = np.quantile(q, [0.05, 0.95])
  assert not spread.problems((), q, lo, hi, 0.9, "a")  # Gaussian, narrow, no warning
  assert spread.problems(("E=1e-9 ran off to 0: the irreducible loss is not identified",), q,
                         lo, hi, 0.9, "a") == ["the fit warns: E=1e-9 ran off to 0"]
  wide = 0.5 + 0.2 * rng.standard_normal(400)
  assert spread.problems((), wide, *np.quantile(wide, [0.05, 0.95]), 0.9, "a") == [
      "the interval is wider than 0.3"]
  assert not spread.problems((), wide, *np.quantile(wide, [0.05, 0.95]), 0.9, "N")  # 1.0
  # Two clusters: the percentile interval spans both, a normal's of the central sd does not.
  split = np.concatenate([0.4 + 0.005 * rng.standard_normal(180),
                          0.6 + 0.005 * rng.standard_normal(20)])
  got = spread.problems((), split, *np.quantile(split, [0.05, 0.95]), 0.9, "a")
  assert len(got) == 1 and "far from Gaussian" in got[0]


def test_on_the_smoke_replay_the_adaptive_study_is_about_as_narrow_as_the_grid():
  """The smoke's pool and a stand-in of its losses (tests/helpers/active_study.py), the study of
  smoke_adaptive (8 first cells, 4 a round, width 0.15, 5e12 FLOPs: a third of the grid's):
  a's interval from chinchax.fit on its cells against the smoke grid's. The Gaussian update
  alone (no spread phase, undertrained cells offered) gave 2.0x and 3.2x on these two seeds;
  spreading while poorly determined 0.6x and 2.2x."""
  ratios = []
  for seed in (0, 1):
    w = active_study.smoke_world(seed)
    chosen, _ = active_study.adaptive(w, 5e12, first=8, k=4, width=0.15, resamples=100)
    assert w.pool.cost[chosen].sum() <= 5e12 * (1 + 1e-9)
    grid = active_study.interval_a(w, active_study.smoke_grid(w))[1]
    got = active_study.interval_a(w, chosen)[1]
    ratios.append((got[1] - got[0]) / (grid[1] - grid[0]))
  assert np.mean(ratios) <= 1.8, ratios
  assert np.mean(w.pool.D[chosen] < w.pool.N[chosen]) == pytest.approx(0.0)  # D/N >= 1
