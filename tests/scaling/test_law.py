"""law.json (v2, and v1 read), ScalingLaw of both forms, presets, the closed-form optimum."""

import json
import math

import numpy as np
import pytest
from scipy import optimize

from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.law import pack as law_pack
from chinchax.scaling.numerics import optimum as opt
from chinchax.scaling.law import presets
from chinchax.errors import UserError


THETA = np.array([1.82, 482.0, 2085.0, 0.348, 0.366])  # [E, A, B, alpha, beta]


def chinchilla_loss(N, D, E, A, B, alpha, beta):
  return E + A / N**alpha + B / D**beta


def brute_force_optimum(C, theta):
  """argmin over log N of L(N, C/6N), by scipy on an independently written loss."""
  f = lambda x: chinchilla_loss(math.exp(x), C / (6 * math.exp(x)), *theta)
  res = optimize.minimize_scalar(f, bounds=(0.0, 60.0), method="bounded",
                                 options={"xatol": 1e-10})
  N = math.exp(res.x)
  return N, C / (6 * N), res.fun


def synthetic_law(n_samples=64, seed=0, **kw):
  rng = np.random.default_rng(seed)
  samples = THETA * (1 + 0.03 * rng.standard_normal((n_samples, 5)))
  N = np.geomspace(1e7, 1e9, 30)
  D = np.geomspace(1e9, 3e10, 30)
  return law_lib.build_law(
      E=THETA[0], A=THETA[1], B=THETA[2], alpha=THETA[3], beta=THETA[4],
      delta=1e-3, n_starts=64, objective=0.0123, n_at_best=7, samples=samples, seed=seed,
      approaches={"1": {"a": 0.5, "b": 0.5}, "3": {"note": "x"}}, N=N, D=D,
      inputs=["runs.jsonl"], **kw)


# ---------------------------------------------------------------------------- optimum


@pytest.mark.parametrize("theta", [THETA, np.array([1.69, 406.4, 410.7, 0.34, 0.28]),
                                   np.array([0.5, 50.0, 3000.0, 0.25, 0.45])])
@pytest.mark.parametrize("C", [1e17, 1e21, 1e25])
def test_closed_form_optimum_matches_numeric_minimisation(theta, C):
  N_ref, D_ref, L_ref = brute_force_optimum(C, theta)
  N, D = opt.optimum(C, theta)
  assert N == pytest.approx(N_ref, rel=1e-6)
  assert D == pytest.approx(D_ref, rel=1e-6)
  assert float(opt.optimal_loss(C, theta)) == pytest.approx(L_ref, rel=1e-12)
  assert float(opt.tokens_per_param(C, theta)) == pytest.approx(D_ref / N_ref, rel=1e-5)


def test_exponents_and_G_follow_the_paper():
  E, A, B, alpha, beta = THETA
  a, b = opt.exponents(THETA)
  assert a == pytest.approx(beta / (alpha + beta)) and b == pytest.approx(1 - a)
  # G from the scaling of N* between two budgets: N*(C) = G (C/6)^a.
  N1, _ = opt.optimum(6e20, THETA)
  assert float(opt.G(THETA)) == pytest.approx(N1 / 1e20**a, rel=1e-12)


def test_optimum_is_vectorised_over_samples_and_budgets():
  rng = np.random.default_rng(1)
  samples = THETA * (1 + 0.05 * rng.standard_normal((7, 5)))
  C = np.array([1e19, 1e21, 1e23])
  N, D = opt.optimum(C, samples)
  assert N.shape == D.shape == (7, 3)
  for s in range(7):
    for k in range(3):
      n, d = opt.optimum(C[k], samples[s])
      assert N[s, k] == pytest.approx(float(n), rel=1e-14)
      assert D[s, k] == pytest.approx(float(d), rel=1e-14)
  assert opt.loss(np.ones(3) * 1e9, np.ones(3) * 2e10, samples).shape == (7, 3)


def test_inverse_budgets():
  for C in (1e18, 3e22):
    N, D = opt.optimum(C, THETA)
    assert float(opt.budget_for_params(N, THETA)) == pytest.approx(C, rel=1e-10)
    assert float(opt.budget_for_tokens(D, THETA)) == pytest.approx(C, rel=1e-10)
    assert float(opt.optimal_params_for_tokens(D, THETA)) == pytest.approx(float(N), rel=1e-10)
    target = float(opt.optimal_loss(C, THETA))
    assert opt.budget_for_loss(target, THETA) == pytest.approx(C, rel=1e-8)
  assert opt.budget_for_loss(THETA[0] - 0.1, THETA) == math.inf


