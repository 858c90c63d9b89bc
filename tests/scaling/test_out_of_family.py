"""Every estimator on truths outside its model family (tests/helpers/truths.py): each either
holds the true compute-optimal exponent in its interval or warns that its model does not fit;
Approach 2's default is right on them; "inside" is read from the data; every interval is its
own estimator's and holds its estimate."""

import dataclasses
import warnings

import numpy as np
import pytest

import chinchax
from chinchax.errors import UserError
from chinchax.scaling.isoflop import fit as isoflop
from chinchax.scaling.isoflop import bootstrap as isoflop_bootstrap
from chinchax.scaling.isoflop import budgets as isoflop_budgets
from chinchax.scaling.isoflop import local as isoflop_local
from chinchax.scaling.numerics import intervals
from chinchax.scaling.runs.table import budget_groups, make_runs
from tests.helpers import truths
from tests.scaling import synthetic


def _quiet(fn, *args, **kw):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = fn(*args, **kw)
  return out, [str(w.message) for w in caught]


def _arrays(runs):
  return {"N": runs.N, "D": runs.D, "loss": runs.loss, "budget": runs.budget}


def test_the_true_exponents_agree_with_closed_forms():
  """The numerical minimiser behind every truth, on laws whose optimum is known exactly."""
  _, _, _, alpha, beta = truths.HOFFMANN
  assert truths.a_true(truths.chinchilla, truths.BUDGETS) == pytest.approx(
      beta / (alpha + beta), abs=1e-6)
  # Kaplan: minimising (N_c/N)^r + 6·D_c·N/C gives N* ∝ C^(1/(1+r)), r = alpha_N/alpha_D.
  assert truths.a_true(truths.kaplan, truths.BUDGETS) == pytest.approx(
      0.095 / (0.076 + 0.095), abs=1e-6)
  # The broken law's local exponent changes across the budgets: a single power law is a fit.
  C = truths.BUDGETS
  log_N = np.log([truths.N_star(truths.broken, c) for c in C])
  slopes = np.diff(log_N) / np.diff(np.log(C))
  assert slopes[-1] - slopes[0] > 0.04


def _vp_unchecked(runs) -> float:
  """a of the joint profile fit as it stands, before any check or fallback."""
  bud, _ = isoflop.screen(runs, budget_groups(runs), runs.loss)
  est = isoflop.estimate(bud, runs.loss[bud.idx_n][None], "vp")
  return float(isoflop.power_laws(bud, est.log_N_star_RxK, np.ones(len(bud.C_K), bool))[0][0])


def test_approach_2_is_right_on_the_undertraining_truth():
  t = truths.TRUTHS["undertrained"]
  a_true = t.a()
  clean = truths.sweep(t, noise=0.0, n_diverged=0)
  assert _vp_unchecked(clean) - a_true > 0.05  # the trap: vp's shape set by the D/N < 1 runs
  fit, caught = _quiet(isoflop.fit_isoflop, clean)
  assert fit.method == "local" and abs(fit.a - a_true) < 0.01, (fit.a, a_true)
  asked, caught = _quiet(isoflop.fit_isoflop, clean, "vp")
  assert asked.method == "local" and abs(asked.a - a_true) < 0.01
  assert asked.lack_of_fit["ratio"] > 3 and "undertrained" in asked.lack_of_fit["cause"]
  assert any("the joint profile fit (vp) does not fit these runs" in w
             and "badly undertrained runs" in w and "local estimate" in w for w in caught)
  # With heavy-tailed noise and diverged runs, over seeds.
  a = [_quiet(isoflop.fit_isoflop, truths.sweep(t, seed=s))[0].a for s in range(6)]
  assert abs(np.mean(a) - a_true) < 0.01 and max(np.abs(np.array(a) - a_true)) < 0.03, a


