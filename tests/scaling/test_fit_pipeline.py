"""chinchax.fit / chinchax.plan (scaling.api, scaling.pipeline) on runs from known laws:
the recommendation, the warnings channel, agreement, intervals and the data-constrained law."""

import copy
import dataclasses

import numpy as np
import pytest

import chinchax
from chinchax.errors import UserError
from chinchax.scaling.judgement import caveats
from chinchax.scaling.numerics import fmt
from chinchax.scaling.isoflop import fit as isoflop
from chinchax.scaling.isoflop import bootstrap as isoflop_bootstrap
from chinchax.scaling.law import artifact as law_lib
from tests.helpers import synthetic_law as syn


@pytest.fixture(scope="module")
def well_determined(tmp_path_factory):
  """One Approach 2 + 3 fit of 45 noisy runs of the Chinchilla law, written to law.json."""
  out = tmp_path_factory.mktemp("fit") / "law.json"
  law = chinchax.fit(syn.isoflop(noise=0.003), bootstrap=200, ci=0.8, out=str(out))
  return law, out


def test_fit_from_arrays_recovers_the_law_and_recommends_approach_3(well_determined):
  law, out = well_determined
  assert isinstance(law, law_lib.ScalingLaw) and law.source == str(out)
  assert law.predicts_loss and law.recommended["approach"] == "3"
  assert law.a == pytest.approx(syn.a_true(), abs=0.01)
  assert law.approaches["2"]["a"] == pytest.approx(syn.a_true(), abs=0.01)
  # Intervals at the level asked for, on every parameter, a and b, per approach.
  assert law.ci_level == 0.8 and law.doc["ci"]["level"] == 0.8
  for name in ("E", "A", "B", "alpha", "beta", "a", "b"):
    lo, hi = law.doc["ci"][name]
    assert lo < hi
  for k in ("2", "3"):
    ci = law.approaches[k]["ci"]
    assert ci["level"] == 0.8 and ci["a"][0] < law.approaches[k]["a"] < ci["a"][1]
  lo, hi = law.interval("N", 1e22)  # at any budget, from the stored draws
  assert lo < law.optimum(1e22)[0] < hi
  row = law.doc["optimal"]["tokens_per_param"][1]
  assert row["N_ci"][0] < row["N"] < row["N_ci"][1]
  # The file is what the object holds; nothing implausible is reported.
  assert law_lib.load_law(out) == law.to_dict()
  assert not law.approaches["3"]["problems"] and law.doc["fit"]["disagreements"] == []
  assert law.notes[0].startswith("skipped: Approach 1 needs loss curves")


def test_plan_takes_the_law_object_a_path_or_a_preset(well_determined):
  law, out = well_determined
  p = chinchax.plan(law, flops=1e21)
  assert p.N == pytest.approx(law.optimum(1e21)[0]) and p.C == 1e21
  assert chinchax.plan(str(out), flops=1e21).to_dict() == p.to_dict()
  assert "parameters N*" in str(p) and p.warnings  # 10x beyond the fitted budgets
  pair = chinchax.plan(law, params=1e9, tokens=2e10, ci=0.5)
  lo, hi = pair["given"]["loss_interval"]
  assert lo < pair.loss < hi and pair.loss == pytest.approx(law.predict(1e9, 2e10))
  assert chinchax.plan("hoffmann2022", flops=1e20)["law"]["E"] == 1.69
  with pytest.raises(UserError, match="expected a number"):
    chinchax.plan(law, flops="1e21")


def test_approach_2_alone_writes_an_allocation_law(tmp_path):
  law = chinchax.fit(syn.isoflop(noise=0.002), approaches="2", bootstrap=100,
                     out=str(tmp_path / "law.json"))
  assert law.form == "N* = k_N·C^a, D* = k_D·C^b" and set(law.approaches) == {"2"}
  assert law.recommended == {"approach": "2", "why": "asked for (--approach=2)"}
  assert law.a == law.approaches["2"]["a"] == pytest.approx(syn.a_true(), abs=0.01)
  assert law.doc["bootstrap"]["n"] > 50 and law.doc["ci"]["a"][0] < law.a
  plan = chinchax.plan(str(tmp_path / "law.json"), params=1e9, tokens=2e10)
  assert plan.loss is None and "predicts no loss" in plan["notes"][0]


