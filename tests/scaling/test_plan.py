"""The planner against independent numerical optimisations.

Every reference here is written from the papers' formulas, not from scaling/: a dense grid
(or scipy) over log N for the compute-optimal and data-constrained problems, and SLSQP on the
iso-loss constraint for the inference-aware one.
"""

import json
import math

import numpy as np
import pytest
from scipy import optimize

from chinchax.scaling.constrained import law as data_constrained
from chinchax.scaling.numerics import fmt
from chinchax.scaling.plan import inference
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.plan import planner as plan_lib
from chinchax.scaling.law import presets
from chinchax.errors import UserError

HOFFMANN = np.array([1.69, 406.4, 410.7, 0.34, 0.28])
BESIROGLU = np.array([1.8172, 482.01, 2085.43, 0.3478, 0.3658])
# Muennighoff et al.'s released C4 fit (github.com/huggingface/datablations, README):
# log A, log B, log E, alpha, beta = 6.255414, 7.3049974, 0.6254804, 0.3526596, 0.3526596.
MUENNIGHOFF = np.array([math.exp(0.6254804), math.exp(6.255414), math.exp(7.3049974),
                        0.3526596, 0.3526596])


def chinchilla_loss(N, D, E, A, B, alpha, beta):
  return E + A / N**alpha + B / D**beta


def muennighoff_loss(N, D, U, E, A, B, alpha, beta, rd=15.387756, rn=5.309743):
  """The data-constrained law as the paper writes it, vectorised over N and D."""
  U_D = np.minimum(D, U)
  R_D = np.maximum(D / U_D - 1, 0)
  G = (alpha * A / (beta * B))**(1 / (alpha + beta))
  N_for_U = (U_D * G)**(beta / alpha) * G  # compute-optimal N for U_D tokens
  U_N = np.minimum(N, N_for_U)
  R_N = np.maximum(N / U_N - 1, 0)
  N_eff = U_N + U_N * rn * (1 - np.exp(-R_N / rn))
  D_eff = U_D + U_D * rd * (1 - np.exp(-R_D / rd))
  return E + A / N_eff**alpha + B / D_eff**beta


def grid_argmin(loss_of_N, C, lo=1e3, hi=1e16, n=600_001):
  """Dense grid over log N with D = C/6N: (N, D, loss) at the best grid point."""
  N = np.geomspace(lo, hi, n)
  L = loss_of_N(N, C / (6 * N))
  i = int(np.argmin(L))
  return N[i], C / (6 * N[i]), L[i]


def law_of(theta, **kw):
  E, A, B, alpha, beta = theta
  return law_lib.ScalingLaw.from_dict(
      law_lib.build_law(E=E, A=A, B=B, alpha=alpha, beta=beta, **kw))


# ---------------------------------------------------------------------------- optimum


@pytest.mark.parametrize("theta", [HOFFMANN, BESIROGLU])
@pytest.mark.parametrize("C", [1e19, 5.76e23])
def test_budget_plan_matches_dense_grid(theta, C):
  out = plan_lib.plan(law_of(theta), C=C)
  N, D, L = grid_argmin(lambda N, D: chinchilla_loss(N, D, *theta), C)
  best = out["optimum"]
  assert best["N"] == pytest.approx(N, rel=1e-4)
  assert best["D"] == pytest.approx(D, rel=1e-4)
  assert best["loss"] <= L and best["loss"] == pytest.approx(L, abs=1e-10)
  assert best["tokens_per_param"] == pytest.approx(D / N, rel=2e-4)
  assert out["given"] is None and out["warnings"] == []


def test_pair_gap_and_compute_equivalent():
  law = law_of(BESIROGLU)
  N, D = 2e9, 1e12  # heavily over-trained for its budget
  out = plan_lib.plan(law, N=N, D=D)
  C = 6 * N * D
  assert out["budget"]["C"] == C
  _, _, L_min = grid_argmin(lambda n, d: chinchilla_loss(n, d, *BESIROGLU), C)
  g = out["given"]
  assert g["loss"] == chinchilla_loss(N, D, *BESIROGLU)
  assert g["loss_gap"] == pytest.approx(g["loss"] - L_min, abs=1e-10) and g["loss_gap"] > 0
  # The optimal model reaches the pair's loss with compute_equivalent FLOPs: check it by grid.
  C_eq = g["compute_equivalent"]
  _, _, L_eq = grid_argmin(lambda n, d: chinchilla_loss(n, d, *BESIROGLU), C_eq)
  assert L_eq == pytest.approx(g["loss"], abs=1e-9)
  assert 0 < g["compute_efficiency"] < 1


