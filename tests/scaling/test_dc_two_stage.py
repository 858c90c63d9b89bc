"""The data-constrained law in two stages (scaling.constrained.two_stage, dc_base, dc_bounds): the
decay constants of synthetic truths on a design like Muennighoff et al.'s come back inside
their intervals, and a constant the runs cannot bound is stated as a one-sided interval."""

import re

import numpy as np
import pytest

import chinchax

from chinchax.errors import UserError
from chinchax.scaling.constrained import law as dc
from chinchax.scaling.constrained import base as dc_base
from chinchax.scaling.constrained import bounds as dc_bounds
from chinchax.scaling.constrained import two_stage as dc_two_stage
from tests.helpers import synthetic_law as syn

OTHER = (2.1, 500.0, 800.0, 0.36, 0.30)  # a base law unlike Hoffmann et al.'s (70 tok/param)


def _fit(runs, **kw):
  return dc_two_stage.fit(runs["N"], runs["D"], runs["U"], runs["loss"], **kw)


@pytest.mark.parametrize("theta,R_D,R_N,seed", [
    (syn.HOFFMANN, 15.4, 5.3, 0),
    (OTHER, 4.0, 20.0, 1),
])
def test_recovers_the_decay_constants_within_their_intervals(theta, R_D, R_N, seed):
  runs = syn.muennighoff_design(R_D, R_N, noise=0.005, seed=seed, theta=theta)
  out = _fit(runs, n_resamples=100, seed=seed)
  for name, truth in (("R_D_star", R_D), ("R_N_star", R_N)):
    lo, hi = out["ci"][name]
    assert lo < truth < hi, (name, out["statements"])
    assert lo <= out[name] <= hi
  assert out["base_source"].startswith("stage 1: Approach 3 on the ")
  # Stage 1 saw the runs whose effective sizes are their own under its law (a run on the
  # N*(D) boundary may flip with the fit) and none of the repeated ones.
  theta_fit = [out["base"][k] for k in ("E", "A", "B", "alpha", "beta")]
  own = dc_base.is_base(runs["N"], runs["D"], runs["U"], theta_fit)
  assert abs(out["base_runs"] - int(own.sum())) <= 1 and out["base_runs"] >= 10


def test_no_excess_parameter_penalty_gives_a_one_sided_interval():
  """R_N* = ∞ (N' = N): the fit states a lower bound, never a number."""
  runs = syn.muennighoff_design(15.4, np.inf, noise=0.005, seed=0)
  out = _fit(runs, n_resamples=100)
  assert out["R_N_star"] is None
  lo, hi = out["ci"]["R_N_star"]
  assert hi is None and lo > 20.0
  assert out["statements"]["R_N_star"] == f"R_N* > {dc_bounds.fmt.num(lo)}, not bounded above"
  assert any(w.startswith("data-constrained: R_N* > ") and "no decay" in w
             for w in out["warnings"])
  lo, hi = out["ci"]["R_D_star"]
  assert lo < 15.4 < hi


def test_open_range_is_where_no_run_moves_by_more_than_tol():
  x = np.array([0.5, 3.0, 63.0])
  lo, hi = dc_bounds.open_range(x)
  kept = lambda R, x: (1 + R * -np.expm1(-x / R)) / (1 + x)
  assert kept(hi, 63.0) == pytest.approx(1 - dc_bounds.TOL, abs=1e-6)
  assert np.all(kept(hi, x) >= 1 - dc_bounds.TOL - 1e-9)  # the largest x binds
  assert lo * -np.expm1(-63.0 / lo) == pytest.approx(dc_bounds.TOL, rel=1e-5)
  R = dc_bounds.classify([lo / 2, 5.0, hi * 2], lo, hi)
  assert R.tolist() == [0.0, 5.0, np.inf]


def test_interval_statements():
  lo, hi = 0.01, 1e4
  draws = np.r_[np.linspace(3, 12, 80), np.full(20, 1e5)]
  point, pair, text = dc_bounds.interval(6.0, draws, lo, hi, 0.9)
  assert point == 6.0 and pair[1] is None and text.endswith("not bounded above]")
  point, pair, text = dc_bounds.interval(2e4, draws, lo, hi, 0.9)
  assert point is None and pair == [pytest.approx(np.quantile(draws, 0.1,
                                                              method="inverted_cdf")), None]
  point, pair, text = dc_bounds.interval(6.0, np.linspace(3, 12, 101), lo, hi, 0.9)
  assert pair == [pytest.approx(3.45), pytest.approx(11.55)]
  assert text == f"= 6 [{dc_bounds.fmt.num(pair[0])}, {dc_bounds.fmt.num(pair[1])}]"


def test_too_few_base_runs_asks_for_a_base_law():
  runs = syn.repeated(4.0, 20.0, noise=0.002)  # 10 single-epoch runs, 6 of them below N*(D)
  with pytest.raises(UserError, match=r"needs at least 10 such runs.*--base-law=law.json"):
    _fit(runs)
  law = chinchax.fit(runs, bootstrap=0)  # the fit goes on, and says why it has no R_D*
  assert law.data_constrained is None
  (w,) = [w for w in law.warnings if "data-constrained" in w]
  assert re.fullmatch(
      r"data-constrained law skipped: only [0-9] runs neither repeat data nor exceed the "
      r"compute-optimal size for their unique tokens; the base law needs at least 10 such "
      r"runs \(single-epoch runs at or below N\*\(D\)\): add them, or give a base law "
      r"fitted elsewhere \(--base-law=law.json\)", w), w
  # With the base law given, the same runs fit R_D*, R_N* (stage 2 alone).
  out = _fit(runs, base=np.array(syn.HOFFMANN), base_source="h.json")
  assert out["base_source"] == "given: h.json"
  assert out["R_D_star"] == pytest.approx(4.0, rel=0.05)


def test_the_plan_reads_an_open_constant_as_no_decay():
  from chinchax.scaling.law import artifact as law_lib  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.plan import planner as plan_lib
  runs = syn.muennighoff_design(15.4, np.inf, noise=0.005, seed=0)
  block = _fit(runs, n_resamples=40)
  doc = law_lib.build_law(**dict(zip(("E", "A", "B", "alpha", "beta"), syn.HOFFMANN)),
                          data_constrained=block)
  law = law_lib.ScalingLaw.from_dict(doc)
  out = plan_lib.plan(law, C=1e21, U=1e10)
  theta = [block["base"][k] for k in ("E", "A", "B", "alpha", "beta")]
  best = dc.optimum(1e21, 1e10, theta, block["R_D_star"], dc_bounds.NO_DECAY)
  assert out["data_constrained"]["optimal"]["N"] == pytest.approx(best["N"])
  assert "R_N* is not bounded above: planned as no decay" in out.warnings
