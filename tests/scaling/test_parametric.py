"""Approach 3: the summed Huber objective, the paper grid, recovery, warnings, bad input.

Recovery is checked for both methods; that they reach the same optimum is in
test_parametric_vp.py."""

import warnings

import numpy as np
import pytest
import scipy.optimize
import scipy.special

from chinchax.scaling.parametric import huber
from chinchax.scaling.parametric import fit as parametric
from chinchax.errors import UserError

CHINCHILLA = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
OTHER = dict(E=2.1, A=120.0, B=900.0, alpha=0.30, beta=0.36)
# Every 9th of the paper's starts keeps the fast tier fast; all 4,500 run in
# test_parametric_vp.py (slow) and bench/fit_bench.py.
FEWER_STARTS = {"vp": {}, "multistart": {"starts": parametric.paper_grid()[::9]}}


def sweep(law, budgets=5, per=8, noise=0.0, seed=0):
  """IsoFLOP sweep: sizes 0.1x..10x the compute-optimal N at each budget, D = C / 6N."""
  E, A, B, alpha, beta = (law[k] for k in ("E", "A", "B", "alpha", "beta"))
  G = (alpha * A / (beta * B))**(1 / (alpha + beta))
  C = np.repeat(np.logspace(18, 21, budgets), per)
  N = G * (C / 6)**(beta / (alpha + beta)) * np.tile(np.logspace(-1, 1, per), budgets)
  D = C / (6 * N)
  L = E + A / N**alpha + B / D**beta
  return N, D, L * np.exp(noise * np.random.default_rng(seed).standard_normal(len(L)))


def reference_objective(theta, N, D, L, delta):
  """Float64 reference straight from the definition, with scipy's LSE and Huber."""
  a, b, e, alpha, beta = theta
  u = np.stack([a - alpha * np.log(N), b - beta * np.log(D), np.full(len(N), e)])
  r = scipy.special.logsumexp(u, axis=0) - np.log(L)
  return scipy.special.huber(delta, r).sum()


def test_paper_grid_is_the_papers_4500_starts():
  grid = parametric.paper_grid()
  assert grid.shape == (4500, 5)
  assert len(np.unique(grid, axis=0)) == 4500
  expected = [np.arange(0, 26, 5), np.arange(0, 26, 5), np.linspace(-1, 1, 5),
              np.linspace(0, 2, 5), np.linspace(0, 2, 5)]
  for k, values in enumerate(expected):
    np.testing.assert_allclose(np.unique(grid[:, k]), values)


def test_objective_is_the_sum_of_scipy_hubers():
  N, D, L = sweep(CHINCHILLA, noise=0.02)
  theta = np.array([6.0, 6.2, 0.5, 0.35, 0.3])
  for delta in (1e-3, 1e-1):
    got = parametric.huber_objective(theta, N, D, L, delta=delta)
    assert got == pytest.approx(reference_objective(theta, N, D, L, delta), rel=1e-12)
  once = parametric.huber_objective(theta, N, D, L)
  twice = parametric.huber_objective(theta, np.tile(N, 2), np.tile(D, 2), np.tile(L, 2))
  assert twice == pytest.approx(2 * once, rel=1e-12)
  weighted = parametric.huber_objective(theta, N, D, L, weights=np.full(len(N), 2.0))
  assert weighted == pytest.approx(2 * once, rel=1e-12)


def test_far_from_any_fit_the_objective_is_exact_and_silent():
  """The terms are exponentiated without a log-sum-exp shift; a start where they over- or
  underflow, or are all subnormal (exponents past 700), is shifted: the reference's value to
  1e-12, no warning."""
  N, D, L = sweep(CHINCHILLA, noise=0.02)
  thetas = [(-800.0, -800.0, -800.0, 0.3, 0.3), (900.0, 5.0, 0.5, 0.3, 0.3),
            (6.0, 6.2, 0.5, 0.35, 0.3), (6.0, 760.0, 0.5, 0.35, 0.3),
            (-740.0, -740.0, -745.0, 0.0, 0.0)]  # the last: every term a subnormal
  pb = huber.Problem.make(np.log(N), np.log(D), np.log(L), 1e-3)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    F, g, H = huber.evaluate(pb, pb.to_centered(np.array(thetas)), np.ones((1, len(N))))
  for theta, got in zip(thetas, F):
    assert got == pytest.approx(reference_objective(theta, N, D, L, 1e-3), rel=1e-12)
  assert np.all(np.isfinite(g)) and np.all(np.isfinite(H))


