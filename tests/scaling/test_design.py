"""The design reading (scaling/runs/design.py) and what the fit does with it: each design
from a known truth is read as what it is; designs that cannot separate N from D are refused
in one line that says what is identified, never a traceback; Approach 2 runs only on IsoFLOP
groups; a backtest against a bound chooses nothing; losses in other units are named."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import chinchax
from chinchax.errors import UserError
from chinchax.scaling.judgement import backtest_doc, caveats
from chinchax.scaling import pipeline
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.runs import anomalies, design
from chinchax.scaling.runs.table import budget_groups, make_runs
from tests.helpers import synthetic_law, truths

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOFFMANN = synthetic_law.HOFFMANN


def _runs(N, D, loss=None, noise=0.005, seed=0, truth=synthetic_law.loss):
  N, D = np.asarray(N, float), np.asarray(D, float)
  rng = np.random.default_rng(seed)
  L = truth(N, D) * np.exp(noise * rng.standard_normal(len(N))) if loss is None else loss
  return N, D, L


def ladder(truth=synthetic_law.loss, seed=0):
  """5 sizes x token multipliers 1-10x of 20 tokens per parameter."""
  N, D = np.meshgrid(np.geomspace(1e8, 2e9, 5), np.array([1, 2, 5, 10]) * 20.0)
  N = N.ravel()
  return _runs(N, D.ravel() * N, truth=truth, seed=seed)


def checkpoints(truth=synthetic_law.loss, seed=0):
  """8 models, each evaluated at 15 D from 1 to 40 tokens per parameter."""
  N, m = np.meshgrid(np.geomspace(5e7, 3e9, 8), np.geomspace(1, 40, 15))
  N = N.ravel()
  return _runs(N, m.ravel() * N, truth=truth, seed=seed)


def isoflop():
  g = synthetic_law.isoflop(noise=0.005)
  return g["N"], g["D"], g["loss"]


def one_D():
  N = np.geomspace(7e7, 1.2e10, 8)
  return _runs(N, np.full(8, 3e11))


def one_N():
  return _runs(np.full(8, 1e9), np.geomspace(1e9, 1e12, 8))


def one_ray():
  N = np.geomspace(7e7, 1.2e10, 8)
  return _runs(N, 20 * N)


def mix():
  a, b = isoflop(), ladder()
  return tuple(np.concatenate([x[:18], y]) for x, y in zip(a, b))  # two budgets + a ladder


def shared_checkpoints():
  """Pythia's design: 8 models evaluated at the same 143 steps (2.1e9 tokens each, linear),
  all run to one D. Their checkpoints fall into groups of one C by chance."""
  N, D = np.meshgrid([7e7, 1.6e8, 4.1e8, 1e9, 1.4e9, 2.8e9, 6.9e9, 1.2e10],
                     np.arange(1, 144) * 2.1e9)
  return _runs(N.ravel(), D.ravel())


def dense_grid():
  """20 budgets 2^(1/2) apart, 8 sizes each from one ladder 2^(1/4) apart: the median size is
  in 7 budgets, more than a ladder's 6 but fewer than a budget's 8 sizes. A grid all the same."""
  j = np.arange(-4, 4)
  N = np.concatenate([1e8 * 2.0**((k + j) / 4) for k in range(20)])
  C = np.repeat(6 * 1e8 * 2e9 * 2.0**(np.arange(20) / 2), 8)
  return _runs(N, C / (6 * N))


@pytest.mark.parametrize("make, kind", [
    (isoflop, "isoflop"), (ladder, "ladder"), (checkpoints, "checkpoints"), (one_D, "one_D"),
    (one_N, "one_N"), (one_ray, "one_ray"), (mix, "mix"),
    (shared_checkpoints, "checkpoints"), (dense_grid, "isoflop")])
def test_each_design_is_read_as_what_it_is(make, kind):
  N, D, L = make()
  d = design.read(make_runs(N, D, L))
  assert d.kind == kind, d.text
  assert d.separable == (kind not in ("one_D", "one_N", "one_ray"))
  assert d.supports_isoflop == (kind in ("isoflop", "mix"))  # the mix holds two budgets
  if make is shared_checkpoints:  # its chance groups would have read it as a grid
    assert d.isoflop_groups >= 2
    # The same groups declared as budgets (a `budget` column) are a grid's, however dense.
    budget = np.full(len(N), np.nan)
    for g in budget_groups(make_runs(N, D, L)):
      budget[g] = np.exp(np.mean(np.log(6 * N[g] * D[g])))
    assert design.read(make_runs(N, D, L, budget=budget)).kind == "isoflop"


def test_distinct_counts_values_within_two_percent_as_one():
  assert design.distinct(np.array([1e8, 1.01e8, 1.5e8, 1.51e8, 3e8])) == 3
  assert design.distinct(np.array([1e8, 1.03e8])) == 2


def _csv(tmp_path, name, N, D, L):
  path = tmp_path / f"{name}.csv"
  rows = ["N,D,loss"] + [f"{n:.8g},{d:.8g},{l!s}" for n, d, l in zip(N, D, L)]
  path.write_text("\n".join(rows) + "\n")
  return str(path)


def _fit(*argv):
  return subprocess.run([sys.executable, "-m", "chinchax.cli", "fit", *argv, "--bootstrap=50"],
                        capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, PYTHONPATH=ROOT))


def _ray_with_a_nan():
  N, D, L = one_ray()
  L = L.copy()
  L[3] = np.nan
  return N, D, L


@pytest.mark.slow
@pytest.mark.parametrize("make, identified", [
    (one_D, "only L(N) = E' + A/N^alpha at that D is"),
    (one_N, "only L(D) = E' + B/D^beta at that N is"),
    (one_ray, "only the loss along that ray is"),
    (_ray_with_a_nan, "only the loss along that ray is")])
def test_a_design_that_cannot_separate_n_from_d_is_one_line(tmp_path, make, identified):
  p = _fit(_csv(tmp_path, "runs", *make()), f"--out={tmp_path / 'law.json'}")
  assert p.returncode == 2, p.stderr
  lines = p.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
  assert lines[0].startswith("chinchax fit: error: these runs cannot separate N from D (")
  assert identified in lines[0]
  assert not (tmp_path / "law.json").exists()


@pytest.mark.slow
def test_checkpoints_along_d_skip_approach_2_and_recommend_the_law(tmp_path):
  out = tmp_path / "law.json"
  p = _fit(_csv(tmp_path, "runs", *checkpoints()), f"--out={out}")
  assert p.returncode == 0, p.stderr
  assert p.stderr.splitlines()[0].startswith("design: checkpoints along D: 8 sizes")
  law = json.loads(out.read_text())
  assert law["data"]["design"]["kind"] == "checkpoints"
  assert "2" not in law["approaches"]
  assert any(n.startswith("skipped: Approach 2: it needs 2 or more IsoFLOP groups")
             for n in law["notes"])
  assert law["recommended"]["approach"] == "3"
  lo, hi = law["approaches"]["3"]["ci"]["a"]
  assert lo <= synthetic_law.a_true() <= hi  # the truth's a = beta/(alpha+beta) = 0.4516
  assert any(n.startswith("design: checkpoints are read as runs trained to their D")
             for n in law["notes"])


def test_a_backtest_against_a_bound_chooses_nothing():
  holdout = {"dropped": 1, "reference": {"N": 1e9, "loss": 2.0, "at_edge": True},
             "approaches": {"1": {"N": 1e9, "N_error": 0.01, "loss": None, "loss_error": None},
                            "3": {"N": 2e9, "N_error": 1.0, "loss": 2.0, "loss_error": 0.0}}}
  bt = {"holdouts": [holdout]}
  assert backtest_doc.miss(bt, "1") is None and backtest_doc.miss(bt, "3") is None
  holdout["reference"]["at_edge"] = False
  assert backtest_doc.miss(bt, "1")["N_error"] == 0.01


def _entry(a_ci, fits=True, miss=None):
  return {"ci": {"a": a_ci} if a_ci else None, "lack_of_fit": {"fits": fits},
          "problems": [], "backtest": None if miss is None else {
              "N_error": miss, "reference_N_rel_sd": 0.01}}


def test_an_approach_without_an_interval_is_never_recommended_over_a_sound_one():
  # Approach 1 forecasts the held-out N* 20x better but has no interval: 3 stays.
  entries = {"3": _entry([0.4, 0.5], miss=1.0), "1": _entry(None, fits=None, miss=0.05)}
  assert caveats.recommend(entries)[0] == "3"
  entries["1"] = _entry([0.3, 0.6], fits=None, miss=0.05)  # with an interval it may
  assert caveats.recommend(entries)[0] == "1"
  entries["1"] = _entry([0.3, 0.6], fits=False, miss=0.05)  # not if its checks failed
  assert caveats.recommend(entries)[0] == "3"


def test_losses_in_other_units_are_named():
  assert anomalies.units(np.array([2.1, 3.0, np.nan])) == []
  [line] = anomalies.units(np.array([10.0, 24.5, 99.5]))  # perplexities
  assert line.startswith("2 of 3 losses are above 20 (they run from 10 to 99.5), which no")
  assert "perplexities" in line and "percentages" in line
  [line] = anomalies.units(np.array([150.0, 300.0]))
  assert "perplexities" in line and "percentages" not in line


def test_an_out_of_family_ladder_is_read_as_a_ladder():
  N, D, L = ladder(truth=truths.kaplan)
  assert design.read(make_runs(N, D, L)).kind == "ladder"


def test_one_run_per_cluster_is_the_pairs_bootstrap():
  N, D, L = ladder()
  pairs = parametric.bootstrap_parametric(N, D, L, n_resamples=20, seed=3)
  runs = parametric.bootstrap_parametric(N, D, L, n_resamples=20, seed=3,
                                         clusters=np.arange(len(N)))
  np.testing.assert_array_equal(pairs, runs)


def test_resampling_whole_models_widens_a_checkpoint_suites_interval():
  """Eight models' 15 checkpoints each, every model off the law by its own 1% (its seed, its
  shape), shared by all its checkpoints, plus 0.2% per checkpoint: resampling checkpoints as
  if independent counts each model's offset 15 times over, and the interval of a that
  resamples whole models is wider."""
  N, D, _ = checkpoints()
  rng = np.random.default_rng(0)
  offset = rng.standard_normal(8)[design.sizes_of(N)]
  L = synthetic_law.loss(N, D) * np.exp(0.01 * offset + 0.002 * rng.standard_normal(len(N)))

  def width(clusters):
    s = parametric.bootstrap_parametric(N, D, L, n_resamples=200, seed=0, clusters=clusters)
    s = s[np.all(np.isfinite(s), axis=1)]
    lo, hi = np.quantile(s[:, 4] / (s[:, 3] + s[:, 4]), [0.05, 0.95])
    return hi - lo

  assert width(design.sizes_of(N)) > 2 * width(None)


def test_the_fit_resamples_sizes_on_checkpoint_suites_only():
  for make, kind in ((ladder, "pairs"), (checkpoints, "sizes"), (isoflop, "pairs")):
    N, D, L = make()
    law = chinchax.fit({"N": N, "D": D, "loss": L}, bootstrap=30, approaches="3")
    assert law.doc["approaches"]["3"]["bootstrap"]["kind"] == kind
    assert law.doc["bootstrap"]["kind"] == kind


def test_sizes_are_labelled_by_distinct_value():
  labels = design.sizes_of(np.array([3e8, 1e8, 1.01e8, 3.02e8, 2e8]))
  assert labels.tolist() == [2, 0, 0, 2, 1]


def test_an_allocation_that_shrinks_with_compute_is_refused_not_written():
  """IsoFLOP minima placed by hand at N* = 1e9 / 1.5^k for budgets 1e18..1e20 (a < 0): asked
  for alone, Approach 2 is one line naming a and b; in the default fit it is skipped with
  that line, and law.json is still written."""
  N, D, L = [], [], []
  for k, C in enumerate(np.logspace(18, 20, 4)):
    n = 1e9 / 1.5**k * np.geomspace(1 / 4, 4, 5)
    N.append(n)
    D.append(C / 6 / n)
    L.append(2.0 + 0.05 * np.log(n * 1.5**k / 1e9)**2 + 0.1 * (3 - k))
  runs = {"N": np.concatenate(N), "D": np.concatenate(D), "loss": np.concatenate(L)}
  with pytest.raises(UserError, match=r"^Approach 2 gives a = -0\.\d+, b = 1\.\d+: "):
    chinchax.fit(runs, approaches="2", bootstrap=20)
  law = chinchax.fit(runs, bootstrap=20)
  assert any(n.startswith("skipped: Approach 2 gives a = -") for n in law.doc["notes"])


@pytest.mark.slow
def test_a_loss_that_rises_with_n_is_one_line_not_a_schema_error(tmp_path):
  """4 sizes x 3 D whose loss grows as N^0.3 (a mislabelled size column, say): Approach 3 is
  all these runs support and gives alpha < 0; the fit says so in one line, writes nothing."""
  N, D = np.meshgrid(np.geomspace(1e4, 1e5, 4), np.array([1e6, 3e6, 1e7]))
  N, D = N.ravel(), D.ravel()
  L = 3.0 + 0.05 * (N / 1e4)**0.3 + 50 / D**0.3
  p = _fit(_csv(tmp_path, "runs", N, D, L), f"--out={tmp_path / 'law.json'}")
  assert p.returncode == 2, p.stderr
  lines = p.stderr.strip().splitlines()
  assert lines[-1].startswith("chinchax fit: error: no scaling law fits these runs: Approach 3 "
                              "gives alpha = -"), p.stderr
  assert "the loss does not fall with N" in lines[-1]
  assert "Traceback" not in p.stderr and "RuntimeWarning" not in p.stderr, p.stderr
  assert not (tmp_path / "law.json").exists()


def test_checkpoints_that_share_a_c_by_chance_are_not_approach_2s_budgets():
  """Models to 80 down to 20 tokens per parameter: their checkpoints fall into a few groups of
  3+ sizes at one C by chance, most runs in none. Approach 2 is skipped, and said why; asked
  for, it runs with a warning, and its ~90 dropped pseudo-budgets are said in one line."""
  N = np.repeat(np.geomspace(5e7, 3e9, 8), 15)
  D = np.concatenate([n * np.geomspace(1, end, 15)
                      for n, end in zip(np.geomspace(5e7, 3e9, 8), np.geomspace(80, 20, 8))])
  runs = {"N": N, "D": D, "loss": synthetic_law.loss(N, D)}
  d = design.read(make_runs(N, D, runs["loss"]))
  assert d.kind == "checkpoints" and d.isoflop_groups >= 2 and not d.supports_isoflop
  law = chinchax.fit(runs, bootstrap=0)
  assert "2" not in law.approaches
  assert any(n.startswith("skipped: Approach 2: on checkpoints along D its budgets would be "
                          f"the {d.isoflop_groups} groups of checkpoints that share a C by "
                          "chance") for n in law.doc["notes"])
  asked = chinchax.fit(runs, approaches="2,3", bootstrap=0)
  said = [w for w in asked.warnings if "distinct sizes, need 3" in w]
  n_dropped = sum("distinct sizes, need 3" in w for w in asked.approaches["2"]["dropped"])
  assert n_dropped > 50 and len(said) == 1, said
  assert said[0].startswith(f"Approach 2: {n_dropped} budgets dropped (C = ")
  assert any(w.startswith("Approach 2 was asked for, but on checkpoints along D")
             for w in asked.warnings)


def test_a_suite_whose_models_all_ran_to_one_d_says_its_a_cannot_be_checked():
  """Cosine checkpoints of 8 models all run to 3e11 tokens (bench/design_coverage.py's
  checkpoints_one_D): the schedule's excess is a term of D, which no fit of these runs can
  tell from the law's, so the law beneath the schedule is not fitted and a warning says a
  rests on an assumption the runs cannot check."""
  N = np.repeat(np.geomspace(7e7, 1.2e10, 8), 15)
  D = np.tile(np.geomspace(2e9, 3e11, 15), 8)
  runs = {"N": N, "D": D, "loss": truths.cosine_checkpoints(N, D)}
  law = chinchax.fit(runs, bootstrap=20)
  assert law.doc["data"]["design"]["kind"] == "checkpoints" and "2" not in law.approaches
  assert any(w.startswith("a rests on reading each checkpoint as a run trained to its D, "
                          "which these runs cannot check: every model ran to one D")
             for w in law.warnings)
  assert any("schedule is not fitted" in n and "every model ran to one D (3e11-3e11 tokens)"
             in n for n in law.doc["notes"])
  assert law.recommended["approach"] == "3"
  ends = {"N": N, "D": D * np.repeat(np.geomspace(1, 4, 8), 15), "loss": None}
  ends["loss"] = truths.cosine_checkpoints(ends["N"], ends["D"])
  assert not any(w.startswith("a rests on reading each checkpoint")
                 for w in chinchax.fit(ends, bootstrap=0).warnings)  # models to 4 D_end


def test_an_interval_of_a_past_1_is_said():
  """Approach 1's envelope on noisy checkpoints of models all run to one D: its estimate of a
  is inside (0, 1), its bootstrap interval runs past 1 (b < 0), and a warning says these runs
  do not bound the allocation by that approach. Written by hand: the line for [0.4, 1.2]."""
  assert pipeline._unbounded([0.2, 0.8], 0.9) == []
  assert pipeline._unbounded([0.4, 1.2], 0.9) == [
      "its 90% interval of a, [0.4, 1.2], reaches past 1, where b < 0 and D* would fall as "
      "compute grows: these runs do not bound the allocation by this approach"]
  assert pipeline._unbounded([-0.1, 0.5], 0.8)[0].startswith(
      "its 80% interval of a, [-0.1, 0.5], reaches below 0, where N* would fall")
  N = np.repeat(np.geomspace(7e7, 1.2e10, 8), 15)
  D = np.tile(np.geomspace(2e9, 3e11, 15), 8)
  L = truths.cosine_checkpoints(N, D) * np.exp(
      0.005 * np.random.default_rng(0).standard_normal(len(N)))
  law = chinchax.fit({"N": N, "D": D, "loss": L}, bootstrap=200, seed=0)
  lo, hi = law.approaches["1"]["ci"]["a"]
  assert 0 < law.approaches["1"]["a"] < 1 < hi, (lo, hi)
  assert any(w.startswith("Approach 1: its 90% interval of a, [") and "reaches past 1" in w
             for w in law.warnings)
  assert not any("reaches" in w for w in law.warnings if w.startswith("Approach 3"))
