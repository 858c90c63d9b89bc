"""Approach 2's profile fit is unbiased where the parabola is not; diagnostics; coverage.

Sweeps of known laws (tests/scaling/synthetic.py): 5 budgets 1e18..1e22, sizes over 4x
either side of a centre that is the optimum (centred) or moves to 3x it across the budgets
(drifting), noise-free or with Gaussian noise on the loss.
"""

import math
import warnings

import numpy as np
import pytest

from chinchax.scaling.isoflop import fit as isoflop
from chinchax.scaling.isoflop import bootstrap as isoflop_bootstrap
from chinchax.scaling.isoflop import diagnostics as isoflop_diagnostics
from tests.scaling import synthetic

LAWS = {name: synthetic.law(*ab) for name, ab in synthetic.EXPONENTS.items()}


def _fit(runs, method="vp"):
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # no budget is dropped in these sweeps
    return isoflop.fit_isoflop(runs, method=method)


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("drift", [1.0, 3.0])
@pytest.mark.parametrize("name", sorted(LAWS))
def test_default_is_exact_on_noise_free_sweeps(name, drift, n):
  p = LAWS[name]
  fit = _fit(synthetic.isoflop_runs(p, n=n, drift=drift))
  assert abs(fit.a - p["a"]) < 1e-6 and abs(fit.b - p["b"]) < 1e-6
  np.testing.assert_allclose(fit.N_opt, synthetic.N_opt(p, synthetic.BUDGETS), rtol=1e-6)
  np.testing.assert_allclose([fit.exponents["alpha"], fit.exponents["beta"]],
                             [p["alpha"], p["beta"]], rtol=1e-6)


@pytest.mark.parametrize("name", ["alpha<beta", "alpha>beta"])
def test_the_parabola_is_biased_on_a_drifting_grid(name):
  p = LAWS[name]
  runs = synthetic.isoflop_runs(p, n=5, drift=3.0)
  parabola = _fit(runs, "parabola")
  assert abs(parabola.a - p["a"]) > 0.01  # the bias the default removes
  assert abs(_fit(runs).a - p["a"]) < 1e-6
  # Centred, the parabola's per-budget error is the same at every budget and cancels in a.
  centred = _fit(synthetic.isoflop_runs(p, n=5, drift=1.0), "parabola")
  assert abs(centred.a - p["a"]) < 1e-3


@pytest.mark.parametrize("name", sorted(LAWS))
def test_default_is_unbiased_with_noise(name):
  p = LAWS[name]
  a = {"vp": [], "parabola": []}
  for seed in range(20):
    runs = synthetic.isoflop_runs(p, n=5, drift=3.0, noise=0.002, seed=seed)
    for method in a:
      a[method].append(isoflop.fit_isoflop(runs, method=method).a)
  err = {m: np.mean(v) - p["a"] for m, v in a.items()}
  se = np.std(a["vp"]) / math.sqrt(20)
  assert abs(err["vp"]) < max(3 * se, 1e-3), (err, se)
  if name in ("alpha<beta", "alpha>beta"):
    assert abs(err["parabola"]) > 0.01, err


def test_flops_per_token_that_grow_faster_than_N():
  # C = f(N)·D with f = 6·N^1.1: along a budget D = C/(6 N^1.1), and the minimum of
  # A N^-alpha + B D^-beta is N*^(alpha + 1.1 beta) = alpha A (C/6)^beta / (1.1 beta B).
  p = LAWS["alpha>beta"]
  N = synthetic.sizes(p, n=7, spread=10.0)
  C = np.repeat(synthetic.BUDGETS, 7)
  D = C / (6 * N**1.1)
  fit = _fit(synthetic.make_runs(N, D, synthetic.loss(p, N, D), C=C, budget=C,
                                 flops="chinchilla"))
  al, be = p["alpha"], p["beta"]
  N_true = (al * p["A"] * (synthetic.BUDGETS / 6)**be / (1.1 * be * p["B"]))**(1 / (al + 1.1 * be))
  np.testing.assert_allclose(fit.N_opt, N_true, rtol=1e-6)
  np.testing.assert_allclose(fit.D_opt, synthetic.BUDGETS / (6 * N_true**1.1), rtol=1e-6)
  assert fit.a == pytest.approx(be / (al + 1.1 * be), abs=1e-6)


def _true_profile(p, C, N):
  return synthetic.loss(p, N, C / (6 * N))