# ---------------------------------------------------------------------------- law.json


def test_build_law_ci_and_table_from_samples():
  doc = synthetic_law()
  samples = np.asarray(doc["bootstrap"]["samples"])
  assert samples.shape == (64, 5) and doc["bootstrap"]["n"] == 64
  assert doc["ci"]["level"] == 0.9  # the default level
  for i, name in enumerate(opt.PARAM_NAMES):
    lo, hi = doc["ci"][name]
    assert lo == pytest.approx(np.percentile(samples[:, i], 5))
    assert hi == pytest.approx(np.percentile(samples[:, i], 95))
  a_S = samples[:, 4] / (samples[:, 3] + samples[:, 4])
  assert doc["ci"]["a"] == pytest.approx(np.percentile(a_S, [5, 95]).tolist())
  assert doc["data"]["points"] == 30 and doc["data"]["N"] == [1e7, 1e9]
  assert doc["data"]["C"][1] == pytest.approx(6 * 1e9 * 3e10)
  for row in doc["optimal"]["tokens_per_param"]:
    N_ref, D_ref, _ = brute_force_optimum(row["C"], THETA)
    assert row["tokens_per_param"] == pytest.approx(D_ref / N_ref, rel=1e-5)
    # The table's intervals of N*: the draws' optima, one by one.
    N_S = [brute_force_optimum(row["C"], s)[0] for s in samples]
    assert row["N_ci"] == pytest.approx(np.percentile(N_S, [5, 95]).tolist(), rel=1e-5)


def test_samples_are_rounded_and_failed_refits_dropped():
  samples = np.tile(THETA, (5, 1)) * 1.000000012345
  samples[2, 1] = np.nan
  samples[4, 3] = -0.05  # a resample that shows no decrease in N is no law
  doc = law_lib.build_law(E=THETA[0], A=THETA[1], B=THETA[2], alpha=THETA[3], beta=THETA[4],
                          samples=samples)
  assert doc["bootstrap"]["n"] == 3 and doc["bootstrap"]["dropped"] == 2
  law_lib.validate_law(doc)
  for row in doc["bootstrap"]["samples"]:
    for x in row:
      assert x == float(f"{x:.7g}")


def test_packed_draws_are_each_value_at_7_digits():
  """One format call for rows of one length; rows of mixed lengths each as they are."""
  rows = [[1.0, 2.5e-08, 123456789.0, -0.5, 3], [0.1234567891, 1e20, 7.0, 2.0, 1.5]]
  assert law_pack._rows_text(rows) == ("1,2.5e-08,1.234568e+08,-0.5,3\n"
                                       "0.1234568,1e+20,7,2,1.5\n")
  assert law_pack._rows_text([[1.0], [2.0, 3.25]]) == "1\n2,3.25\n"
  assert law_pack._rows_text([]) == ""


def test_round_trip(tmp_path):
  doc = synthetic_law()
  path = tmp_path / "law.json"
  law_lib.save_law(path, doc)
  assert law_lib.load_law(path) == doc
  law = law_lib.ScalingLaw.load(path)
  assert law.to_dict() == doc
  law.save(tmp_path / "again.json")
  raw = json.loads((tmp_path / "again.json").read_text())
  assert "samples" not in raw["bootstrap"] and raw["bootstrap"]["samples_zlib"]  # packed
  assert law_pack.unpack(raw) == doc
  N, D = np.array([1e8, 1e10]), np.array([2e9, 2e11])
  np.testing.assert_array_equal(law.predict(N, D), chinchilla_loss(N, D, *THETA))
  assert law.fitted_range == tuple(doc["data"]["C"])
  assert (law.a, law.b, law.G) == pytest.approx(
      (doc["optimal"]["a"], doc["optimal"]["b"], doc["optimal"]["G"]), rel=1e-15)


