"""The library as a notebook uses it: a DataFrame in, a short repr out, and a plan from a law
a paper published (Muennighoff et al. 2023's base law) that matches the plan from the same
coefficients written as a law.json in `chinchax fit`'s own schema."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import chinchax
from chinchax.errors import UserError
from chinchax.scaling.law import artifact as law_lib
from tests.helpers import synthetic_law as syn

pd = pytest.importorskip("pandas")

# Muennighoff et al. 2023, "Scaling Data-Constrained Language Models", eq. 4's base law.
MUENNIGHOFF = {"E": 1.87, "A": 521.0, "B": 1488.0, "alpha": 0.353, "beta": 0.353}


def _table(noise=0.01):
  runs = syn.isoflop(budgets=(1e18, 1e19, 1e20), sizes=5, noise=noise, seed=1)
  return {"N": runs["N"], "D": runs["D"], "loss": runs["loss"], "budget": runs["budget"]}


def test_a_dataframe_fits_as_its_csv_does(tmp_path):
  cols = _table()
  df = pd.DataFrame({**cols, "lr": 3e-4, "notes": "a column the fit ignores"})
  path = tmp_path / "runs.csv"
  df.to_csv(path, index=False)
  from_df = chinchax.fit(df, bootstrap=30, seed=3)
  from_csv = chinchax.fit(str(path), bootstrap=30, seed=3)
  from_dict = chinchax.fit({**cols, "lr": [3e-4] * len(cols["N"])}, bootstrap=30, seed=3)
  np.testing.assert_allclose(from_df.values, from_csv.values, rtol=1e-9)
  np.testing.assert_allclose(from_dict.values, from_csv.values, rtol=1e-9)
  np.testing.assert_allclose(from_df.samples, from_csv.samples, rtol=1e-9)


def test_a_diverged_run_is_kept_out_with_a_warning(tmp_path):
  cols = _table()
  df = pd.DataFrame(cols)
  df.loc[4, "loss"] = np.nan
  law = chinchax.fit(df, bootstrap=0)
  clean = chinchax.fit(df.drop(index=4), bootstrap=0)
  np.testing.assert_allclose(law.values, clean.values, rtol=1e-9)
  assert any("diverged" in w and "row:4" in w for w in law.warnings), law.warnings
  path = tmp_path / "runs.csv"
  df.to_csv(path, index=False)  # pandas writes the NaN as an empty cell: a CSV's "nan" next
  text = path.read_text().replace(",,", ",nan,")
  path.write_text(text)
  assert any("diverged" in w for w in chinchax.fit(str(path), bootstrap=0).warnings)


def test_the_repr_is_a_few_lines_and_the_samples_stay_on_the_law():
  law = chinchax.fit(pd.DataFrame(_table()), bootstrap=200)
  text = repr(law)
  assert len(text.splitlines()) <= 6 and len(text) < 600, text
  assert f"a = {law.a:.3f} [" in text and f"b = {law.b:.3f} [" in text
  assert f"recommended: Approach {law.recommended['approach']}" in text
  assert f"{len(law.warnings)} warnings" in text
  assert law.samples.shape == (200, 5)
  markdown = law._repr_markdown_()  # pylint: disable=protected-access
  assert "| a |" in markdown and "| alpha |" in markdown and len(markdown) < 4000


def test_a_wrong_table_is_one_line():
  with pytest.raises(UserError, match="missing column 'loss'"):
    chinchax.fit(pd.DataFrame({"N": [1e6], "D": [1e9], "los": [3.0]}))
  with pytest.raises(UserError, match="columns of different lengths"):
    chinchax.fit({"N": [1e6, 2e6], "D": [1e9], "loss": [3.0, 2.9]})
  with pytest.raises(UserError, match=r"row:1: N must be a positive"):
    chinchax.fit({"N": [1e6, -2e6], "D": [1e9, 1e9], "loss": [3.0, 2.9]})


def _fit_schema_law(path):
  """The same coefficients as `chinchax fit` writes a law: law_build's own document."""
  doc = law_lib.build_law(**MUENNIGHOFF, N=[7e7, 9e9], D=[1e8, 9e11], inputs=["paper"])
  law_lib.save_law(path, doc)
  return path