# Approach 3's lack-of-fit warning on each sweep below (seed 3), and the cause it must name.
# The causes follow from how the sweeps are made: 2 diverged runs 0.5-2 nats off dominate a
# smooth law's residuals wherever they are added; the undertraining truth's extra term is a
# few nats at D/N ~ 0.05, larger still; Kaplan's law (no irreducible term) departs from
# E + A/N^alpha + B/D^beta most at its smallest D/N. That the cooldown and broken-exponent
# truths without diverged runs pass the check (residuals under 3x the noise: 2.4x and 1.6x)
# is this seed's outcome, pinned here.
_FEW_RUNS = "a few runs far off the rest (diverged, or a broken record?)"
_UNDERTRAINED = "badly undertrained runs (D/N < 1, "
_APPROACH_3_MISFIT = {("broken", 2): _FEW_RUNS, ("constant_lr", 2): _FEW_RUNS,
                      ("kaplan", 2): _FEW_RUNS, ("undertrained", 2): _UNDERTRAINED,
                      ("broken", 0): None, ("constant_lr", 0): None,
                      ("kaplan", 0): _UNDERTRAINED, ("undertrained", 0): _UNDERTRAINED}
_MISFIT = "the law E + A/N^alpha + B/D^beta does not fit these runs: its residuals"


# As specified (heavy-tailed noise, 2 diverged runs), and without the diverged runs.
@pytest.mark.parametrize("diverged", [2, 0])
@pytest.mark.parametrize("name", sorted(truths.TRUTHS))
def test_every_interval_holds_the_truth_and_a_misfit_is_said(name, diverged):
  """Every approach's 90% interval holds the true a (truths.a_true: the truth's loss minimised
  along each budget's IsoFLOP curve, no estimator involved), with no excuse: on this seed
  every interval holds it, Approach 3's included where its model does not fit, so a warning
  excuses no miss. Approach 3 says it does not fit exactly where the sweep's construction
  says it cannot (_APPROACH_3_MISFIT), with the cause the sweep put there: its diverged runs
  (counted), or its undertrained runs (counted here from the sweep's N and D)."""
  t = truths.TRUTHS[name]
  a_true = t.a()
  runs = truths.sweep(t, seed=3, n_diverged=diverged)
  law = chinchax.fit(_arrays(runs), bootstrap=60)
  assert sorted(law.approaches) == ["2", "3"]
  for k, entry in law.approaches.items():
    lo, hi = entry["ci"]["a"]
    assert lo <= a_true <= hi, (k, entry["a"], (lo, hi), a_true, entry["warnings"])
  said = [w for w in law.approaches["3"]["warnings"] if "does not fit these runs" in w]
  cause = _APPROACH_3_MISFIT[name, diverged]
  lof = law.approaches["3"]["lack_of_fit"]
  if cause is None:
    assert said == [] and lof["fits"] is True and lof["ratio"] < 3, (said, lof)
  else:
    assert len(said) == 1, law.approaches["3"]["warnings"]
    w = said[0]
    assert w.startswith(_MISFIT) and cause in w and "above 3x is a lack of fit" in w, w
    assert lof["fits"] is False and lof["ratio"] > 3, lof
    if cause == _FEW_RUNS:
      assert f"; {diverged} runs carry " in w, w
    else:
      n_under = int(np.sum(runs.D < runs.N))
      assert f"{_UNDERTRAINED}{n_under} of {len(runs.N)})" in w, (w, n_under)
  # Approach 2's default reads the local estimate on these sweeps: its model is no profile
  # shape, and nothing says it does not fit.
  assert law.approaches["2"]["method"] == "local"
  assert not any("does not fit these runs" in w for w in law.approaches["2"]["warnings"])