def test_warnings_of_the_approaches_reach_the_law():
  runs = syn.isoflop(noise=0.002)
  small = syn.isoflop(budgets=(3e20,), sizes=2)  # a budget of 2 sizes is dropped
  runs = {k: np.concatenate([runs[k], small[k]]) for k in runs}
  law = chinchax.fit(runs, approaches="2", bootstrap=50)
  dropped = "budget C=3e20 dropped: 2 distinct sizes, need 3"
  assert dropped in law.approaches["2"]["warnings"]
  assert f"Approach 2: {dropped}" in law.warnings


def test_disagreeing_approaches_are_named_with_both_values():
  entries = {
      "2": {"a": 0.452, "b": 0.548, "ci": {"level": 0.9, "a": [0.44, 0.46],
                                           "b": [0.54, 0.56]}, "warnings": []},
      "3": {"a": 0.351, "b": 0.649, "alpha": 0.7, "beta": 0.35, "problems": [],
            "ci": {"level": 0.9, "a": [0.34, 0.36], "b": [0.64, 0.66]}},
  }
  wa, wb = caveats.agreement(entries)
  assert wa.startswith("Approaches 2 and 3 disagree on a: 0.452 [0.440, 0.460] vs 0.351 "
                       "[0.340, 0.360], disjoint intervals")
  assert wb.startswith("Approaches 2 and 3 disagree on b: 0.548")
  assert "asymmetric exponents (alpha=0.7, beta=0.35)" in wa
  entries["3"]["ci"]["a"] = [0.34, 0.441]
  (w,) = caveats.agreement(entries)  # b alone still apart
  assert w.startswith("Approaches 2 and 3 disagree on b: 0.548 [0.540, 0.560] vs 0.649 "
                      "[0.640, 0.660]")
  entries["3"]["ci"]["b"] = [0.56, 0.66]
  assert caveats.agreement(entries) == []  # touching intervals overlap
  del entries["2"]["ci"]
  assert caveats.agreement(entries) == []  # nothing to compare


def test_what_makes_approach_3_poorly_determined():
  good = {"E": 1.7, "A": 400.0, "B": 410.0, "alpha": 0.34, "beta": 0.28, "warnings": [],
          "ci": {"level": 0.9, "a": [0.43, 0.47], "alpha": [0.3, 0.4], "beta": [0.25, 0.3]},
          "bootstrap": {"n_resamples": 100, "dropped": 10}}
  assert caveats.approach3_problems(good, 10) == []
  # Issue 12's smoke law: alpha 2.42, and its siblings, one at a time.
  for change, n, expected in (
      ({"alpha": 2.42}, 30, "alpha = 2.42 is outside the plausible [0.05, 1.5]"),
      ({"beta": 0.04}, 30, "beta = 0.04 is outside the plausible [0.05, 1.5]"),
      ({"A": 3e13}, 30, "A = 3e13 ran away (above 1e12)"),
      ({}, 9, "it fits 5 parameters to only 9 runs (at least 10 needed)"),
      ({"ci": {"level": 0.9, "a": [0.17, 0.56]}}, 30,
       "its 90% interval of a, [0.17, 0.56], is wider than 0.3"),
      ({"ci": {"level": 0.9, "a": [0.4, 0.5], "beta": [0.05, 0.9]}}, 30,
       "its interval of beta, [0.05, 0.9], spans more than 10x"),
      ({"bootstrap": {"n_resamples": 100, "dropped": 11}}, 30,
       "11 of 100 bootstrap refits gave no law"),
      ({"warnings": ["E=0.001 ran off to 0"]}, 30, "the fit itself warns (see the warnings)")):
    assert caveats.approach3_problems({**good, **change}, n) == [expected]
  poor = {"3": {**good, "problems": ["x"]}}
  assert caveats.recommend(poor)[0] == "3"  # the only one: kept, and said to be poor
  # Approach 1 or 2 stands in only with an interval of a no wider than Approach 3's (0.04).
  narrow, wide = {"ci": {"a": [0.44, 0.47]}}, {"ci": {"a": [0.2, 0.8]}}
  assert caveats.recommend({**poor, "1": narrow})[0] == "1"
  assert caveats.recommend({**poor, "1": narrow, "2": narrow})[0] == "2"
  assert caveats.recommend({**poor, "1": narrow, "2": wide})[0] == "1"
  k, why = caveats.recommend({**poor, "1": {}, "2": wide})
  assert k == "3" and why == (
      "Approach 3's law is poorly determined (see the warnings), and no other approach is "
      "better determined: Approach 2's interval of a is 0.60 wide against Approach 3's 0.04; "
      "Approach 1 has no interval of a")
  unfit = {**narrow, "lack_of_fit": {"fits": False}}
  assert caveats.recommend({**poor, "2": unfit})[0] == "3"
  assert caveats.recommend({"3": {**good, "problems": []}, "2": narrow})[0] == "3"
  assert caveats.recommend(poor, ["3"]) == ("3", "asked for (--approach=3)")


