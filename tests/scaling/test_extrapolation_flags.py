"""The artifacts mark what is extrapolated: law.json's `optimal` table, the console table and
report.md end near the fitted budgets and flag every row past them with how far; a parameter
whose interval spans orders of magnitude is named in the headline; law.json packs its
bootstrap draws and records a hash of its inputs; a v2 file still loads."""

import json
import re

import numpy as np
import pytest

import chinchax
from chinchax.scaling import api
from chinchax.scaling.judgement import caveats
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.law import pack as law_pack
from chinchax.scaling.numerics import fmt
from chinchax.sweeps import report
from tests.helpers import synthetic_law as syn

BUDGETS = (1e18, 3e18, 1e19)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
  out = tmp_path_factory.mktemp("fit") / "law.json"
  runs = syn.isoflop(budgets=BUDGETS, sizes=5, noise=0.005, seed=2)
  return chinchax.fit(runs, bootstrap=300, out=str(out)), out, runs


def _C_range(runs):
  return float(runs["C"].min()), float(runs["C"].max())


def test_law_json_table_ends_near_the_data_and_flags_each_row(fitted):
  law, _, runs = fitted
  lo, hi = _C_range(runs)
  table = law.doc["optimal"]["tokens_per_param"]
  assert max(r["C"] for r in table) <= 10 * hi * 1.01  # not 1e24 whatever was fitted
  assert min(r["C"] for r in table) <= lo * 1.01
  past = 0
  for row in table:
    factor = max(1.0, lo / row["C"], row["C"] / hi)
    assert row["beyond_fit"] == pytest.approx(factor)
    assert row["extrapolated"] is (factor > 1 + 1e-9)
    past += row["extrapolated"]
  assert past == 1


def test_a_one_budget_csv_prints_no_table_to_1e22(tmp_path):
  runs = syn.isoflop(budgets=(1e19,), sizes=9, noise=0.002, seed=4)
  path = tmp_path / "one.csv"
  path.write_text("N,D,loss\n" + "".join(f"{n:.17g},{d:.17g},{l:.17g}\n" for n, d, l in
                                          zip(runs["N"], runs["D"], runs["loss"])))
  law = chinchax.fit(str(path), bootstrap=0, approaches="3")
  text = api.summary(law, 9)
  rows = [l for l in text.splitlines() if l.startswith("  1e") or l.startswith("  9.")]
  assert rows and all(float(l.split()[0]) <= 1.01e20 for l in rows), text
  assert any("10x past: extrapolated" in l for l in rows), text
  assert all(r["C"] <= 1.01e20 for r in law.doc["optimal"]["tokens_per_param"])


def test_report_rows_say_how_far_past_the_sweep(fitted):
  law, _, runs = fitted
  lines = report.optimal_section(law.to_dict())
  rows = [l for l in lines if re.match(r"\| \d", l)]
  assert len(rows) == 3 and "inside" in rows[0] and "3x past" in rows[1]
  assert "10x past" in rows[2]
  assert not any("1e22" in l or "1e23" in l or "e+" in l for l in lines)


def test_an_unidentified_parameter_is_named_in_the_headline(fitted):
  law = fitted[0]
  doc = law.to_dict()
  assert not any("unidentified" in l for l in caveats.headline(doc))
  doc["approaches"]["3"]["ci"]["E"] = [3.5e-7, 1.08]
  lines = [l for l in caveats.headline(doc) if "unidentified" in l]
  assert len(lines) == 1 and "E [3.5e-7, 1.08]" in lines[0] and "A [" not in lines[0]


def test_law_json_packs_its_draws_and_hashes_its_inputs(fitted, tmp_path):
  law, out, runs = fitted
  raw = json.loads(out.read_text())
  assert "samples" not in raw["bootstrap"]
  unpacked = law_pack.unpack(raw)
  np.testing.assert_array_equal(np.asarray(unpacked["bootstrap"]["samples"]), law.samples)
  as_lists = len(json.dumps(unpacked, indent=2))
  assert out.stat().st_size < as_lists / 2, (out.stat().st_size, as_lists)
  # The hash is of the runs read: the same runs from a CSV hash alike, a changed loss not.
  digest = raw["provenance"]["inputs_sha256"]
  csv = tmp_path / "runs.csv"
  csv.write_text("N,D,C,loss,budget\n" + "".join(
      f"{n:.17g},{d:.17g},{c:.17g},{l:.17g},{b:.17g}\n" for n, d, c, l, b in
      zip(runs["N"], runs["D"], runs["C"], runs["loss"], runs["budget"])))
  again = chinchax.fit(str(csv), bootstrap=0)
  assert again.doc["provenance"]["inputs_sha256"] == digest
  changed = dict(runs, loss=runs["loss"] * np.r_[1.001, np.ones(len(runs["loss"]) - 1)])
  assert chinchax.fit(changed, bootstrap=0).doc["provenance"]["inputs_sha256"] != digest