def test_a_model_of_the_right_family_passes_the_lack_of_fit_check():
  p = synthetic.law(0.34, 0.28)
  for seed in range(3):
    runs = synthetic.isoflop_runs(p, n=7, drift=3.0, noise=0.003, seed=seed)
    fit, caught = _quiet(isoflop.fit_isoflop, runs, "vp")
    assert fit.method == "vp" and fit.lack_of_fit["fits"], fit.lack_of_fit
    assert fit.lack_of_fit["ratio"] < 2 and not caught
    centred = synthetic.isoflop_runs(p, n=7, noise=0.003, seed=seed)
    auto, _ = _quiet(isoflop.fit_isoflop, centred)  # every minimum inside: the default is local
    assert auto.method == "local" and abs(auto.a - p["a"]) < 0.02
    # A grid whose largest budget holds its lowest loss at its smallest size: the default
    # reads vp (it places that minimum), which fits and agrees with the local estimate.
    edged = synthetic.isoflop_runs(p, n=5, drift=4.0, noise=0.003, seed=seed)
    auto, _ = _quiet(isoflop.fit_isoflop, edged)
    assert auto.method == "vp" and auto.lack_of_fit["agreement"]["agrees"]


def _edge_budgets(runs) -> set[float]:
  """The budgets whose lowest loss is at their smallest or largest size, read directly."""
  out = set()
  for C in np.unique(runs.budget):
    sel = runs.budget == C
    j = int(np.argmin(runs.loss[sel]))
    if runs.N[sel][j] in (runs.N[sel].min(), runs.N[sel].max()):
      out.add(float(C))
  return out


def test_the_default_says_when_a_minimum_rests_on_the_profile_shape():
  """The default reads vp only where the runs of some budget do not place its minimum; that
  minimum then comes from vp's profile shape, which no check on the runs can confirm (see
  the out-of-family coverage of vp in isoflop_minima), so law.json says so in its notes."""
  p = synthetic.law(0.34, 0.28)
  for seed in range(2):
    edged = synthetic.isoflop_runs(p, n=5, drift=4.0, noise=0.003, seed=seed)
    edges = _edge_budgets(edged)
    assert edges  # the grid this test needs
    auto, _ = _quiet(isoflop.fit_isoflop, edged)
    assert auto.method == "vp"
    (note,) = auto.notes
    named = {float(c) for c in note.split("C=")[1].split(" do not")[0].split(", ")}
    assert named == edges, (note, edges)
    assert "--approach2-method=local" in note
    # Nothing rests on the shape when the runs place every minimum, or when vp was asked for.
    centred = synthetic.isoflop_runs(p, n=7, noise=0.003, seed=seed)
    assert not _edge_budgets(centred) and _quiet(isoflop.fit_isoflop, centred)[0].notes == ()
    assert _quiet(isoflop.fit_isoflop, edged, "vp")[0].notes == ()
  law, _ = _quiet(chinchax.fit, _arrays(edged), approaches="2", bootstrap=20)
  (interval,) = isoflop_bootstrap.bootstrap_isoflop(edged, 20)["notes"]
  assert "half the joint fit's bootstrap and half the local estimate's" in interval
  assert law.doc["approaches"]["2"]["notes"] == [note, interval]
  assert f"Approach 2: {note}" in law.doc["notes"]
  assert f"Approach 2: {interval}" in law.doc["notes"]
  # With no bootstrap there is no interval to speak of.
  law, _ = _quiet(chinchax.fit, _arrays(edged), approaches="2", bootstrap=0)
  assert law.doc["approaches"]["2"]["notes"] == [note]


def test_approach_3_is_checked_for_lack_of_fit_too():
  bad = truths.sweep(truths.TRUTHS["undertrained"], noise=0.0, n_diverged=0)
  e = chinchax.fit(_arrays(bad), approaches="3", bootstrap=0).approaches["3"]
  assert e["lack_of_fit"]["fits"] is False and e["lack_of_fit"]["ratio"] > 3
  assert any("the law E + A/N^alpha + B/D^beta does not fit these runs" in w
             and "badly undertrained runs" in w for w in e["warnings"])
  good = synthetic.isoflop_runs(synthetic.law(0.34, 0.28), n=7, noise=0.003, seed=0)
  e = chinchax.fit(good, approaches="3", bootstrap=0).approaches["3"]
  assert e["lack_of_fit"]["fits"] is True and e["lack_of_fit"]["ratio"] < 2


