"""`chinchax fit` end to end on runs from known laws: law.json, the headline on the console,
in law.json and in report.md, plots, the data-constrained law, refusals."""

import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from chinchax.scaling.numerics import fmt

from chinchax.scaling.judgement import caveats
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.parametric import vp
from chinchax import cli
from chinchax.sweeps import report
from tests.helpers import synthetic_law as syn


def fit_workdir(folder, runs, *flags):
  """`chinchax fit WORKDIR` on a sweep workdir of `runs`, then `chinchax report` on it."""
  wd = syn.write_workdir(folder, runs)
  stdout, stderr = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
    rc = cli.run(["fit", wd, f"--out={os.path.join(wd, 'law.json')}", *flags])
  assert rc == 0, stderr.getvalue()
  report.write_report(wd)
  return {"wd": folder, "out": stdout.getvalue(),
          "law": json.loads((folder / "law.json").read_text()),
          "report": (folder / "report.md").read_text()}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
  return fit_workdir(tmp_path_factory.mktemp("good"), syn.isoflop(noise=0.003),
                     "--bootstrap=200", f"--plots={tmp_path_factory.getbasetemp() / 'p'}")


@pytest.fixture(scope="module")
def poor(tmp_path_factory):
  """8 runs: too few for Approach 3's 5 parameters."""
  return fit_workdir(tmp_path_factory.mktemp("poor"),
                     syn.isoflop(budgets=(1e18, 1e20), sizes=4, noise=0.002),
                     "--bootstrap=100")


def test_fit_writes_a_valid_law_with_intervals_and_plots(good, tmp_path_factory, capsys):
  raw = good["law"]
  law = law_lib.ScalingLaw.load(good["wd"] / "law.json")
  assert law.a == pytest.approx(syn.a_true(), abs=0.01)
  assert raw["schema"] == "chinchax/law/v3" and raw["recommended"]["approach"] == "3"
  assert set(raw["approaches"]) == {"2", "3"}  # no curves: Approach 1 skipped with a note
  assert raw["approaches"]["2"]["a"] == pytest.approx(syn.a_true(), abs=0.01)
  lo, hi = raw["approaches"]["3"]["ci"]["a"]
  assert lo < raw["approaches"]["3"]["a"] < hi and raw["ci"]["level"] == 0.9
  # Variable projection carries the grid's basins (at most vp.N_CANDIDATES) to the optimum.
  assert 1 <= raw["fit"]["starts"] <= vp.N_CANDIDATES and raw["data"]["points"] == 45
  for stem in ("isoflops", "optimal", "law"):
    for ext in ("png", "svg"):
      assert os.path.getsize(tmp_path_factory.getbasetemp() / "p" / f"{stem}.{ext}") > 1000
  assert "notes:\n  - skipped: Approach 1 needs loss curves" in good["out"]
  # The law plans: N* at a budget inside the fitted range, with an interval.
  assert cli.run(["plan", f"--law={good['wd'] / 'law.json'}", "--flops=1e19", "--json"]) == 0
  plan = json.loads(capsys.readouterr().out)
  lo, hi = plan["optimum"]["interval"]["N"]
  assert lo < law.optimum(1e19)[0] < hi and plan["warnings"] == []


@pytest.mark.parametrize("case", ["good", "poor"])
def test_one_headline_on_the_console_in_law_json_and_in_report(case, request):
  fitted = request.getfixturevalue(case)
  head = caveats.headline(fitted["law"])  # from law.json alone
  console = fitted["out"].splitlines()
  assert console[1:1 + len(head)] == head  # printed first, after the count of runs
  block = fitted["report"].split("```\n", 2)[1]
  assert block.splitlines() == head
  for w in fitted["law"]["warnings"]:
    assert f"  - {w}" in console and f"- warning: {w}" in fitted["report"]
  assert "e+" not in "\n".join(head)  # numbers read 1.2e12, never 1.2e+12


def test_a_poorly_determined_approach_3_is_said_in_one_sentence(poor):
  law, out = poor["law"], poor["out"]
  assert law["recommended"]["approach"] == "2" and law["law"]["form"].startswith("N* =")
  (line,) = [l for l in out.splitlines() if l.startswith("Approach 3's parametric law")]
  assert line == ("Approach 3's parametric law is poorly determined (it fits 5 parameters to "
                  "only 8 runs (at least 10 needed)), so it is not given as the answer.")
  assert "recommended: Approach 2: Approach 3's law is poorly determined (see the warnings); " \
      "Approach 2's exponents come from the IsoFLOP minima directly" in out
  assert "law (Approach 3)" not in out and "law (Approach 2): N* = " in out
  assert "poorly determined: not the answer" in poor["report"]
  assert "| alpha |" in poor["report"]  # its numbers are shown, labelled
  assert any("poorly determined and is not the answer" in w for w in law["warnings"])


