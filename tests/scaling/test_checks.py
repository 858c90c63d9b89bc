"""Plausible but wrong: runs that load cleanly yet look wrong, and plans far outside any
sensible range, each get one warning line in law.json / the plan's JSON; a clean synthetic
sweep gets none of them."""

import json

import numpy as np
import pytest

from chinchax.scaling import api
from chinchax.scaling.runs import anomalies as checks
from chinchax.scaling.plan import planner as plan_lib
from chinchax.scaling.law import presets
from chinchax.scaling.law.artifact import ScalingLaw
from tests.helpers import synthetic_law as syn

MARKERS = {"swapped": "look swapped", "duplicates": "repeat another run's N, D and loss",
           "unfinished": "status other than done", "budgets": "have a budget that differs"}


def _write(path, cols: dict, status=None) -> str:
  keys = list(cols)
  rows = [",".join(keys + (["status"] if status else []))]
  for i in range(len(cols["N"])):
    rows.append(",".join([f"{cols[k][i]:.10g}" for k in keys] + ([status[i]] if status else [])))
  path.write_text("\n".join(rows) + "\n")
  return str(path)


def _fit(path):
  return api.fit(path, bootstrap=0, approaches="2,3")


def _data_warnings(law) -> dict[str, list[str]]:
  return {k: [w for w in law.warnings if m in w] for k, m in MARKERS.items()}


@pytest.fixture(scope="module")
def truth():
  return syn.isoflop(budgets=(1e18, 1e19, 1e20), sizes=7, noise=0.002)


def test_a_clean_sweep_gets_none_of_these_warnings(truth, tmp_path):
  law = _fit(_write(tmp_path / "r.csv", truth))
  assert all(not v for v in _data_warnings(law).values()), law.warnings
  doc = api.plan(law, flops=1e21).to_dict()
  assert not any("sensible" in w for w in doc["warnings"]), doc["warnings"]


def test_swapped_columns_are_named(truth, tmp_path):
  swapped = {**truth, "N": truth["D"], "D": truth["N"]}
  law = _fit(_write(tmp_path / "r.csv", swapped))
  found = _data_warnings(law)
  assert len(found["swapped"]) == 1, law.warnings
  n_below = int(np.sum(truth["N"] < truth["D"]))  # D < N once swapped
  assert n_below > len(truth["N"]) / 2
  assert f"D < N for {n_below} of {len(truth['N'])} runs" in found["swapped"][0]
  assert json.loads(json.dumps(law.to_dict()))["warnings"] == law.warnings  # in law.json
  assert not found["duplicates"] and not found["budgets"]


def test_swap_threshold_is_most_rows():
  N = np.array([1e6, 1e6, 1e6, 1e6])
  assert checks.swapped(N, np.array([1e5, 1e5, 1e8, 1e8]), "abcd") == []  # half: no
  assert len(checks.swapped(N, np.array([1e5, 1e5, 1e5, 1e8]), "abcd")) == 1


def test_duplicate_rows_are_counted(truth, tmp_path):
  doubled = {k: np.concatenate([v, v[:3]]) for k, v in truth.items()}
  law = _fit(_write(tmp_path / "r.csv", doubled))
  found = _data_warnings(law)["duplicates"]
  assert len(found) == 1 and found[0].startswith("3 runs repeat"), law.warnings


def test_unfinished_runs_are_named(truth, tmp_path):
  status = ["done"] * len(truth["N"])
  status[4], status[9] = "running", "stopped"
  status[0] = "failed"  # skipped, not warned about
  law = _fit(_write(tmp_path / "r.csv", truth, status))
  found = _data_warnings(law)["unfinished"]
  assert len(found) == 1 and found[0].startswith("2 runs have a status"), law.warnings
  assert "'running'" in found[0]


@pytest.mark.parametrize("factor,warned", [(1.3, True), (0.8, True), (1.05, False)])
def test_budgets_that_disagree_with_6ND_beyond_the_tolerance(truth, tmp_path, factor, warned):
  off = {**truth, "budget": truth["budget"].copy()}
  off["budget"][: 7] *= factor  # the first budget's 7 runs, off by the factor
  del off["C"]  # C = 6·N·D from the file's N and D
  law = _fit(_write(tmp_path / "r.csv", off))
  found = _data_warnings(law)["budgets"]
  assert len(found) == int(warned), law.warnings
  if warned:
    assert found[0].startswith("7 of 21 runs") and "by more than 10%" in found[0]


def test_budgets_checked_against_the_chosen_convention():
  C = np.array([1e18, 2e18])
  assert checks.budgets(C, np.array([1e18, np.nan]), ["a", "b"], "chinchilla") == []
  w = checks.budgets(C, np.array([1e18, 1e18]), ["a", "b"], "chinchilla")
  assert len(w) == 1 and "C (chinchilla count)" in w[0] and "b: budget 1e18, C (chinchilla count) = 2e18" in w[0]


@pytest.mark.parametrize("kwargs,count", [
    (dict(flops=1.0), 2),                       # N* < 1 parameter, D/N < 1
    (dict(params=1e14), 1),                     # beyond 1e13 parameters
    (dict(params=1e9, tokens=1e8), 1),          # 0.1 tokens per parameter
    (dict(params=1e8, tokens=1e12), 1),         # 10^4 tokens per parameter
    (dict(flops=1e21), 0),
    (dict(params=7e10, tokens=1.4e12), 0),      # Chinchilla itself
])
def test_plans_far_outside_any_sensible_range_warn(kwargs, count):
  law = presets.preset("hoffmann2022")
  doc = api.plan(law, **kwargs).to_dict()
  found = [w for w in doc["warnings"] if "sensible" in w]
  assert len(found) == count, doc["warnings"]
  assert json.loads(api.plan(law, **kwargs).to_json())["warnings"] == doc["warnings"]


def test_sanity_ranges_match_the_stated_bounds():
  lo, hi = plan_lib.SENSIBLE_TOKENS_PER_PARAM
  assert (lo, hi) == (1.0, 1000.0) and plan_lib.SENSIBLE_N == (1e3, 1e13)
  assert plan_lib.sanity(1e9, 1e9 * lo) == [] and plan_lib.sanity(1e9, 1e9 * hi) == []
  assert len(plan_lib.sanity(1e9, 1e9 * lo * 0.99)) == 1
  assert len(plan_lib.sanity(1.01e13, 2e14)) == 1


def test_a_fitted_law_keeps_the_warnings_through_save_and_load(truth, tmp_path):
  swapped = {**truth, "N": truth["D"], "D": truth["N"]}
  law = api.fit(_write(tmp_path / "r.csv", swapped), bootstrap=0, approaches="2,3",
                out=str(tmp_path / "law.json"))
  again = ScalingLaw.load(tmp_path / "law.json")
  assert any(MARKERS["swapped"] in w for w in again.warnings)
  assert again.warnings == law.warnings
