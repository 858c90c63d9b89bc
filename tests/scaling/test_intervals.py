"""Intervals at any level from bootstrap samples; approaches that disagree are named."""

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.scaling import caveats, intervals

THETA = np.array([1.69, 406.4, 410.7, 0.34, 0.28])


def _law_samples(n=2000, seed=0):
  rng = np.random.default_rng(seed)
  return THETA * np.exp(0.02 * rng.standard_normal((n, 5)))


def test_interval_is_the_central_quantile_range_at_any_level():
  x = np.arange(1001, dtype=np.float64)  # quantile q of 0..1000 is 1000·q exactly
  assert intervals.interval(x, 0.9) == pytest.approx([50.0, 950.0])
  assert intervals.interval(x, 0.5) == pytest.approx([250.0, 750.0])
  assert intervals.interval(np.append(x, [np.nan, np.inf]), 0.8) == pytest.approx([100, 900])
  assert intervals.interval([np.nan], 0.9) is None
  for bad in (0, 1, 1.5, -0.1, "ninety"):
    with pytest.raises(UserError, match="level"):
      intervals.interval(x, bad)


def test_law_intervals_match_the_samples_pushed_through_the_law():
  s = _law_samples()
  C, N, D = np.array([1e21, 1e24]), 7e10, 1.4e12
  out = intervals.law_intervals(s, 0.8, C=C, N=N, D=D)
  assert out["level"] == 0.8 and out["n"] == 2000 and out["dropped"] == 0
  q = [10, 90]
  np.testing.assert_allclose(out["alpha"], np.percentile(s[:, 3], q))
  np.testing.assert_allclose(out["a"], np.percentile(s[:, 4] / (s[:, 3] + s[:, 4]), q))
  # N*(C), D*(C) and L(N, D) per sample in closed form (Hoffmann et al. eq. 4), not optimum.py.
  E, A, B, alpha, beta = s.T
  G = (alpha * A / (beta * B))**(1 / (alpha + beta))
  for k, c in enumerate(C):
    np.testing.assert_allclose(out["N_star"][k],
                               np.percentile(G * (c / 6)**(beta / (alpha + beta)), q))
    np.testing.assert_allclose(out["D_star"][k],
                               np.percentile((c / 6)**(alpha / (alpha + beta)) / G, q))
  np.testing.assert_allclose(out["loss"], np.percentile(E + A / N**alpha + B / D**beta, q))
  wider = intervals.law_intervals(s, 0.99, C=1e21)
  assert wider["N_star"][0] < out["N_star"][0][0] and wider["N_star"][1] > out["N_star"][0][1]


def test_law_intervals_drop_rows_that_are_no_law():
  s = _law_samples(100)
  s[3, 3] = -0.1  # alpha < 0
  s[7, 1] = np.inf
  out = intervals.law_intervals(s, 0.9)
  assert out["n"] == 98 and out["dropped"] == 2
  np.testing.assert_allclose(out["alpha"], np.percentile(np.delete(s[:, 3], [3, 7]), [5, 95]))


def test_power_law_intervals_of_the_optimum():
  rng = np.random.default_rng(1)
  samples = {"a": 0.5 + 0.01 * rng.standard_normal(500), "b": 0.5 + 0.01 * rng.standard_normal(500),
             "log_kN": -1.0 + 0.1 * rng.standard_normal(500),
             "log_kD": -0.8 + 0.1 * rng.standard_normal(500)}
  out = intervals.power_law_intervals(samples, 0.9, C=1e22)
  np.testing.assert_allclose(out["a"], np.percentile(samples["a"], [5, 95]))
  N = np.exp(samples["log_kN"] + samples["a"] * np.log(1e22))
  np.testing.assert_allclose(out["N_star"], np.percentile(N, [5, 95]))
  assert "loss" not in out


def _entry(a, lo, hi, **extra):
  return {"a": a, "b": 1 - a, "ci": {"a": [lo, hi], "b": [1 - hi, 1 - lo]}, **extra}


def test_agreement_is_quiet_when_intervals_overlap():
  entries = {"2": _entry(0.45, 0.43, 0.47), "3": _entry(0.46, 0.44, 0.48, alpha=0.34, beta=0.28)}
  assert caveats.agreement(entries) == []
  entries["1"] = {"a": 0.2, "b": 0.8}  # no interval: not compared
  assert caveats.agreement(entries) == []


def test_agreement_names_both_values_and_the_likely_cause():
  diag = [{"C": 1e21, "off_centre": 0.1, "parabola_bias": 0.12},
          {"C": 1e22, "off_centre": 0.5, "parabola_bias": 0.01}]
  entries = {"2": _entry(0.452, 0.44, 0.46, method="parabola", diagnostics=diag),
             "3": _entry(0.353, 0.34, 0.366, alpha=0.7, beta=0.38)}
  out = caveats.agreement(entries)
  assert len(out) == 2  # a and b
  assert out[0].startswith("Approaches 2 and 3 disagree on a: 0.452 [0.440, 0.460] vs 0.353 "
                           "[0.340, 0.366]")
  assert "Approaches 2 and 3 disagree on b" in out[1]
  for w in out:
    assert "Approach 2 used the parabola, which this grid biases (C=1e+21 (+12.0%))" in w
    assert "asymmetric exponents (alpha=0.7, beta=0.38)" in w
    assert "off-centre grids" in w and "C=1e+21 at 0.10" in w and "1e+22" not in w
  # Nothing specific known: the generic cause.
  plain = caveats.agreement({"1": _entry(0.6, 0.58, 0.62), "2": _entry(0.5, 0.49, 0.51)})
  assert len(plain) == 2 and "the law's form may not fit these runs" in plain[0]