def test_any_two_give_the_third():
  law = law_of(HOFFMANN)
  by_nc = plan_lib.plan(law, N=1e9, C=1.2e20)["budget"]
  assert by_nc["D"] == pytest.approx(2e10)
  by_dc = plan_lib.plan(law, D=2e10, C=1.2e20)["budget"]
  assert by_dc["N"] == pytest.approx(1e9)
  close = plan_lib.plan(law, N=1e9, D=2e10, C=1.3e20)
  assert close["warnings"] == [] and close["budget"]["C"] == pytest.approx(1.2e20)
  far = plan_lib.plan(law, N=1e9, D=2e10, C=2e20)
  assert far["budget"]["C"] == pytest.approx(1.2e20)
  assert any("differs from 6·N·D = 1.2e20" in w for w in far["warnings"])


def test_params_alone_plans_the_budget_where_they_are_optimal():
  law = law_of(BESIROGLU)
  out = plan_lib.plan(law, N=7e10)
  assert out["optimum"]["N"] == pytest.approx(7e10, rel=1e-10)
  N, D, _ = grid_argmin(lambda n, d: chinchilla_loss(n, d, *BESIROGLU), out["budget"]["C"])
  assert N == pytest.approx(7e10, rel=1e-4)
  out = plan_lib.plan(law, D=1.4e12)
  assert out["optimum"]["D"] == pytest.approx(1.4e12, rel=1e-10)


def test_bad_inputs_are_user_errors():
  law = law_of(HOFFMANN)
  with pytest.raises(UserError, match="nothing to plan"):
    plan_lib.plan(law)
  with pytest.raises(UserError, match="nothing to plan"):
    plan_lib.plan(law, U=1e10)
  with pytest.raises(UserError, match="--flops must be a positive finite number"):
    plan_lib.plan(law, C=-1.0)
  with pytest.raises(UserError, match="--unique-tokens"):
    plan_lib.plan(law, C=1e21, U=float("nan"))


# ---------------------------------------------------------------------------- extrapolation


def factor(x, lo, hi):
  """How far x lies outside [lo, hi], written out again from the docstring's definition."""
  if x > hi:
    return x / hi
  return lo / x if x < lo else 1.0


def test_an_extrapolated_plan_warns_with_its_three_factors():
  law = presets.preset("hoffmann2022")  # N 7e7-1.6e10, D 5e9-5e11, C 1e18-1e22
  C = 1e25
  out = plan_lib.plan(law, C=C)
  N, D = law.optimum(C)
  ext = out["extrapolation"]
  expected = {"N": factor(N, 7e7, 1.6e10), "D": factor(D, 5e9, 5e11), "C": 1e3}
  assert ext["factors"] == pytest.approx(expected, rel=1e-12)
  assert ext["query"] == pytest.approx({"N": N, "D": D, "C": C})
  assert ext["threshold"] == 3.0
  (w,) = out["warnings"]
  assert (f"by N {fmt.factor(expected['N'])}, D {fmt.factor(expected['D'])}, C 1000x" in w
          and "no bootstrap draws" in w)
  assert "C = 1e25 is 1000x above the largest fitted 1e22" in w

  # A pair 17x beyond the largest fitted N warns by N alone, with the interval of N*.
  rng = np.random.default_rng(0)
  samples = BESIROGLU * (1 + 0.02 * rng.standard_normal((50, 5)))
  law = law_of(BESIROGLU, samples=samples, N=[1e7, 1e9], D=[1e9, 1e11])
  out = plan_lib.plan(law, N=1.7e10, D=1e11)
  ext = out["extrapolation"]
  assert ext["factors"] == pytest.approx({"N": 17.0, "D": 1.0, "C": 6 * 1.7e10 * 1e11 / 6e20})
  (w,) = out["warnings"]
  lo, hi = law.interval("N", 6 * 1.7e10 * 1e11)
  assert "by N 17x, D inside, C 17x" in w and "N = 1.7e10 is 17x above" in w
  assert fmt.interval((lo, hi)) in w
  below = plan_lib.plan(law, N=1e6, D=1e9)["extrapolation"]["factors"]
  assert below["N"] == pytest.approx(10.0) and below["D"] == 1.0  # 10x below the smallest
  json.dumps(out.to_dict(), allow_nan=False)