def test_intervals_at_any_budget_match_a_loop_over_samples():
  law = law_lib.ScalingLaw.from_dict(synthetic_law())
  C = 3.3e23  # far from any tabulated budget
  N_S = np.array([brute_force_optimum(C, s)[0] for s in law.samples])
  lo, hi = law.interval("N", C)
  assert lo == pytest.approx(np.percentile(N_S, 5), rel=1e-5)
  assert hi == pytest.approx(np.percentile(N_S, 95), rel=1e-5)
  lo99, hi99 = law.interval("N", C, level=0.99)  # any level
  assert lo99 == pytest.approx(np.percentile(N_S, 0.5), rel=1e-5)
  assert lo99 < lo < hi < hi99
  L_lo, L_hi = law.predict_interval(1e9, 2e10)
  L_S = chinchilla_loss(1e9, 2e10, *law.samples.T)
  assert (L_lo, L_hi) == pytest.approx(tuple(np.percentile(L_S, [5, 95])))
  L_lo, L_hi = law.predict_interval(1e9, 2e10, level=0.5)
  assert (L_lo, L_hi) == pytest.approx(tuple(np.percentile(L_S, [25, 75])))
  with pytest.raises(UserError, match="strictly between 0 and 1"):
    law.interval("N", C, level=90)
  assert presets.preset("hoffmann2022").interval("N", C) is None
  assert law.interval("loss", C, level=0.9) == pytest.approx(
      tuple(np.percentile(opt.optimal_loss(C, law.samples), [5, 95])))


def _break(doc, dotted, value):
  doc = json.loads(json.dumps(doc))
  *parents, last = dotted.split(".")
  target = doc
  for key in parents:
    target = target[int(key)] if isinstance(target, list) else target[key]
  if value is KeyError:
    del target[last]
  elif isinstance(target, list):
    target[int(last)] = value
  else:
    target[last] = value
  return doc


@pytest.mark.parametrize("dotted,value,message", [
    ("law.alpha", -1, "law.alpha: expected a positive finite number, got -1"),
    ("law.beta", "0.3", "law.beta: expected a positive finite number"),
    ("law.E", True, "law.E: expected a non-negative finite number, got true"),
    ("ci", KeyError, "missing top-level key ci"),
    ("law.B", KeyError, "law: missing key B"),
    ("schema", "chinchax/law/v0", "schema: expected 'chinchax/law/v3' (or 'chinchax/law/v2', 'chinchax/law/v1')"),
    ("warnings", "none", "warnings: expected a list of strings"),
    ("recommended.approach", "4", "recommended.approach: expected one of 1, 2, 3"),
    ("recommended", KeyError, "missing top-level key recommended"),
    ("bootstrap.columns", ["a", "b", "log_kN", "log_kD"], "bootstrap.columns: expected"),
    ("approaches.1.ci", {"level": 0.9, "a": [0.6, 0.5]}, "approaches.1.ci.a: lower end"),
    ("ci.alpha", [0.4, 0.3], "ci.alpha: lower end 0.4 is above upper end 0.3"),
    ("ci.level", 95, "ci.level: expected a number strictly between 0 and 1"),
    ("ci.a", [0.5], "ci.a: expected an interval [lo, hi]"),
    ("bootstrap.samples.3", [1.8, 480.0, 2000.0, 0.35], "bootstrap.samples[3]: expected 5"),
    ("bootstrap.samples.5.3", -0.2, "bootstrap.samples[5][3] (alpha): expected a positive"),
    ("bootstrap.n", 63, "bootstrap.samples: expected a list of bootstrap.n = 63 rows, got 64"),
    ("conventions.params", "kaplan", "conventions.params: expected one of total, non_embedding"),
    ("conventions.flops", "6nd", "conventions.flops: expected one of 6ND, chinchilla"),
    ("optimal.a", 0.6, "optimal.a: 0.6 does not match beta/(alpha+beta)"),
    ("approaches.4", {}, "approaches.4: unknown approach"),
    ("approaches.1", [1, 2], "approaches.1: expected an object"),
    ("fit.starts_at_best", 99, "fit.starts_at_best: 99 is more than fit.starts = 64"),
    ("data.N", [1e9, 1e7], "data.N: lower end"),
    ("data.C", [0, 1e20], "data.C[0]: expected a positive finite number, got 0"),
    ("provenance.inputs", "runs.jsonl", "provenance.inputs: expected a list of paths"),
])
def test_bad_law_is_refused_naming_the_field(tmp_path, dotted, value, message):
  bad = _break(synthetic_law(), dotted, value)
  with pytest.raises(UserError) as e:
    law_lib.validate_law(bad)
  assert message in str(e.value)
  path = tmp_path / "law.json"
  path.write_text(json.dumps(bad))
  with pytest.raises(UserError) as e:
    law_lib.load_law(path)
  assert str(path) in str(e.value) and message in str(e.value)
  with pytest.raises(UserError):  # nothing is written
    law_lib.save_law(tmp_path / "out.json", bad)
  assert not (tmp_path / "out.json").exists()