def test_a_v2_file_with_its_draws_as_lists_still_loads(fitted, tmp_path):
  law = fitted[0]
  doc = law.to_dict()
  doc["schema"] = "chinchax/law/v2"
  for row in doc["optimal"]["tokens_per_param"]:  # a v2 table had no flags
    del row["extrapolated"], row["beyond_fit"]
  path = tmp_path / "v2.json"
  path.write_text(json.dumps(doc))
  loaded = law_lib.ScalingLaw.load(path)
  np.testing.assert_array_equal(loaded.samples, law.samples)
  assert loaded.interval("N", 1e20) == law.interval("N", 1e20)


def test_approach_1s_envelope_is_packed_and_read_back_exactly(fitted, tmp_path):
  from chinchax.errors import UserError  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  doc = fitted[0].to_dict()
  envelope = {k: rng.lognormal(size=600).tolist() for k in ("C", "N", "loss")}
  doc["approaches"]["1"] = {"a": 0.5, "b": 0.5, "warnings": [], "envelope": envelope}
  path = tmp_path / "law.json"
  law_lib.save_law(path, doc)
  raw = json.loads(path.read_text())
  assert "envelope" not in raw["approaches"]["1"] and raw["approaches"]["1"]["envelope_zlib"]
  assert len(path.read_text()) < len(json.dumps(doc, indent=2)) / 2
  assert law_lib.load_law(path) == doc  # exact: every float as it was
  raw["approaches"]["1"]["envelope_zlib"] = "not base64!"
  path.write_text(json.dumps(raw))
  with pytest.raises(UserError, match=r"approaches\.1\.envelope_zlib: cannot unpack"):
    law_lib.load_law(path)


def test_a_budget_a_step_short_reads_inside_and_an_optimum_off_the_sizes_is_flagged():
  """A sweep's runs end on whole steps, a little short of the nominal budget: the table's
  top row is the largest C fitted, inside (before, the rounded 3e19 read `1x past`). Where
  every size sampled lies above N* (sizes 3x-30x it), the row says how far N* is outside
  them, with the factor from the fitted law's closed-form optimum and the sizes' range."""
  runs = syn.isoflop(budgets=(1e19, 3e19), sizes=7, spread=10.0, noise=0.0)
  short = {**runs, "D": runs["D"] * (1 - 1e-5)}
  short.pop("C"), short.pop("budget")
  rows = _table_rows(chinchax.fit(short, bootstrap=0, approaches="3"))
  assert rows[1].endswith(" inside") and rows[1].startswith("  3e19 "), rows
  assert rows[2].endswith(" 10x past: extrapolated"), rows
  big = syn.isoflop(budgets=(1e19, 3e19), sizes=7, spread=3.0, noise=0.0)
  big["N"] = big["N"] * 10
  big["D"] = big["C"] / (6 * big["N"])
  big["loss"] = syn.loss(big["N"], big["D"])
  big.pop("budget")
  law = chinchax.fit(big, bootstrap=0, approaches="3")
  E, A, B, alpha, beta = (law.doc["law"][k] for k in ("E", "A", "B", "alpha", "beta"))
  G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
  N_star = G * (1e19 / 6) ** (beta / (alpha + beta))
  factor = big["N"].min() / N_star
  assert factor > 2, factor
  first = _table_rows(law)[0]
  assert f"N* {fmt.factor(factor)} outside" in first and first.endswith(": extrapolated"), first


def _table_rows(law) -> list[str]:
  text = api.summary(law, 0).splitlines()
  top = next(i for i, l in enumerate(text) if l.startswith("compute-optimal allocation"))
  return text[top + 2:top + 5]