def test_an_in_range_plan_is_quiet():
  law = presets.preset("hoffmann2022")
  for kw in ({"C": 1e20}, {"N": 1e9, "D": 2e10}, {"C": 2.9e22}):  # 2.9x: below the threshold
    out = plan_lib.plan(law, **kw)
    assert out["warnings"] == [] and max(out["extrapolation"]["factors"].values()) <= 3
  assert plan_lib.plan(law, C=3.1e22)["warnings"]  # just beyond: it warns


def test_a_law_without_ranges_has_no_factors():
  # Far beyond where runs are fitted, yet inside plan_lib.SENSIBLE_N (N* ~ 1e12).
  out = plan_lib.plan(law_of(HOFFMANN), C=1e26)
  assert out["extrapolation"] is None and out["warnings"] == []


def test_predicted_loss_of_a_pair_has_an_interval_at_any_level():
  rng = np.random.default_rng(1)
  samples = BESIROGLU * (1 + 0.02 * rng.standard_normal((200, 5)))
  law = law_of(BESIROGLU, samples=samples)
  L_S = chinchilla_loss(2e9, 4e10, *samples.T)
  for level, q in ((None, [5, 95]), (0.5, [25, 75]), (0.99, [0.5, 99.5])):
    given = plan_lib.plan(law, N=2e9, D=4e10, level=level)["given"]
    assert given["loss_interval"] == pytest.approx(np.percentile(L_S, q).tolist())
  with pytest.raises(UserError, match="--ci must be a level strictly between 0 and 1"):
    plan_lib.plan(law, C=1e21, level=1.5)


def test_an_allocation_law_plans_without_losses():
  doc = law_lib.build_power_law(a=0.46, b=0.54, log_kN=-1.2, log_kD=1.0, N=[1e6, 1e9],
                                D=[1e8, 1e11])
  law = law_lib.ScalingLaw.from_dict(doc)
  out = plan_lib.plan(law, N=1e8, D=1e10)
  assert out["given"]["loss"] is None and out["given"]["N_over_N_opt"] == pytest.approx(
      1e8 / law.optimum(6e18)[0])
  assert out["optimum"]["loss"] is None
  (note,) = out["notes"]
  assert "comes from Approach 2: it plans N and D and predicts no loss" in note
  assert "no loss" in str(out) and "loss above optimum" not in str(out)
  assert plan_lib.plan(law, N=1e8)["optimum"]["N"] == pytest.approx(1e8, rel=1e-10)
  with pytest.raises(UserError, match="--unique-tokens needs a law that predicts losses"):
    plan_lib.plan(law, C=1e20, U=1e9)


# ---------------------------------------------------------------------------- data-constrained


def test_data_constrained_loss_reproduces_the_papers_examples():
  # The two models of the paper's Fig. 1 (right), values from the authors' README.
  assert float(data_constrained.loss(6.34e9, 242e9, 25e9, MUENNIGHOFF)) == pytest.approx(
      2.2256440889984477, rel=1e-12)
  assert float(data_constrained.loss(8.67e9, 178e9, 25e9, MUENNIGHOFF)) == pytest.approx(
      2.2269634075087867, rel=1e-12)
  # Their grid search for that budget: "227B tokens, 9.1 epochs, 6.8B parameters".
  best = data_constrained.optimum(6 * 8.67e9 * 178e9, 25e9, MUENNIGHOFF)
  assert best["D"] == pytest.approx(227e9, rel=0.01)
  assert best["N"] == pytest.approx(6.8e9, rel=0.01)
  assert best["epochs"] == pytest.approx(9.1, rel=0.01)


@pytest.mark.parametrize("theta,C,U", [
    (MUENNIGHOFF, 6 * 8.67e9 * 178e9, 25e9),
    (HOFFMANN, 1e23, 1e11),
    (BESIROGLU, 5.88e23, 3e11),
    (BESIROGLU, 1e21, 1e9),  # a hundred-fold shortage
])
def test_data_constrained_optimum_matches_dense_grid(theta, C, U):
  best = data_constrained.optimum(C, U, theta)
  N, D, L = grid_argmin(lambda n, d: muennighoff_loss(n, d, U, *theta), C)
  assert best["N"] == pytest.approx(N, rel=1e-3)
  assert best["D"] == pytest.approx(D, rel=1e-3)
  assert best["loss"] <= L + 1e-12 and best["loss"] == pytest.approx(L, abs=1e-9)
  assert not best["at_edge"]