def test_diagnostics_measure_the_grid_and_name_the_biased_budgets():
  p = LAWS["alpha>beta"]
  runs = synthetic.isoflop_runs(p, n=5, drift=3.0)
  fit = _fit(runs, "parabola")
  centre = 3.0**(np.arange(5) / 4)
  N_true = synthetic.N_opt(p, synthetic.BUDGETS)
  for k, (d, C) in enumerate(zip(fit.diagnostics, synthetic.BUDGETS)):
    assert d["C"] == pytest.approx(C, rel=1e-12) and d["n_sizes"] == 5
    assert d["width_decades"] == pytest.approx(math.log10(16), rel=1e-12)
    # N* sits at log(4/centre) / log(16) of the log range [centre·N*/4, centre·4N*].
    assert d["off_centre"] == pytest.approx(math.log(4 / centre[k]) / math.log(16), abs=1e-6)
    assert d["N_star_profile"] == pytest.approx(N_true[k], rel=1e-6)
    # Noise-free, the parabola's bias on the fitted profile is its error on the data.
    assert d["parabola_bias"] == pytest.approx(fit.N_opt[k] / N_true[k] - 1, abs=1e-6)
    # Asymmetry from the true profile, independently: the rises at ±h from N*.
    h = math.log(16) / 2
    up, down = (_true_profile(p, C, N_true[k] * math.exp(s * h))
                - _true_profile(p, C, N_true[k]) for s in (1, -1))
    assert d["asymmetry"] == pytest.approx((up - down) / (up + down), abs=1e-6)
    assert d["asymmetry"] < 0  # alpha > beta: the loss rises faster toward small N
  biased = [d for d in fit.diagnostics if abs(d["parabola_bias"]) > isoflop_diagnostics.BIAS_WARN]
  grid_warnings = [w for w in fit.warnings if "a parabola in log N places N*" in w]
  assert biased and len(grid_warnings) == len(biased)
  for d, w in zip(biased, grid_warnings):
    e = math.floor(math.log10(d["C"]))  # 3.98e18, as a person writes it (no "+")
    m = f"{d['C'] / 10**e:.3g}"
    m, e = ("1", e + 1) if m == "10" else (m, e)
    assert f"budget C={m}e{e}:" in w
    assert ("high" if d["parabola_bias"] > 0 else "low") in w
    assert f"by {abs(d['parabola_bias']):.1%}" in w and "method 'vp' removes" in w


def test_no_grid_warning_for_a_symmetric_law_on_centred_grids():
  fit = _fit(synthetic.isoflop_runs(LAWS["symmetric"], n=5, drift=1.0))
  assert fit.warnings == ()
  for d in fit.diagnostics:
    assert d["off_centre"] == pytest.approx(0.5, abs=1e-6)
    assert d["asymmetry"] == pytest.approx(0.0, abs=1e-9)
    assert abs(d["parabola_bias"]) < 1e-6


def test_free_levels_absorb_a_budget_wide_offset():
  # One budget's losses all shifted by 0.02 (e.g. its runs used another tokenizer build):
  # free levels leave N* untouched; a shared level must bend the profile to follow it.
  p = LAWS["alpha>beta"]
  runs = synthetic.isoflop_runs(p, n=5, drift=3.0)
  loss = runs.loss + 0.02 * (runs.budget == synthetic.BUDGETS[2])
  shifted = synthetic.make_runs(runs.N, runs.D, loss, budget=runs.budget)
  levels = _fit(shifted, "vp_levels")
  np.testing.assert_allclose(levels.N_opt, synthetic.N_opt(p, synthetic.BUDGETS), rtol=1e-6)
  assert levels.exponents["levels"] == "per_budget"
  shared = isoflop.fit_isoflop(shifted, method="vp")
  assert np.max(np.abs(shared.N_opt / synthetic.N_opt(p, synthetic.BUDGETS) - 1)) > 1e-3


def test_warns_when_the_sizes_do_not_determine_the_profile():
  # 3 sizes over 1.5x either side, 1% noise: the loss barely curves, alpha runs to its bound.
  runs = synthetic.isoflop_runs(LAWS["chinchilla"], n=3, spread=1.5, noise=0.01, seed=1)
  with pytest.warns(UserWarning, match="its lowest loss is at its smallest size"):
    isoflop.fit_isoflop(runs)
  # The budgets whose loss curves up at all (parabola opening upward): the joint fit of
  # these runs to the alpha bound.
  convex = np.zeros(len(runs), bool)
  for C in synthetic.BUDGETS:
    sel = runs.budget == C
    convex[sel] = np.polyfit(np.log(runs.N[sel]), runs.loss[sel], 2)[0] > 0
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fit = isoflop.fit_isoflop(runs.subset(convex), method="vp")
  assert any("alpha=0.01 sits at the end of its search range" in w for w in fit.warnings)
  assert not any("sits at the end" in w for w in _fit(synthetic.isoflop_runs(
      LAWS["chinchilla"], n=3, noise=0.002, seed=1)).warnings)


@pytest.mark.slow
def test_intervals_cover_the_truth_at_their_level():
  """90% intervals of a over 200 noisy sweeps of a drifting grid with 3 sizes per budget
  (the hardest case: 6 residual degrees of freedom) hold the truth 85-95% of the time."""
  p = LAWS["alpha>beta"]
  covered = 0
  for seed in range(200):
    runs = synthetic.isoflop_runs(p, n=3, drift=3.0, noise=0.005, seed=1000 + seed)
    a = isoflop_bootstrap.bootstrap_isoflop(runs, n_resamples=400, seed=seed)["a"]
    lo, hi = np.percentile(a, [5, 95])
    covered += lo < p["a"] < hi
  assert 170 <= covered <= 190, covered