def test_a_budget_whose_lowest_loss_is_inside_is_never_dropped(monkeypatch):
  """The profile fit put budget 0's minimum below its sizes (as vp did on a published sweep
  in 10 of 11 budgets); its lowest loss is inside, so its local estimate is read instead."""
  runs = synthetic.isoflop_runs(synthetic.law(0.34, 0.28), n=7, noise=0.003, seed=1)
  estimate = isoflop.estimate

  def low_first(bud, Y, method):
    est = estimate(bud, Y, method)
    x = est.log_N_star_RxK.copy()
    x[:, 0] = bud.x_lo_K[0] - 1.0
    return dataclasses.replace(est, log_N_star_RxK=x)

  monkeypatch.setattr(isoflop_budgets, "estimate", low_first)
  fit, caught = _quiet(isoflop.fit_isoflop, runs, "vp")
  assert len(fit.budgets) == len(synthetic.BUDGETS) and not fit.dropped
  assert any("budget C=1e18: the joint profile fit (vp) puts its minimum outside" in w
             and "its local estimate" in w for w in caught)
  assert not any("add smaller models" in w for w in caught)
  assert np.log(fit.N_opt[0]) > np.log(runs.N[runs.budget == 1e18].min())


def test_refuses_only_without_two_interior_minima_and_says_which_end_for_each():
  p = synthetic.law(0.34, 0.28)
  runs = synthetic.isoflop_runs(p, n=5, noise=0.0)
  N = runs.N * np.where(runs.budget <= 1e20, 6.0, 1 / 6.0)  # above, then below, the minima
  D = runs.budget / (6 * N)
  edged = make_runs(N, D, synthetic.loss(p, N, D), budget=runs.budget)
  with pytest.raises(UserError) as e:
    isoflop.fit_isoflop(edged)
  msg = str(e.value)
  assert "needs at least two budgets whose lowest loss is at an interior size" in msg
  assert "0 of 5 usable" in msg and msg.count("its lowest loss is at its smallest size") == 3
  assert msg.count("add smaller models") == 3 and msg.count("add larger models") == 2
  # One budget back inside is still too few; two are enough, each approach asked for.
  two = make_runs(*(np.where(runs.budget >= 1e21, v, w) for v, w in
                    ((runs.N, N), (runs.D, D))), synthetic.loss(
                        p, np.where(runs.budget >= 1e21, runs.N, N),
                        np.where(runs.budget >= 1e21, runs.D, D)), budget=runs.budget)
  law = chinchax.fit(two, approaches="2", bootstrap=0, approach2_method="vp")
  np.testing.assert_allclose(law.approaches["2"]["points"]["C"], [1e21, 1e22], rtol=1e-9)
  assert not any("Approach 2: Approach 2" in w for w in law.warnings)
  assert sum(w.startswith("Approach 2: budget C=") and " dropped: " in w
             for w in law.warnings) == 3


def test_warnings_are_said_once_with_one_prefix():
  t = truths.TRUTHS["undertrained"]
  law = chinchax.fit(_arrays(truths.sweep(t, seed=0)), approaches="2", bootstrap=20,
                     approach2_method="vp")
  assert law.approaches["2"]["method"] == "local"
  assert law.approaches["2"]["method_asked"] == "vp"
  assert any(w.startswith("Approach 2: the joint profile fit (vp) does not fit these runs")
             for w in law.warnings)
  assert not any("Approach 2: Approach 2" in w for w in law.warnings)
  assert len(law.warnings) == len(set(law.warnings))
  # The profile fit does not fit: it is no yardstick for the parabola's bias on this grid.
  assert not any("parabola in log N places N*" in w for w in law.warnings)