def test_plenty_of_unique_data_is_the_chinchilla_optimum():
  law = law_of(BESIROGLU)
  out = plan_lib.plan(law, C=1e22, U=1e15)["data_constrained"]
  assert out["optimal"]["N"] == pytest.approx(out["chinchilla"]["N"], rel=1e-6)
  assert out["optimal"]["loss"] == pytest.approx(law.optimal_loss(1e22), abs=1e-12)


def test_epoch_warnings():
  law = law_of(BESIROGLU)
  out = plan_lib.plan(law, C=1e23, U=1e10)
  assert any("epochs of 1e10 unique tokens; beyond ~4 epochs" in w for w in out["warnings"])
  dc = out["data_constrained"]
  assert dc["chinchilla"]["epochs"] == pytest.approx(dc["chinchilla"]["D"] / 1e10)
  assert dc["optimal"]["loss"] < dc["chinchilla"]["loss"]
  pair = plan_lib.plan(law, N=1e9, D=1e11, U=2e10)
  assert pair["data_constrained"]["given"]["epochs"] == pytest.approx(5.0)
  assert any("D = 1e11 is 5.0 epochs" in w for w in pair["warnings"])
  assert plan_lib.plan(law, C=1e21, U=1e13)["warnings"] == []


# ---------------------------------------------------------------------------- inference-aware


def slsqp_inference_optimum(C, T, theta):
  """min log(6ND + 2NT) over (log N, log D) s.t. L(N, D) = L(N*(C), D*(C)), by SLSQP."""
  N0, D0, target = grid_argmin(lambda n, d: chinchilla_loss(n, d, *theta), C, n=200_001)
  cost = lambda x: math.log(6 * math.exp(x[0] + x[1]) + 2 * math.exp(x[0]) * T)
  on_curve = {"type": "eq",
              "fun": lambda x: chinchilla_loss(math.exp(x[0]), math.exp(x[1]), *theta) - target}
  res = optimize.minimize(cost, [math.log(N0), math.log(D0)], method="SLSQP",
                          constraints=[on_curve], options={"ftol": 1e-15, "maxiter": 500})
  assert res.success, res.message
  return math.exp(res.x[0]), math.exp(res.x[1]), target


@pytest.mark.parametrize("theta,C,T", [
    (HOFFMANN, 1e22, 1e12), (BESIROGLU, 5.88e23, 1e13), (BESIROGLU, 1e20, 1e13)])
def test_inference_optimum_matches_constrained_optimisation(theta, C, T):
  out = inference.optimum(C, T, theta)
  N, D, target = slsqp_inference_optimum(C, T, theta)
  aware = out["inference_optimal"]
  assert aware["N"] == pytest.approx(N, rel=2e-3)
  assert aware["D"] == pytest.approx(D, rel=2e-3)
  assert chinchilla_loss(aware["N"], aware["D"], *theta) == pytest.approx(target, abs=1e-9)
  for model in (aware, out["chinchilla"]):
    assert model["train_flops"] == pytest.approx(6 * model["N"] * model["D"], rel=1e-12)
    assert model["inference_flops"] == pytest.approx(2 * model["N"] * T, rel=1e-12)
  assert out["chinchilla"]["train_flops"] == pytest.approx(C, rel=1e-12)
  assert aware["total_flops"] <= (6 * N * D + 2 * N * T) * (1 + 1e-9)
  assert aware["N"] < out["chinchilla"]["N"] and aware["D"] > out["chinchilla"]["D"]
  assert out["saving_fraction"] == pytest.approx(
      1 - aware["total_flops"] / out["chinchilla"]["total_flops"])
  assert out["saving_fraction"] > 0


def test_no_inference_is_the_chinchilla_model():
  out = inference.optimum(1e21, 0.0, HOFFMANN)
  assert out["inference_optimal"]["N"] == pytest.approx(out["chinchilla"]["N"], rel=1e-5)
  assert abs(out["saving_fraction"]) < 1e-9