def test_disagreement_reaches_law_json_and_the_headline(monkeypatch):
  real = isoflop_bootstrap.bootstrap_isoflop

  def shifted(runs, **kw):  # Approach 2's draws moved off by 0.1 in a
    out = real(runs, **kw)
    return {**out, "a": out["a"] + 0.1, "b": out["b"] - 0.1}

  fit = isoflop.fit_isoflop  # and its estimate with them: an interval holds its estimate
  monkeypatch.setattr(isoflop, "fit_isoflop", lambda runs, **kw: dataclasses.replace(
      fit(runs, **kw), a=fit(runs, **kw).a + 0.1, b=fit(runs, **kw).b - 0.1))
  monkeypatch.setattr(isoflop_bootstrap, "bootstrap_isoflop", shifted)
  law = chinchax.fit(syn.isoflop(noise=0.002), bootstrap=50)
  w = law.doc["fit"]["disagreements"][0]
  assert w in law.warnings and "Approaches 2 and 3 disagree on a: " in w
  assert "  the approaches DISAGREE: their intervals do not overlap (see the warnings)" in (
      caveats.headline(law.doc))


def test_the_headline_says_how_far_apart_agreeing_approaches_are():
  law = chinchax.fit(syn.isoflop(noise=0.002), bootstrap=50)
  assert not law.doc["fit"]["disagreements"]
  a = [law.approaches[k]["a"] for k in ("2", "3")]
  assert ("  Approaches 2 and 3 agree: their intervals of a and b overlap (their estimates of "
          f"a are {abs(a[0] - a[1]):.3f} apart)") in caveats.headline(law.doc)


def test_the_agreement_line_names_the_approaches_it_compared():
  """Only approaches with an interval are compared, and the line names them (an Approach 1
  whose bootstrap failed is left out of it)."""
  law = chinchax.fit(syn.isoflop(noise=0.002), bootstrap=50)
  doc = copy.deepcopy(law.doc)
  doc["approaches"]["1"] = {**doc["approaches"]["2"], "a": doc["approaches"]["2"]["a"] + 0.5}
  a = [doc["approaches"][k]["a"] for k in ("1", "2", "3")]
  assert ("  Approaches 1, 2 and 3 agree: their intervals of a and b overlap (their estimates "
          f"of a are {max(a) - min(a):.3f} apart)") in caveats.headline(doc)
  doc["approaches"]["1"]["ci"] = None
  assert any(l.startswith("  Approaches 2 and 3 agree") for l in caveats.headline(doc))