def test_approach_2_writes_its_own_law(tmp_path, capsys):
  csv = syn.write_csv(tmp_path / "runs.csv", syn.isoflop(noise=0.002))
  out = tmp_path / "law.json"
  assert cli.run(["fit", csv, f"--out={out}", "--approach=2", "--bootstrap=100"]) == 0
  printed = capsys.readouterr().out
  law = json.loads(out.read_text())
  assert law["law"]["approach"] == "2" and set(law["approaches"]) == {"2"}
  assert "recommended: Approach 2: asked for (--approach=2)" in printed
  # The next command, with the law.json just written in it (not a placeholder).
  assert (f"  a larger budget: chinchax plan --law={out} --flops=C (it warns past 3x)"
          in printed.splitlines())
  assert cli.run(["plan", f"--law={out}", "--params=1e9", "--tokens=2e10"]) == 0
  notes = [l for l in capsys.readouterr().out.splitlines() if l.startswith("note:")]
  assert notes == ["note: this law comes from Approach 2: it plans N and D and predicts no "
                   "loss (fit Approach 3 for losses)"]


def test_a_law_json_written_over_another_says_which_it_replaced(tmp_path, capsys):
  """`chinchax fit --out` and `chinchax law --out` name the file they replace: a law.json by
  its creation time, anything else as the file that was there."""
  out = tmp_path / "law.json"
  coefficients = ["--E=1.69", "--A=406.4", "--B=410.7", "--alpha=0.34", "--beta=0.28"]
  assert cli.run(["law", *coefficients, f"--out={out}"]) == 0
  assert capsys.readouterr().out.splitlines()[-1] == (
      f"wrote {out}: plan with it by chinchax plan --law={out} --flops=C")
  first = json.loads(out.read_text())["provenance"]["created"]
  assert cli.run(["law", *coefficients, f"--out={out}"]) == 0
  assert capsys.readouterr().out.splitlines()[-1] == (
      f"wrote {out} (replacing the law.json made at {first}): plan with it by chinchax plan "
      f"--law={out} --flops=C")
  second = json.loads(out.read_text())["provenance"]["created"]
  csv = syn.write_csv(tmp_path / "runs.csv", syn.isoflop(noise=0.002))
  assert cli.run(["fit", csv, f"--out={out}", "--approach=2", "--bootstrap=20"]) == 0
  assert capsys.readouterr().out.splitlines()[-1] == (
      f"wrote {out} (replacing the law.json made at {second})")
  out.write_text("not a law")
  assert cli.run(["fit", csv, f"--out={out}", "--approach=2", "--bootstrap=20"]) == 0
  assert capsys.readouterr().out.splitlines()[-1] == (
      f"wrote {out} (replacing the file that was there)")


def test_a_csv_with_unique_tokens_fits_the_data_constrained_law(tmp_path, capsys):
  """N, D, U, loss from Muennighoff et al.'s law at R_D* = 4, R_N* = 20 on the Chinchilla law,
  on a design like the published study's: the base law is fitted first (stage 1) and law.json
  holds R_D*, R_N* with intervals that cover them, and names the base law they depend on."""
  csv = syn.write_csv(tmp_path / "runs.csv", syn.muennighoff_design(4.0, 20.0, noise=0.003))
  out = tmp_path / "law.json"
  assert cli.run(["fit", csv, f"--out={out}", "--bootstrap=100", "--approach=3"]) == 0
  printed = capsys.readouterr().out
  dc = json.loads(out.read_text())["data_constrained"]
  assert dc["base_source"].startswith("stage 1: Approach 3 on the ") and dc["repeated"] == 126
  assert "hold only with it" in dc["depends_on_base"]
  assert dc["ci"]["R_D_star"][0] < 4.0 < dc["ci"]["R_D_star"][1]
  assert dc["ci"]["R_N_star"][0] < 20.0 < dc["ci"]["R_N_star"][1]
  base = [dc["base"][k] for k in ("E", "A", "B", "alpha", "beta")]
  N, D = np.meshgrid(np.geomspace(1e7, 3e9, 5), np.geomspace(1e9, 1e11, 5))
  assert syn.loss(N, D, base) == pytest.approx(syn.loss(N, D), rel=0.01)  # B, beta trade off
  assert ("data-constrained law (Muennighoff et al. 2023), base law stage 1: Approach 3 on "
          f"the {dc['base_runs']} runs") in printed
  assert dc["statements"]["R_D_star"] in printed
  assert cli.run(["plan", f"--law={out}", "--flops=1e21", "--unique-tokens=1e10"]) == 0
  printed = capsys.readouterr().out
  assert dc["statements"]["R_D_star"] in printed and "fitted to runs)" in printed


