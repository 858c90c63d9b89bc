"""The law's form as a source of uncertainty (scaling/parametric/form.py): the nesting form
E + (A/N^alpha + B/D^beta)^gamma recovers Kaplan et al.'s form, which the law cannot; it
leaves a law-family truth alone; and on a ladder and a checkpoint suite of a Kaplan-form
truth the fit's interval of a holds the true a, where the law's own interval does not."""

import warnings

import numpy as np
import pytest

import chinchax
from chinchax.scaling.law.artifact import ScalingLaw
from chinchax.scaling.parametric import form
from tests.helpers import synthetic_law, truths
from tests.scaling.test_design import checkpoints, ladder

# Kaplan et al.'s L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D: minimising the inner sum
# along C = 6ND gives N* ∝ C^(1/(1 + alpha_N/alpha_D)), by hand.
KAPLAN_A = 1 / (1 + 0.076 / 0.095)
HOFFMANN_A = synthetic_law.HOFFMANN[4] / (synthetic_law.HOFFMANN[3] + synthetic_law.HOFFMANN[4])


def test_the_jacobian_is_the_derivative():
  rng = np.random.default_rng(0)
  lN, lD = rng.normal(20, 1, 9), rng.normal(24, 1, 9)
  th = np.array([8.0, 9.0, 0.3, 0.4, 0.35, 0.6])
  eps = 1e-6
  numeric = np.stack([(form.log_loss(th + eps * e, lN, lD) - form.log_loss(th - eps * e, lN, lD))
                      / (2 * eps) for e in np.eye(6)], axis=1)
  np.testing.assert_allclose(form._jacobian(th, lN, lD), numeric, atol=1e-7)


def test_the_form_recovers_kaplan_where_the_law_cannot():
  N, D, L = ladder(truth=truths.kaplan, seed=0)
  L = truths.kaplan(N, D)  # noiseless
  law = chinchax.fit({"N": N, "D": D, "loss": L}, approaches="3", bootstrap=0)
  e = law.doc["approaches"]["3"]
  theta = (e["E"], e["A"], e["B"], e["alpha"], e["beta"])
  ff = form.fit_form(N, D, L, theta, 1e-3)
  assert abs(ff.a - KAPLAN_A) < 0.01, ff.a
  assert abs(e["a"] - KAPLAN_A) > 0.1  # the law's form misreads it by far more
  assert ff.p_value < 1e-6  # noiseless: the law's form is rejected


def test_the_form_leaves_the_law_alone_on_its_own_family():
  N, D, L = ladder(seed=0)
  L = synthetic_law.loss(N, D)
  ff = form.fit_form(N, D, L, synthetic_law.HOFFMANN, 1e-3)
  assert ff.gamma > 0.99 and abs(ff.a - HOFFMANN_A) < 1e-3 and ff.p_value > 0.1


@pytest.mark.parametrize("make,said", [(ladder, "rests on the law's form"),
                                       (checkpoints, "reject the law's form")])