def test_the_batched_trust_region_step_is_eighs_step():
  """A large batch takes a Cholesky path for its Newton steps: every step must still be the
  one the eigendecomposition gives, for well-conditioned H, indefinite H, and a nearly singular
  H whose smallest eigenvalue is below eigh's threshold (1e-12 (|eig|_max + |g|)) while its
  Cholesky pivots are not, where a raw Newton step would leave a plateau the wrong way."""
  rng = np.random.default_rng(0)
  S = 600  # above the batch size that takes the Cholesky path
  Q = np.linalg.qr(rng.standard_normal((S, 5, 5)))[0]
  eig = rng.uniform(0.5, 4.0, (S, 5))
  eig[200:400, 0] = -rng.uniform(0.1, 2.0, 200)  # indefinite
  eig[400:, 0] = 1e-10  # nearly singular: below 1e-12 (4 + |g|) for |g| ~ 1e3
  H = np.einsum("sij,sj,skj->sik", Q, eig, Q)
  g_in_Q = rng.standard_normal((S, 5))
  g_in_Q[400:] *= 1e3
  g_in_Q[400:, 0] = 1e-9  # Newton's step along the near-null vector: 10
  g = np.einsum("sij,sj->si", Q, g_in_Q)
  radius = np.where(np.arange(S) < 400, rng.uniform(0.05, 3.0, S), 1e3)
  # The reference, by its definition: the Newton step where eig_min clears the threshold and
  # the step fits; else -(H + mu I)^-1 g with mu >= max(0, -eig_min) + 1e-12 scale (the
  # floor that keeps a singular H solvable) and |s(mu)| = radius when it can be, found here
  # by bisection (the code solves it by Newton's method on 1/|s|).
  w, V = np.linalg.eigh(H)
  gq = np.einsum("sji,sj->si", V, g)
  scale = np.abs(w).max(1) + np.linalg.norm(g, axis=1)
  newton = (w[:, 0] > 1e-12 * scale) & (np.sum(gq**2 / w**2, 1) <= radius**2)
  lo = np.where(newton, 0.0, np.maximum(0.0, -w[:, 0]) + 1e-12 * scale)
  hi = lo + np.linalg.norm(g, axis=1) / radius + np.abs(w).max(1) + 1.0
  for _ in range(200):
    mid = (lo + hi) / 2
    long = np.sum(gq**2 / (w + mid[:, None])**2, 1) > radius**2
    lo, hi = np.where(long, mid, lo), np.where(long, hi, mid)
  mu = np.where(newton, 0.0, np.where(np.sum(gq**2 / (w + lo[:, None])**2, 1) <= radius**2,
                                      lo, hi))
  expected = -np.einsum("sij,sj->si", V, gq / (w + mu[:, None]))
  step, _ = huber._trust_region_step(g, H, radius)
  np.testing.assert_allclose(step, expected, rtol=1e-6, atol=1e-6 * radius.max())