def test_approach_1_without_an_interval_says_what_its_bootstrap_needs():
  """A ladder of 7 sizes, 5 per budget at 6 budgets: the runs of one N form its curve, and
  most resamples of the 7 curves lack two sizes that each win a whole range of C."""
  sizes, budgets = np.logspace(8, 10, 7), np.logspace(19, 21, 6)
  N = np.concatenate([sizes[i * 2 // 5:i * 2 // 5 + 5] for i in range(6)])
  D = np.repeat(budgets, 5) / (6 * N)
  loss = (1.69 + 406.4 / N**0.34 + 410.7 / D**0.28) * np.exp(
      0.002 * np.random.default_rng(0).standard_normal(len(N)))
  law = chinchax.fit({"N": N, "D": D, "loss": loss}, approaches="1", bootstrap=200)
  e = law.approaches["1"]
  assert e["ci"] is None and e["bootstrap"]["dropped"] > 100
  assert e["warnings"][0] == (
      f"no interval: {e['bootstrap']['dropped']} of 200 bootstrap resamples could not be "
      "fitted; a resample of whole curves needs two sizes that each have the lowest loss over a "
      "range of C: train more sizes, with curves that overlap in C")


def test_three_sizes_per_budget_still_give_an_interval_of_a():
  law = chinchax.fit(syn.isoflop(sizes=3, spread=3.0, noise=0.002), approaches="2",
                     bootstrap=200)
  ci = law.approaches["2"]["ci"]
  assert ci is not None and ci["a"][0] < law.approaches["2"]["a"] < ci["a"][1]


def test_bad_arguments_are_one_line_user_errors():
  runs = syn.isoflop()
  for kw, message in (({"ci": 1.0}, "ci must be a level strictly between 0 and 1"),
                      ({"bootstrap": -1}, "bootstrap must be a whole number >= 0"),
                      ({"approaches": "2,4"}, "approaches: give a comma list of 1, 2, 3"),
                      ({"base_law": "no/such/law.json"}, "cannot read law file")):
    with pytest.raises(UserError, match=message):
      chinchax.fit(runs, **kw)
  with pytest.raises(UserError, match="runs: missing column .loss."):
    chinchax.fit({"N": [1.0], "tokens": [2.0]})


# ---------------------------------------------------------------------------- data-constrained


def test_data_constrained_constants_from_a_given_base_law(tmp_path):
  """Runs that repeat data at known R_D*, R_N* on the Chinchilla law, fitted with that law
  held fixed (--base-law): the constants come back, with intervals that cover them."""
  base = tmp_path / "base.json"
  law_lib.save_law(base, law_lib.build_law(**dict(zip(("E", "A", "B", "alpha", "beta"),
                                                       syn.HOFFMANN)),
                                           N=[1e7, 1e9], D=[1e8, 1e11]))
  runs = syn.repeated(4.0, 20.0, noise=0.002, epochs=(2, 4, 8, 16, 40))
  law = chinchax.fit(runs, base_law=str(base), bootstrap=100, ci=0.95)
  dc = law.data_constrained
  assert dc["base_source"] == f"given: {base}" and dc["repeated"] == 50
  assert dc["R_D_star"] == pytest.approx(4.0, rel=0.05)
  assert dc["R_N_star"] == pytest.approx(20.0, rel=0.2)
  assert dc["ci"]["level"] == 0.95
  assert dc["ci"]["R_D_star"][0] < 4.0 < dc["ci"]["R_D_star"][1]
  assert dc["ci"]["R_N_star"][0] < 20.0 < dc["ci"]["R_N_star"][1]
  # No approach could run on these runs: the law is the base law, and it plans with them.
  assert law.theta.tolist() == list(syn.HOFFMANN)
  plan = chinchax.plan(law, flops=1e21, unique_tokens=1e10)["data_constrained"]
  assert plan["source"] == "fitted" and plan["R_D_star"] == dc["R_D_star"]
  assert plan["ci"]["R_N_star"] == dc["ci"]["R_N_star"]


def test_an_unidentified_or_poorly_pinned_constant_is_warned_about():
  """R_N* is identified only by runs larger than compute-optimal for their unique tokens:
  with none it is held at the published value; with 3 its interval is wider than 10x."""
  base = law_lib.ScalingLaw.from_dict(law_lib.build_law(
      **dict(zip(("E", "A", "B", "alpha", "beta"), syn.HOFFMANN))))
  runs = syn.repeated(4.0, 20.0, noise=0.003, epochs=(2, 4, 8))
  smallest = {k: v[runs["N"] <= 1e7 + 1] for k, v in runs.items()}  # all below N*(U)
  law = chinchax.fit(smallest, base_law=base, bootstrap=60)
  dc = law.data_constrained
  assert dc["excess_params"] == 0 and dc["fixed"] == ["R_N_star"]
  assert dc["R_N_star"] == 5.309743 and dc["ci"]["R_N_star"] is None
  (w,) = [w for w in law.warnings if "R_N*" in w]
  assert "R_N* is not identified by these runs" in w and "published 5.31" in w
  assert dc["R_D_star"] == pytest.approx(4.0, rel=0.1)

  two = {k: v[runs["N"] <= 3.2e7] for k, v in runs.items()}  # 3 runs above N*(U)
  law = chinchax.fit(two, base_law=base, bootstrap=60)
  dc = law.data_constrained
  assert dc["excess_params"] == 3 and dc["fixed"] == []
  lo, hi = dc["ci"]["R_N_star"]
  assert hi is None or hi > 10 * lo  # 3 runs do not bound R_N* (20) above
  (w,) = [w for w in law.warnings if "R_N*" in w]
  assert w.startswith(f"data-constrained: R_N* = {fmt.num(dc['R_N_star'])} [")
  assert "(N > N*(min(D, U)); 3 here)" in w
  assert not any("R_D*" in w for w in law.warnings)
  assert law.to_dict()["data_constrained"]["warnings"] == [w]