def test_the_bootstrap_draws_from_the_fit_the_estimate_came_from():
  # A drifting grid of an asymmetric law: the parabola is biased by 0.014 (it fits the runs,
  # within the noise); drawn from vp's fit, its interval would sit around vp's estimate.
  p = synthetic.law(0.2, 0.4)
  runs = synthetic.isoflop_runs(p, n=5, drift=3.0, noise=0.002, seed=2)
  fit, _ = _quiet(isoflop.fit_isoflop, runs, "parabola")
  assert fit.method == "parabola" and fit.lack_of_fit["fits"]
  boot, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, runs, 400, method="parabola")
  assert boot["method"] == "parabola"
  lo, hi = np.quantile(boot["a"], [0.05, 0.95])
  assert lo < fit.a < hi
  assert abs(np.median(boot["a"]) - fit.a) < 0.3 * (hi - lo)
  undertrained = truths.sweep(truths.TRUTHS["undertrained"], seed=1)
  boot, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, undertrained, 50, method="parabola")
  assert boot["method"] == "local"


def test_an_interval_holds_its_estimate(monkeypatch):
  assert intervals.holding([0.4, 0.5], 0.52) == [0.4, 0.52]
  assert intervals.holding([0.4, 0.5], 0.45) == [0.4, 0.5]
  real = isoflop_bootstrap.bootstrap_isoflop

  def shifted(runs, **kw):
    out = real(runs, **kw)
    return {**out, "a": out["a"] + 0.05}

  monkeypatch.setattr(isoflop_bootstrap, "bootstrap_isoflop", shifted)
  runs = synthetic.isoflop_runs(synthetic.law(0.34, 0.28), n=7, noise=0.003, seed=4)
  law = chinchax.fit(runs, approaches="2", bootstrap=100, approach2_method="vp")
  e = law.approaches["2"]
  assert e["ci"]["a"][0] == pytest.approx(e["a"]) and law.doc["ci"]["a"][0] == e["ci"]["a"][0]
  assert any("does not hold the estimate a = " in w for w in e["warnings"])


@pytest.mark.slow
def test_where_a_minimum_rests_on_the_shape_the_interval_spans_the_local_reading_too():
  """Grids whose centres wander past the sizes' ends (drift 2.2 > ln 6) put some budgets'
  lowest loss at an end: the default reads vp, whose shape is wrong on these truths. Its
  bootstrap alone held the truth in 17 of 35 such sweeps; half from the local estimate's, the
  interval holds it in 34 (bench/approach2_coverage.py --drift=2.2 --diverged=0: 96 and 98
  of 100)."""
  mixed = alone = n = 0
  for name in ("constant_lr", "broken"):
    t = truths.TRUTHS[name]
    for seed in range(20):
      runs = truths.sweep(t, seed=2000 + seed, n_diverged=0, drift=2.2)
      fit, _ = _quiet(isoflop.fit_isoflop, runs)
      if fit.method == "local":  # every budget placed: nothing rests on the shape
        continue
      n += 1
      for method in ("auto", "vp"):
        boot, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, runs, 100, seed=seed,
                         method=method)
        lo, hi = intervals.holding(intervals.interval(boot["a"], 0.9), fit.a)
        hit = int(lo <= t.a() <= hi)
        mixed, alone = (mixed + hit, alone) if method == "auto" else (mixed, alone + hit)
  assert n >= 30, n  # the design this test needs
  assert mixed >= 0.85 * n, (mixed, n)
  assert alone <= 0.7 * n, (alone, n)  # what the mixing is for