def _closed_form(C):
  """N*(C) = G·(C/6)^a, D* = (C/6)^b / G (Hoffmann et al. App. D.2), written out here."""
  E, A, B, alpha, beta = MUENNIGHOFF.values()
  G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
  a, b = beta / (alpha + beta), alpha / (alpha + beta)
  N, D = G * (C / 6) ** a, (C / 6) ** b / G
  return N, D, E + A / N**alpha + B / D**beta


def test_a_law_from_published_coefficients_plans_as_the_same_law_json(tmp_path):
  law = chinchax.law_from_coefficients(**MUENNIGHOFF, reference="Muennighoff et al. 2023",
                                       out=str(tmp_path / "m.json"))
  doc = json.loads((tmp_path / "m.json").read_text())
  assert doc["provenance"]["fitted"] is False
  assert doc["provenance"]["reference"] == "Muennighoff et al. 2023"
  assert "not fitted here" in repr(law)
  same = law_lib.ScalingLaw.load(_fit_schema_law(tmp_path / "fit.json"))
  for C in (1e21, 1e23):
    p, q = chinchax.plan(law, flops=C), chinchax.plan(same, flops=C)
    N, D, loss = _closed_form(C)
    assert p.N == pytest.approx(q.N, rel=1e-12) == pytest.approx(N, rel=1e-9)
    assert p.D == pytest.approx(q.D, rel=1e-12) == pytest.approx(D, rel=1e-9)
    assert p.to_dict()["optimum"]["loss"] == pytest.approx(loss, rel=1e-9)
  with pytest.raises(UserError, match="alpha must be a positive finite number"):
    chinchax.law_from_coefficients(1.87, 521, 1488, 0.0, 0.353)


@pytest.mark.slow
def test_chinchax_law_then_plan_as_processes(tmp_path):
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  cmd = [sys.executable, "-m", "chinchax.cli"]
  made = subprocess.run(cmd + ["law", *(f"--{k}={v}" for k, v in MUENNIGHOFF.items()),
                               f"--out={tmp_path}/m.json", "--fitted-C=1e18,1e22"],
                        cwd=root, capture_output=True, text=True, timeout=120)
  assert made.returncode == 0, made.stderr
  plans = [json.loads(subprocess.run(
      cmd + ["plan", f"--law={law}", "--flops=1e21", "--json"], cwd=root,
      capture_output=True, text=True, timeout=120, check=True).stdout)
      for law in (tmp_path / "m.json", _fit_schema_law(tmp_path / "fit.json"))]
  for key in ("N", "D", "loss"):
    assert plans[0]["optimum"][key] == pytest.approx(
        plans[1]["optimum"][key], rel=1e-12)


def test_plan_reads_a_file_of_the_five_coefficients_alone(tmp_path, capsys):
  from chinchax import cli  # pylint: disable=g-import-not-at-top
  path = tmp_path / "paper.json"
  path.write_text(json.dumps({**MUENNIGHOFF, "reference": "Muennighoff et al. 2023"}))
  assert cli.run(["plan", f"--law={path}", "--flops=1e21", "--json"]) == 0
  N, D, loss = _closed_form(1e21)
  out = json.loads(capsys.readouterr().out)["optimum"]
  assert out["N"] == pytest.approx(N, rel=1e-9) and out["loss"] == pytest.approx(loss, rel=1e-9)
  path.write_text(json.dumps({"E": 1.87, "A": 521.0, "alpha": 0.353}))
  assert cli.run(["plan", f"--law={path}", "--flops=1e21"]) == 2
  err = capsys.readouterr().err
  assert "missing B, beta" in err and len(err.splitlines()) == 1
