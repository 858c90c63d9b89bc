"""The law beneath a checkpoint suite's schedule (scaling/parametric/schedule.py) and what the
fit does with it: each checkpoint placed in its own model's run (models to one token multiple
or to different ones), not fitted on fewer than six models; the law beneath a cosine schedule recovered exactly from noiseless checkpoints, where
the law read directly is off; adopted when the checkpoints bend as a schedule does, its
interval then holding the truth the law's interval misses; joined to the law's interval
otherwise."""

import warnings

import numpy as np
import pytest

import chinchax
from chinchax.scaling.law.artifact import ScalingLaw
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.parametric import schedule
from chinchax.scaling.runs import design
from tests.helpers import synthetic_law, truths

A_TRUE = 0.28 / (0.34 + 0.28)  # Hoffmann et al.'s beta / (alpha + beta)
LAW = "E + A/N^alpha + B/D^beta"


def _suite(ends=None):
  """8 models, 15 checkpoints each from 1 token per parameter to the model's end multiple
  (40 for every model unless `ends` gives one per model)."""
  N, u = np.meshgrid(np.geomspace(5e7, 3e9, 8), np.linspace(0, 1, 15))  # bench's order
  ends = np.full(8, 40.0) if ends is None else np.asarray(ends, float)
  return N.ravel(), (N * ends**u).ravel()


def _noisy(loss, seed=0):
  return loss * np.exp(0.005 * np.random.default_rng(seed).standard_normal(len(loss)))


def _fit(N, D, L, bootstrap=100):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return chinchax.fit({"N": N, "D": D, "loss": L}, bootstrap=bootstrap, seed=0)


def test_places_are_each_models_own_and_need_six_models():
  N = np.repeat([1e8, 2e8, 4e8, 8e8, 1.6e9, 3.2e9], 3)
  for end, text in ((41.0, "every model to 40.5 tokens per parameter"),
                    (80.0, "the models to 40-80 tokens per parameter")):
    # The smallest model runs to `end` tokens per parameter, the others to 40.
    D = np.concatenate([n * np.array([4.0, 10.0, end if n == 1e8 else 40.0]) for n in N[::3]])
    pl = schedule.places(N, D, design.sizes_of(N))
    assert pl.text == text
    np.testing.assert_allclose(pl.f_n[:3], [4 / end, 10 / end, 1.0])
    np.testing.assert_allclose(pl.f_n[3:6], [0.1, 0.25, 1.0])
    knots = [0.05, 0.1, 0.125, 0.25] if end == 80 else [4 / 41, 0.1, 10 / 41, 0.25]
    np.testing.assert_allclose(np.exp(pl.knots), knots)
  five = N[:15]
  assert schedule.places(five, 40 * five, design.sizes_of(five)).startswith("5 sizes;")
  # Every model to one D (within 5%): g would be a term of D alone.
  D = np.tile([3e10, 1e11, 3e11], 6) * np.repeat([1.0, 1.0, 1.03, 1.0, 1.0, 0.99], 3)
  assert schedule.places(N, D, design.sizes_of(N)).startswith(
      "every model ran to one D (2.97e11-3.09e11 tokens)")


def test_g_is_linear_in_log_f_between_knots_and_zero_at_the_end():
  knots = np.log([0.1, 0.5])
  f = np.array([0.05, 0.1, np.sqrt(0.05), 0.5, np.sqrt(0.5), 1.0])
  expected = [[1, 0], [1, 0], [0.5, 0.5], [0, 1], [0, 0.5], [0, 0]]
  np.testing.assert_allclose(schedule.basis(np.log(f), knots), expected, atol=1e-12)