def test_gradient_and_hessian_match_finite_differences():
  N, D, L = sweep(CHINCHILLA, noise=0.02)
  pb = huber.Problem.make(np.log(N), np.log(D), np.log(L), 0.05)
  th = pb.to_centered(np.array([[6.0, 6.2, 0.5, 0.35, 0.3], [4.0, 8.0, 0.2, 0.2, 0.5]]))
  w = np.ones((1, len(N)))
  _, g, H = huber.evaluate(pb, th, w)
  eps = 1e-6
  for k in range(5):
    dth = np.zeros(5)
    dth[k] = eps
    fp, gp = huber.evaluate(pb, th + dth, w, order=1)
    fm, gm = huber.evaluate(pb, th - dth, w, order=1)
    np.testing.assert_allclose(g[:, k], (fp - fm) / (2 * eps), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(H[:, :, k], (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("method", parametric.METHODS)
@pytest.mark.parametrize("law", [CHINCHILLA, OTHER])
def test_noise_free_data_is_recovered_exactly(law, method):
  fit = parametric.fit_parametric(*sweep(law), method=method, **FEWER_STARTS[method])
  assert fit.method == method
  for k in ("E", "A", "B", "alpha", "beta"):
    assert getattr(fit, k) == pytest.approx(law[k], rel=1e-6), k
  assert fit.objective < 1e-20
  assert fit.n_at_best > 0.1 * fit.n_starts
  assert fit.warnings == ()


@pytest.mark.parametrize("method", parametric.METHODS)
@pytest.mark.parametrize("law", [CHINCHILLA, OTHER])
def test_noisy_data_recovers_the_law(law, method):
  N, D, L = sweep(law, noise=0.002, seed=1)
  fit = parametric.fit_parametric(N, D, L, method=method, **FEWER_STARTS[method])
  # Tolerances: a few times the spread over seeds at this noise (E, exponents are well
  # determined by 40 points; A and B trade off against their exponents).
  assert fit.E == pytest.approx(law["E"], rel=0.02)
  assert fit.alpha == pytest.approx(law["alpha"], rel=0.06)
  assert fit.beta == pytest.approx(law["beta"], rel=0.06)
  assert fit.A == pytest.approx(law["A"], rel=0.4)
  assert fit.B == pytest.approx(law["B"], rel=0.4)
  a_true = law["beta"] / (law["alpha"] + law["beta"])
  assert fit.a == pytest.approx(a_true, abs=0.02)
  assert fit.b == pytest.approx(1 - a_true, abs=0.02)
  np.testing.assert_allclose(fit.predict(N, D), L, rtol=0.01)
  np.testing.assert_allclose(fit.log_theta(), [np.log(fit.A), np.log(fit.B), np.log(fit.E),
                                               fit.alpha, fit.beta])
  assert fit.objective == pytest.approx(
      reference_objective(fit.log_theta(), N, D, L, fit.delta), rel=1e-10)


def test_same_minimum_as_scipy_lbfgsb_from_the_same_starts():
  N, D, L = sweep(CHINCHILLA, noise=0.01, seed=3)
  starts = parametric.paper_grid()[::450]  # 10 starts keep the scipy loop fast.
  delta = parametric.DEFAULT_DELTA
  best = min(
      scipy.optimize.minimize(reference_objective, th0, args=(N, D, L, delta),
                              method="L-BFGS-B", options=dict(ftol=1e-14, gtol=1e-11)).fun
      for th0 in starts)
  fit = parametric.fit_parametric(N, D, L, starts=starts, method="multistart")
  assert fit.n_starts == len(starts)
  assert fit.objective == pytest.approx(best, rel=1e-6)
  assert fit.objective <= best * (1 + 1e-9)


def test_warns_when_a_term_is_absent_from_the_data():
  N, D, _ = sweep(CHINCHILLA)
  no_data_term = 1.69 + 406.4 / N**0.34
  fit = parametric.fit_parametric(N, D, no_data_term)
  assert any("beta" in w or "B/D^beta" in w for w in fit.warnings), fit.warnings


def test_warns_when_E_runs_off_to_zero():
  N, D, _ = sweep(CHINCHILLA)
  no_floor = 406.4 / N**0.34 + 410.7 / D**0.28
  fit = parametric.fit_parametric(N, D, no_floor)
  assert fit.E < 1e-2
  assert any("E=" in w and "ran off to 0" in w for w in fit.warnings), fit.warnings


def test_warning_rules():
  loss = np.array([2.0, 2.5, 3.0])
  N, D = np.array([1e8, 1e9, 1e10]), np.array([1e9, 1e10, 1e11])
  good = np.array([np.log(406.4), np.log(410.7), np.log(1.69), 0.34, 0.28])
  assert parametric._warnings(good, N, D, loss, 4000, 4500, True) == ()
  few = parametric._warnings(good, N, D, loss, 3, 4500, True)
  assert len(few) == 1 and "only 3 of 4500" in few[0]
  big_alpha = good.copy()
  big_alpha[3] = 4.0
  assert any("implausibly large" in w
             for w in parametric._warnings(big_alpha, N, D, loss, 4000, 4500, True))
  high_E = good.copy()
  high_E[2] = np.log(2.5)
  assert any("not below the smallest observed loss" in w
             for w in parametric._warnings(high_E, N, D, loss, 4000, 4500, True))


@pytest.mark.parametrize("column, value, row", [
    ("N", np.nan, 3), ("D", np.inf, 0), ("loss", -1.0, 7), ("N", 0.0, 2)])
def test_bad_values_are_refused_naming_the_row(column, value, row):
  data = dict(zip(("N", "D", "loss"), sweep(CHINCHILLA)))
  data[column] = data[column].copy()
  data[column][row] = value
  with pytest.raises(UserError, match=f"row {row} has {column}="):
    parametric.fit_parametric(data["N"], data["D"], data["loss"])
  with pytest.raises(UserError, match=f"row {row}"):
    parametric.huber_objective(np.zeros(5), data["N"], data["D"], data["loss"])


def test_bad_shapes_are_refused():
  N, D, L = sweep(CHINCHILLA)
  with pytest.raises(UserError, match="N has 40 rows but loss has 39"):
    parametric.fit_parametric(N, D, L[:-1])
  with pytest.raises(UserError, match="4 points cannot determine the 5 parameters"):
    parametric.fit_parametric(N[:4], D[:4], L[:4])
  with pytest.raises(UserError, match="starts must have shape"):
    parametric.fit_parametric(N, D, L, starts=np.zeros((3, 4)), method="multistart")
  with pytest.raises(UserError, match="starts are for method 'multistart'"):
    parametric.fit_parametric(N, D, L, starts=np.zeros((3, 5)))
  with pytest.raises(UserError, match="unknown method 'lbfgs'"):
    parametric.fit_parametric(N, D, L, method="lbfgs")
  with pytest.raises(UserError, match="weight"):
    parametric.fit_parametric(N, D, L, weights=-np.ones(len(N)))