def test_an_out_of_family_design_gets_an_interval_that_holds_the_truth(make, said):
  N, D, L = make(truth=truths.kaplan, seed=0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    law = chinchax.fit({"N": N, "D": D, "loss": L}, bootstrap=100, seed=0)
  e3 = law.doc["approaches"]["3"]
  lo, hi = e3["ci"]["a"]
  f_lo, f_hi = e3["form"]["ci_a"]
  assert lo <= KAPLAN_A <= hi and f_lo <= KAPLAN_A <= f_hi
  assert lo <= e3["a"] <= hi  # the hull holds the law's own estimate too
  assert any(said in w for w in e3["warnings"] + e3.get("notes", [])), e3["warnings"]
  if law.recommended["approach"] == "3":
    assert law.doc["ci"]["a"] == [lo, hi]


def test_an_isoflop_grid_is_not_given_the_form():
  g = synthetic_law.isoflop(noise=0.005)
  law = chinchax.fit({"N": g["N"], "D": g["D"], "loss": g["loss"]}, bootstrap=50, seed=0)
  assert "form" not in law.doc["approaches"]["3"]


def _cosine_checkpoints(N, D):
  """Checkpoints of one cosine run per size to 40 tokens per parameter: above the law by
  0.04 (1 + cos(pi f))/2 nats at a fraction f of the run."""
  return synthetic_law.loss(N, D) + 0.04 * (1 + np.cos(np.pi * np.minimum(D / (40 * N), 1))) / 2


@pytest.mark.parametrize("truth, warned", [(synthetic_law.loss, False),
                                           (_cosine_checkpoints, True)])
def test_checkpoints_bent_by_a_schedule_are_named(truth, warned):
  """Seed 0 of each: the cosine suite's residuals follow the checkpoints' place in their runs
  (a warning naming the schedule), the law's own suite's do not."""
  N, D, L = checkpoints(truth=truth, seed=0)
  law = chinchax.fit({"N": N, "D": D, "loss": L}, bootstrap=20, seed=0)
  said = [w for w in law.doc["warnings"] if w.startswith("the checkpoints bend along D")]
  assert bool(said) == warned, law.doc["warnings"]
  assert law.doc["approaches"]["3"]["curve_shape"]["dof"] == 4


def test_a_suite_that_rejects_the_law_gets_the_nesting_form_as_its_law(tmp_path):
  """Kaplan-form checkpoints: the runs reject the law's form, so Approach 3's law is the
  nesting form. It is recommended, predicts losses 10x past the largest model near Kaplan's
  closed form, and survives law.json."""
  N, D, L = checkpoints(truth=truths.kaplan, seed=0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    law = chinchax.fit({"N": N, "D": D, "loss": L}, bootstrap=100, seed=0)
  assert law.form == "E + (A/N^alpha + B/D^beta)^gamma" and law.predicts_loss
  assert law.recommended["approach"] == "3", law.recommended
  e3 = law.doc["approaches"]["3"]
  assert e3["form"]["adopted"] and e3["law_form"]["form"] == "E + A/N^alpha + B/D^beta"
  assert abs(e3["law_form"]["a"] - KAPLAN_A) > 0.1 > abs(law.a - KAPLAN_A)
  lo, hi = law.doc["ci"]["a"]
  assert lo <= KAPLAN_A <= hi and hi - lo < 0.1
  N_far, D_far = 3e10, 6e11
  assert abs(law.predict(N_far, D_far) / truths.kaplan(N_far, D_far) - 1) < 0.02
  law.save(tmp_path / "law.json")
  again = ScalingLaw.load(tmp_path / "law.json")
  assert again.gamma == pytest.approx(law.gamma, rel=1e-6)
  assert again.predict(N_far, D_far) == pytest.approx(law.predict(N_far, D_far), rel=1e-6)


def test_the_nesting_law_plans_as_its_inner_sum_says():
  """gamma moves the loss, not the allocation: N*(C) and the inference-aware model are the
  inner sum's, by hand; the losses are E + (inner)^gamma."""
  from chinchax.scaling.numerics import optimum  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.plan import inference  # pylint: disable=g-import-not-at-top
  E, A, B, alpha, beta, gamma = 0.5, 3e3, 2e4, 0.6, 0.7, 0.3
  theta = np.array([E, A, B, alpha, beta, gamma])
  C = 1e22
  G = (alpha * A / (beta * B))**(1 / (alpha + beta))
  N_star, D_star = G * (C / 6)**(beta / (alpha + beta)), (C / 6)**(alpha / (alpha + beta)) / G
  np.testing.assert_allclose(optimum.optimum(C, theta), (N_star, D_star), rtol=1e-12)
  inner = A / N_star**alpha + B / D_star**beta
  assert optimum.optimal_loss(C, theta) == pytest.approx(E + inner**gamma, rel=1e-13)
  assert optimum.loss(N_star, D_star * 2, theta) == pytest.approx(
      E + (A / N_star**alpha + B / (2 * D_star)**beta)**gamma, rel=1e-13)
  plan = inference.optimum(C, 1e13, theta)
  aware = plan["inference_optimal"]
  assert plan["loss"] == pytest.approx(E + inner**gamma, rel=1e-12)
  assert E + (A / aware["N"]**alpha + B / aware["D"]**beta)**gamma == pytest.approx(
      plan["loss"], rel=1e-9)
  assert aware["N"] < N_star and aware["total_flops"] < plan["chinchilla"]["total_flops"]


def test_a_gamma_above_one_is_refused_in_one_line():
  from chinchax.errors import UserError  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.law import build  # pylint: disable=g-import-not-at-top
  with pytest.raises(UserError, match=r"^law\.gamma: expected a value in \(0, 1\], got 1\.5$"):
    build.build_law(E=0.5, A=3e3, B=2e4, alpha=0.6, beta=0.7, gamma=1.5)


def test_the_profile_of_a_holds_the_truth_and_widens_with_the_noise():
  """form.profile_a on a Kaplan-form checkpoint suite: it holds the estimate, and, as an
  F-test interval of a smooth fit, its width grows in proportion to the noise's scale (4x the
  noise: about 4x the width). Whether it holds the truth is a matter of coverage, over many
  draws: bench/design_coverage.py."""
  N, D, _ = checkpoints(truth=truths.kaplan, seed=0)
  z = np.random.default_rng(3).standard_normal(len(N))
  widths = []
  for sd in (0.002, 0.008):
    L = truths.kaplan(N, D) * np.exp(sd * z)
    f3 = chinchax.fit({"N": N, "D": D, "loss": L}, approaches="3", bootstrap=0)
    e = f3.doc["approaches"]["3"]
    ff = form.fit_form(N, D, L, (e["E"], e["A"], e["B"], e["alpha"], e["beta"]), 1e-3)
    lo, hi = form.profile_a(N, D, L, ff, 1e-3, 0.9)
    assert lo < ff.a < hi, (lo, ff.a, hi)
    widths.append(hi - lo)
  assert 2.5 < widths[1] / widths[0] < 6, widths