def test_unreadable_or_non_json_file_names_the_path(tmp_path):
  missing = tmp_path / "nope.json"
  with pytest.raises(UserError, match="cannot read law file .*nope.json"):
    law_lib.load_law(missing)
  garbled = tmp_path / "garbled.json"
  garbled.write_text('{"schema": ')
  with pytest.raises(UserError, match="garbled.json is not valid JSON"):
    law_lib.load_law(garbled)
  listy = tmp_path / "list.json"
  listy.write_text("[1, 2]")
  with pytest.raises(UserError, match="expected a law.json object"):
    law_lib.load_law(listy)


def test_law_without_bootstrap_has_null_ci():
  doc = law_lib.build_law(E=1.0, A=100.0, B=100.0, alpha=0.3, beta=0.3)
  assert doc["ci"] is None and doc["bootstrap"] is None and doc["data"]["C"] is None
  law = law_lib.ScalingLaw.from_dict(doc)
  assert law.samples is None and law.fitted_range is None
  assert law.interval("loss", 1e21) is None


# ---------------------------------------------------------------------------- presets


def test_presets_carry_the_published_values():
  h = presets.preset("hoffmann2022")
  assert (h.E, h.A, h.B, h.alpha, h.beta) == (1.69, 406.4, 410.7, 0.34, 0.28)
  b = presets.preset("besiroglu2024")
  assert (b.E, b.A, b.B, b.alpha, b.beta) == (1.8172, 482.01, 2085.43, 0.3478, 0.3658)
  assert h.samples is None and h.fitted_range == (1e18, 1e22)
  # The replication's point: its law makes Chinchilla itself (70B params, 1.4T tokens)
  # close to compute-optimal, about 20 tokens per parameter.
  N, D = b.optimum(6 * 70e9 * 1.4e12)
  assert N == pytest.approx(70e9, rel=0.1) and 15 < D / N < 25


def test_unknown_preset_lists_the_names():
  with pytest.raises(UserError, match="unknown preset 'kaplan2020'.*besiroglu2024, hoffmann2022"):
    presets.preset("kaplan2020")


def test_numpy_fit_results_are_stored_as_plain_json(tmp_path):
  doc = law_lib.build_law(
      E=np.float64(1.8), A=np.float64(480.0), B=np.float64(2000.0), alpha=np.float64(0.35),
      beta=np.float64(0.36), n_starts=np.int64(64), n_at_best=np.int64(3),
      objective=np.float64(0.01), approaches={"2": {"b_samples": np.array([0.5, np.nan])}})
  assert doc["fit"]["starts"] == 64 and type(doc["fit"]["starts"]) is int
  assert doc["approaches"]["2"]["b_samples"] == [0.5, None]
  law_lib.save_law(tmp_path / "law.json", doc)
  assert law_lib.load_law(tmp_path / "law.json") == doc
  with pytest.raises(ValueError, match=r"shape \(n, 5\)"):
    law_lib.build_law(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.36, samples=np.ones((5, 4)))


def test_round_trip_through_a_gs_bucket(fake_gcs):  # noqa: F811
  doc = synthetic_law()
  law_lib.save_law("gs://bkt/fits/law.json", doc)
  assert law_pack.unpack(json.loads(fake_gcs.local("gs://bkt/fits/law.json").read_text())) == doc
  assert law_lib.load_law("gs://bkt/fits/law.json") == doc
  assert law_lib.ScalingLaw.load("gs://bkt/fits/law.json").to_dict() == doc
  with pytest.raises(UserError, match="cannot read law file gs://bkt/nope.json"):
    law_lib.load_law("gs://bkt/nope.json")


# ---------------------------------------------------------------------------- v1, power form