@pytest.mark.parametrize("flags,message", [
    (["--flops=chinchilla"], "--flops is a budget (chinchax plan); the FLOP counting "
                             "convention of the runs is --flops-convention"),
    (["--params=total"], "--params-convention=total|non_embedding"),
    (["--ci=95"], "argument --ci: must be strictly between 0 and 1, got '95'"),
    (["--bootstrap=-1"], "argument --bootstrap: must be >= 0"),
    (["--approach=4"], "approaches: give a comma list of 1, 2, 3"),
    (["--approach2-method=quadratic"], "argument --approach2-method: invalid choice: "
                                       "'quadratic'"),
    (["--flops-convention=6nd"], "argument --flops-convention: invalid choice: '6nd'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--base-law=/no/such/law.json"], "cannot read law file /no/such/law.json"),
])
def test_bad_flags_are_one_line_and_exit_2(tmp_path, capsys, flags, message):
  csv = syn.write_csv(tmp_path / "runs.csv", syn.isoflop())
  out = tmp_path / "law.json"
  assert cli.run(["fit", csv, f"--out={out}", *flags]) == 2
  captured = capsys.readouterr()
  assert captured.out == "" and captured.err.count("\n") == 1
  assert captured.err.startswith("chinchax fit: error: ") and message in captured.err
  assert not out.exists()


def test_approach_2_method_is_chosen_from_the_command_line(tmp_path):
  csv = syn.write_csv(tmp_path / "runs.csv", syn.isoflop(noise=0.002))
  methods = {}
  for method in ("local", "parabola"):
    out = tmp_path / f"{method}.json"
    assert cli.run(["fit", csv, f"--out={out}", "--approach=2", "--bootstrap=50", "--quiet",
                    f"--approach2-method={method}"]) == 0
    entry = json.loads(out.read_text())["approaches"]["2"]
    assert entry["method_asked"] == method
    methods[method] = entry
  assert methods["local"]["method"] == "local" and methods["local"]["lack_of_fit"] is None
  assert methods["parabola"]["lack_of_fit"]["limit"] == 3.0  # checked, local needs none
  assert methods["local"]["a"] != methods["parabola"]["a"]


def test_bad_runs_are_refused_and_nothing_written(tmp_path, capsys):
  bad = tmp_path / "bad.csv"
  bad.write_text("N,D,loss\n1e6,2e7,3.1\n2e6,1e7,-1\n")
  out = tmp_path / "law.json"
  assert cli.run(["fit", str(bad), f"--out={out}"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "bad.csv:3: loss" in err[0]
  assert not out.exists()

  missing = tmp_path / "missing.csv"
  missing.write_text("N,loss\n1e6,3.1\n")
  assert cli.run(["fit", str(missing), f"--out={out}"]) == 2
  assert "D" in capsys.readouterr().err
  assert cli.run(["fit", str(tmp_path / "nope.csv"), f"--out={out}"]) == 2
  one = syn.write_csv(tmp_path / "one.csv", syn.isoflop(budgets=(1e18,)))
  assert cli.run(["fit", one, f"--out={out}", "--approach=2", "--bootstrap=0"]) == 2
  assert "chinchax fit: error: Approach 2 needs at least two budgets" in (
      capsys.readouterr().err)
  assert not out.exists()


def test_help_exits_0(capsys):
  assert cli.run(["fit", "--help"]) == 0
  out = capsys.readouterr().out
  assert "--flops-convention" in out and "--ci" in out and "--base-law" in out


def test_an_approach_3_fit_runs_without_scipy_or_the_multihost_modules(tmp_path):
  """The fit, its bootstrap and its backtest call nothing that imports scipy (0.5 s), and the
  command's dispatcher none of sweeps/hosts (a multi-host job's watch, native log and rollcall:
  20 ms): the whole `chinchax fit --approach=3` of a sweep, in a fresh process."""
  C = np.repeat(np.logspace(18, 20, 4), 6)
  N = np.tile(np.logspace(7.5, 9.5, 6), 4)
  D = C / (6 * N)
  L = 1.69 + 406.4 / N**0.34 + 410.7 / D**0.28
  csv = tmp_path / "runs.csv"
  csv.write_text("N,D,loss\n" + "".join(f"{n},{d},{l}\n" for n, d, l in zip(N, D, L)))
  code = ("import sys; from chinchax import cli; rc = cli.run(['fit', sys.argv[1], "
          "'--approach=3', '--bootstrap=50', '--out=' + sys.argv[2], '--quiet']); "
          "print(rc, sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'jax'}), "
          "sorted(m for m in sys.modules if m.startswith('chinchax.sweeps.hosts')))")
  out = subprocess.run([sys.executable, "-c", code, str(csv), str(tmp_path / "law.json")],
                       capture_output=True, text=True, check=True).stdout
  assert out.split("\n")[-2] == "0 [] []", out


@pytest.mark.slow
def test_import_chinchax_stays_cheap_and_fit_plan_are_there():
  code = ("import sys, chinchax; heavy = [m for m in ('numpy', 'scipy', 'jax') if m in "
          "sys.modules]; assert not heavy, heavy; f = chinchax.fit; p = chinchax.plan; "
          "assert 'jax' not in sys.modules; print(f.__module__, p.__module__)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                       check=True).stdout
  assert out.split() == ["chinchax.scaling.api", "chinchax.scaling.api"]
