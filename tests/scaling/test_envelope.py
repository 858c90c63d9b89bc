"""Approach 1 recovers the optimum of a known law from loss curves or from final losses."""

import json
import math

import numpy as np
import pytest

from chinchax.scaling.envelope.fit import bootstrap_envelope, curves_of, fit_envelope
from chinchax.errors import UserError
from chinchax.scaling.runs.table import Curve, make_runs
from tests.helpers import synthetic_law

E, A, B, ALPHA, BETA = 1.69, 406.4, 410.7, 0.34, 0.28
A_TRUE, B_TRUE = BETA / (ALPHA + BETA), ALPHA / (ALPHA + BETA)
SIZES = np.geomspace(1e7, 1e10, 13)
BUDGETS = np.logspace(17, 21, 5)


def law(N, D):
  return synthetic_law.loss(N, D, (E, A, B, ALPHA, BETA))


def N_opt(C):
  return synthetic_law.N_opt(C, (E, A, B, ALPHA, BETA))


def sweep_with_curves(noise=0.0, seed=0, sizes=SIZES, budgets=BUDGETS):
  """An IsoFLOP sweep: at each budget the 9 sizes nearest N*, each run with a curve of 40
  evals over its last two decades of tokens. Runs end at their budget, so curves start and
  stop at different C, as in a real sweep."""
  rng = np.random.default_rng(seed)
  N, D, curves = [], [], []
  for C in budgets:
    k = int(np.argmin(np.abs(np.log(sizes / N_opt(C)))))
    for n in sizes[max(k - 4, 0):k + 5]:
      d_end = C / (6 * n)
      d = d_end * np.geomspace(1e-2, 1, 40)
      curves.append(Curve(f"run{len(N)}", float(n), d, 6 * n * d,
                          law(n, d) + noise * rng.standard_normal(len(d))))
      N.append(n)
      D.append(d_end)
  N, D = np.array(N), np.array(D)
  return make_runs(N, D, law(N, D), curves=curves, name=[c.name for c in curves])


def test_recovers_the_exponents_from_curves():
  fit = fit_envelope(sweep_with_curves())
  # Measured |a − β/(α+β)| ≈ 1e-4 (the interpolation between evals); 5e-3 bound.
  assert abs(fit.a - A_TRUE) < 5e-3
  assert abs(fit.b - B_TRUE) < 5e-3
  assert fit.a + fit.b == pytest.approx(1.0, abs=1e-12)  # D = C/(6N) along each curve
  # Each size is fitted at the centre of the C it wins; there N* is within a step (×1.78).
  assert np.all(np.abs(np.log(fit.N / N_opt(fit.C))) < 0.5 * math.log(SIZES[1] / SIZES[0]))
  assert len(fit.N) >= 6 and fit.n_curves == len(sweep_with_curves().curves)


def test_recovers_the_exponents_with_noise():
  fit = fit_envelope(sweep_with_curves(noise=0.001, seed=1))
  # Over 20 noise seeds the sd of a is ~6e-3 at this noise; 0.02 is over 3 sd.
  assert abs(fit.a - A_TRUE) < 0.02
  assert abs(fit.b - B_TRUE) < 0.02


def test_recovers_the_exponents_from_final_losses():
  # No curves: runs of one N at several D make the curve of that N.
  N = np.repeat(SIZES, 9)
  D = np.tile(np.geomspace(1e8, 1e12, 9), len(SIZES))
  runs = make_runs(N, D, law(N, D))
  assert len(curves_of(runs)) == len(SIZES)
  fit = fit_envelope(runs)
  assert abs(fit.a - A_TRUE) < 5e-3
  np.testing.assert_allclose(fit.D, fit.C / (6 * fit.N), rtol=1e-12)


def test_cut_steps_are_left_out():
  # Sizes spanning past the optimum at both ends: the end sizes win only where the data
  # stops, so they must not be fitted.
  N = np.repeat(np.geomspace(1e6, 1e11, 8), 17)
  D = np.tile(np.geomspace(1e8, 1e12, 17), 8)
  fit = fit_envelope(make_runs(N, D, law(N, D)))
  assert 1e6 not in fit.N and 1e11 not in fit.N
  assert abs(fit.a - A_TRUE) < 5e-3
  # A fit over the whole envelope (Hoffmann et al.'s raw grid points) is off by ~0.07 here.
  raw_a = np.polyfit(np.log(fit.envelope_C), np.log(fit.envelope_N), 1)[0]
  assert abs(raw_a - A_TRUE) > 0.03


def test_one_size_or_no_crossover_is_refused():
  N = np.repeat([1e8], 5)
  D = np.geomspace(1e9, 1e11, 5)
  with pytest.raises(UserError, match="Approach 1 needs at least two model sizes"):
    fit_envelope(make_runs(N, D, law(N, D)))
  N = np.repeat([1e8, 2e8, 4e8], 5)
  D = np.tile(np.geomspace(1e9, 1e11, 5), 3)
  with pytest.raises(UserError, match="found 1"):  # only the middle size is whole
    fit_envelope(make_runs(N, D, law(N, D)))
  single = make_runs([1e8, 2e8], [1e9, 1e9], [3.0, 2.9])  # one point per N: no curve
  with pytest.raises(UserError, match="needs loss curves"):
    fit_envelope(single)


def test_to_dict_is_json():
  fit = fit_envelope(sweep_with_curves())
  d = json.loads(json.dumps(fit.to_dict(), allow_nan=False))
  assert d["b"] == fit.b and d["points"]["C"] == fit.C.tolist()
  assert len(d["envelope"]["C"]) == len(fit.envelope_C) > len(fit.C)


def test_bootstrap_interval_contains_the_truth():
  runs = sweep_with_curves(noise=0.001, seed=1)
  samples = bootstrap_envelope(runs, n_resamples=200, seed=0, n_grid=500)
  assert len(samples["a"]) + samples["n_failed"] == 200
  assert samples["n_failed"] < 20
  for key, truth in (("a", A_TRUE), ("b", B_TRUE)):
    lo, hi = np.percentile(samples[key], [5, 95])
    assert lo < truth < hi, (key, lo, hi)
    assert hi - lo < 0.1