def test_a_v1_file_is_read_as_v2(tmp_path):
  """A law.json of schema v1 (before warnings and recommendations) loads, upgraded."""
  doc = synthetic_law(fit_warnings=["E=1.8 is not below the smallest observed loss 1.7"])
  v1 = {k: doc[k] for k in ("law", "ci", "optimal", "approaches", "conventions", "fit", "data",
                            "bootstrap", "provenance")}
  v1["schema"] = "chinchax/law/v1"
  del v1["law"]["approach"]
  for key in ("kind", "columns"):
    del v1["bootstrap"][key]
  path = tmp_path / "v1.json"
  path.write_text(json.dumps(v1))
  law = law_lib.ScalingLaw.load(path)
  assert law.doc["schema"] == "chinchax/law/v3" and law.recommended["approach"] == "3"
  assert law.warnings == ["Approach 3: E=1.8 is not below the smallest observed loss 1.7"]
  assert (law.E, law.alpha) == (doc["law"]["E"], doc["law"]["alpha"])
  np.testing.assert_array_equal(law.samples, np.asarray(doc["bootstrap"]["samples"]))
  assert law_lib.load_law(path)["notes"][0].startswith("read from a chinchax/law/v1 file")
  law.save(tmp_path / "v2.json")  # written back as the current schema
  assert json.loads((tmp_path / "v2.json").read_text())["schema"] == "chinchax/law/v3"
  broken = dict(v1, law={"form": v1["law"]["form"], "E": 1.0})
  path.write_text(json.dumps(broken))
  with pytest.raises(UserError, match="v1.json: law: missing keys A, B, alpha, beta"):
    law_lib.load_law(path)


P = np.array([0.46, 0.54, -1.2, 1.0])  # a, b, log_kN, log_kD


def power_law(**kw):
  rng = np.random.default_rng(3)
  samples = P + np.array([0.02, 0.02, 0.3, 0.3]) * rng.standard_normal((80, 4))
  return law_lib.build_power_law(a=P[0], b=P[1], log_kN=P[2], log_kD=P[3], samples=samples,
                                 seed=3, N=[1e6, 1e8], D=[1e8, 1e10], **kw)


def test_an_allocation_law_plans_n_and_d_and_refuses_losses(tmp_path):
  doc = power_law(bootstrap_kind="residual")
  assert doc["law"]["form"] == "N* = k_N·C^a, D* = k_D·C^b" and doc["law"]["approach"] == "2"
  assert doc["bootstrap"]["columns"] == ["a", "b", "log_kN", "log_kD"]
  assert doc["bootstrap"]["kind"] == "residual" and doc["optimal"]["a"] == P[0]
  law_lib.save_law(tmp_path / "law.json", doc)
  law = law_lib.ScalingLaw.load(tmp_path / "law.json")
  assert not law.predicts_loss and law.approach == "2"
  C = 3e21
  N, D = law.optimum(C)
  assert N == pytest.approx(math.exp(P[2]) * C**P[0], rel=1e-12)
  assert D == pytest.approx(math.exp(P[3]) * C**P[1], rel=1e-12)
  assert law.budget_for_params(N) == pytest.approx(C, rel=1e-10)
  assert law.budget_for_tokens(D) == pytest.approx(C, rel=1e-10)
  N_S = [math.exp(s[2]) * C**s[0] for s in law.samples]
  assert law.interval("N", C) == pytest.approx(tuple(np.percentile(N_S, [5, 95])), rel=1e-9)
  for ask in (lambda: law.predict(1e9, 1e10), lambda: law.optimal_loss(C),
              lambda: law.predict_interval(1e9, 1e10), lambda: law.E):
    with pytest.raises(UserError, match="comes from Approach 2.*predicts no loss"):
      ask()
  table = doc["optimal"]["tokens_per_param"]
  assert all(row["loss"] is None for row in table)
  with pytest.raises(UserError, match=r"law: missing keys a, b, log_kN, log_kD"):
    law_lib.validate_law(_break(doc, "law.form", "N* = k_N·C^a, D* = k_D·C^b") | {
        "law": {"form": "N* = k_N·C^a, D* = k_D·C^b"}})
  with pytest.raises(UserError, match=r"optimal.a: .* does not match law.a"):
    law_lib.validate_law(_break(doc, "optimal.a", 0.5))
  with pytest.raises(UserError, match=r"bootstrap.samples\[2\]: expected 4 values"):
    law_lib.validate_law(_break(doc, "bootstrap.samples.2", [0.5, 0.5, 1.0]))