def test_the_law_beneath_a_cosine_schedule_is_recovered_from_noiseless_checkpoints():
  N, D = _suite()
  L = truths.cosine_checkpoints(N, D)
  law = parametric.fit_parametric(N, D, L)
  assert abs(law.a - A_TRUE) > 0.03  # the law read directly bends to follow the schedule
  pl = schedule.places(N, D, design.sizes_of(N))
  sf = schedule.fit(N, D, L, (law.E, law.A, law.B, law.alpha, law.beta), pl, 1e-3)
  np.testing.assert_allclose(sf.law, synthetic_law.HOFFMANN, rtol=2e-3)
  f = np.exp(pl.knots)
  np.testing.assert_allclose(sf.g, 0.04 * (1 + np.cos(np.pi * f)) / 2, atol=2e-4)
  np.testing.assert_allclose(sf.predict(N, D, pl.f_n), L, rtol=1e-5)


@pytest.mark.parametrize("schedule_name", ["cosine", "linear"])
def test_checkpoints_bent_by_a_schedule_get_the_law_beneath_it(schedule_name, tmp_path):
  """Seed 0: the cosine (and linear-decay) suite's law read directly misses the truth's a;
  the law beneath the schedule is Approach 3's law, recommended, and its interval holds it."""
  N, D = _suite()
  law = _fit(N, D, _noisy(truths.SCHEDULES[schedule_name](N, D)))
  e3 = law.doc["approaches"]["3"]
  assert e3["schedule"]["adopted"], e3["schedule"]
  assert abs(law.a - A_TRUE) < abs(e3["schedule"]["without"]["a"] - A_TRUE)
  assert law.recommended["approach"] == "3" and law.form == LAW and law.predicts_loss
  lo, hi = law.doc["ci"]["a"]
  assert lo <= A_TRUE <= hi and hi - lo < 0.15
  assert e3["schedule"]["tokens_per_param"] == pytest.approx([40.0, 40.0])
  assert any("the law beneath the schedule" in w for w in law.doc["warnings"])
  N_far, D_far = 3e10, 6e11  # 10x the largest model, trained to 20 tokens per parameter
  assert abs(law.predict(N_far, D_far) / synthetic_law.loss(N_far, D_far) - 1) < 0.02
  law.save(tmp_path / "law.json")
  again = ScalingLaw.load(tmp_path / "law.json")
  assert again.a == law.a and again.doc["approaches"]["3"]["schedule"]["adopted"]


def test_the_law_is_kept_where_the_checkpoints_do_not_bend_and_its_interval_widened():
  N, D = _suite()
  law = _fit(N, D, _noisy(synthetic_law.loss(N, D)))
  e3 = law.doc["approaches"]["3"]
  assert not e3["schedule"]["adopted"]
  assert law.a == e3["a"] != e3["schedule"]["a"]
  lo, hi = law.doc["ci"]["a"]
  s_lo, s_hi = e3["schedule"]["ci_a"]
  assert lo <= s_lo and s_hi <= hi and lo <= law.a <= hi
  assert any("the interval of a given is the hull of both" in n and "g(D/D_end)" in n
             for n in law.doc["notes"])


def test_models_run_to_different_multiples_get_the_law_beneath_their_own_runs():
  """Seed 0, each model to its own multiple (80 down to 20 tokens per parameter): the law read
  directly misses the truth's a; the law beneath the schedule, each checkpoint placed in its
  own model's run, holds it (40 draws of bench/design_coverage.py: 9 held without it)."""
  N, D = _suite(ends=np.geomspace(80, 20, 8))
  law = _fit(N, D, _noisy(truths.cosine_checkpoints(N, D)))
  e3 = law.doc["approaches"]["3"]
  assert e3["schedule"]["adopted"], e3["schedule"]
  assert e3["schedule"]["tokens_per_param"] == pytest.approx([20.0, 80.0])
  lo, hi = e3["schedule"]["without"]["ci_a"]
  assert not lo <= A_TRUE <= hi
  lo, hi = law.doc["ci"]["a"]
  assert lo <= A_TRUE <= hi and hi - lo < 0.15
  assert any(n.startswith("design: each model's checkpoints are read as one run whose "
                          "schedule ends at its last checkpoint") for n in law.doc["notes"])