def test_the_mixed_interval_is_half_the_local_estimates_bootstrap():
  """Half the draws are the local estimate's, in equal shares also where many of its
  resamples fail to fit (the second sweep: 62 of 100); nothing is mixed where the local fits
  cannot measure the noise, and the note says the interval then holds only if the shape does."""
  edged = synthetic.isoflop_runs(synthetic.law(0.34, 0.28), n=5, drift=4.0, noise=0.003)
  failing = truths.sweep(truths.TRUTHS["broken"], sizes=7, drift=2.6, n_diverged=0, seed=1048)
  for runs, n in ((edged, 41), (failing, 200)):
    boot, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, runs, n, seed=3)
    vp, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, runs, n - n // 2, seed=3, method="vp")
    local, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, runs, n // 2, seed=4,
                      method="local")
    assert boot["kind"] == isoflop_bootstrap.KIND_MIXED and vp["kind"] == isoflop_bootstrap.KIND
    k = min(len(vp["a"]), len(local["a"]))
    k_fit = min(len(vp["a"]), k + n % 2)
    for name in ("a", "b", "log_kN", "log_kD"):
      np.testing.assert_array_equal(boot[name], np.concatenate([vp[name][:k_fit],
                                                                local[name][:k]]))
    assert boot["n_failed"] == n - k_fit - k
  assert local["n_failed"] > 50 and vp["n_failed"] == 0  # the failing design this needs
  three = synthetic.isoflop_runs(synthetic.law(0.7, 0.35), n=3, drift=3.0, noise=0.005,
                                 seed=1000)
  boot, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, three, 20, seed=0)
  (note,) = boot["notes"]
  assert boot["kind"] == isoflop_bootstrap.KIND
  assert "bootstrap alone" in note and "3 runs" in note and "holds only if" in note
  boot, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, edged, 1, seed=0)
  assert boot["kind"] == isoflop_bootstrap.KIND and "cannot be split" in boot["notes"][0]


def test_the_local_noise_counts_only_windows_that_keep_more_than_3_runs():
  """A window whose runs were all rejected (here 2 of the undertraining truth's budgets, with
  diverged runs) has no parabola and measures no noise: it used to take 3 degrees of freedom
  from the others, leaving none, so the local estimate refused ("cannot measure the noise")."""
  runs = truths.sweep(truths.TRUTHS["undertrained"], seed=1064, n_diverged=2, drift=2.2)
  bud, _ = isoflop_budgets.screen(runs, budget_groups(runs), runs.loss)
  y = runs.loss[bud.idx_n]
  loc = isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K), y[None])
  kept = (loc.weight_Rxn[0] > 0) & np.isfinite(loc.fitted_Rxn[0])
  n_K = np.bincount(bud.budget_n[kept], minlength=len(bud.C_K))
  interior = loc.edge_RxK[0] == 0
  assert (interior & (n_K == 0)).any()  # the design this test needs
  dof = np.maximum(n_K[interior] - 3, 0).sum()
  r = (y - loc.fitted_Rxn[0])[kept]
  assert loc.dof_R[0] == dof > 0
  assert loc.sigma_R[0] == pytest.approx(np.sqrt(r @ r / dof), rel=1e-12)
  assert _quiet(isoflop.fit_isoflop, runs, "local")[0].method == "local"
  _quiet(isoflop_bootstrap.bootstrap_isoflop, runs, 20, method="local")  # no refusal


@pytest.mark.slow
def test_intervals_cover_the_out_of_family_truths():
  """30 sweeps of two truths, 100 resamples each (bench/approach2_coverage.py measures more):
  a 90% interval holds the truth in at least 24 of 30 (probability 0.97 at exactly 90%)."""
  for name in ("constant_lr", "broken"):
    t = truths.TRUTHS[name]
    a_true, hits = t.a(), 0
    for seed in range(30):
      runs = truths.sweep(t, seed=500 + seed)
      fit, _ = _quiet(isoflop.fit_isoflop, runs)
      boot, _ = _quiet(isoflop_bootstrap.bootstrap_isoflop, runs, 100, seed=seed)
      lo, hi = intervals.holding(intervals.interval(boot["a"], 0.9), fit.a)
      hits += lo <= a_true <= hi
    assert hits >= 24, (name, hits)
