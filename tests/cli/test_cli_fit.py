"""`chinchax fit` end to end on synthetic runs from a known law: law.json, plots, refusals."""

import json
import os

import numpy as np
import pytest

from chinchax.scaling import law as law_lib
from chinchax.sweeps import cli

TRUTH = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)


def write_csv(path, noise=0.003, budgets=(1e18, 3e18, 1e19, 3e19, 1e20), seed=0):
  rng = np.random.default_rng(seed)
  E, A, B, al, be = TRUTH.values()
  G = (al * A / (be * B)) ** (1 / (al + be))
  lines = ["N,C,loss,budget"]
  for C in budgets:
    for f in np.logspace(-1, 1, 9):
      N = G * (C / 6) ** (be / (al + be)) * f
      D = C / (6 * N)
      L = (E + A / N**al + B / D**be) * np.exp(rng.normal(0, noise))
      lines.append(f"{N:.8g},{C:.8g},{L:.8g},{C:.8g}")
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def test_fit_writes_a_valid_law_with_intervals_and_plots(tmp_path, capsys):
  runs = write_csv(tmp_path / "runs.csv")
  out = tmp_path / "law.json"
  rc = cli.run(["fit", runs, f"--out={out}", "--bootstrap=200", f"--plots={tmp_path / 'p'}"])
  assert rc == 0
  law = law_lib.ScalingLaw.load(str(out))
  a_true = TRUTH["beta"] / (TRUTH["alpha"] + TRUTH["beta"])
  assert law.a == pytest.approx(a_true, abs=0.03)
  raw = json.loads(out.read_text())
  assert set(raw["approaches"]) == {"2", "3"}  # no curves: Approach 1 skipped with a note
  assert raw["approaches"]["2"]["a"] == pytest.approx(a_true, abs=0.03)
  lo, hi = raw["approaches"]["3"]["ci"]["a"]
  assert lo < raw["approaches"]["3"]["a"] < hi
  assert raw["fit"]["starts"] == 4500 and raw["data"]["points"] == 45
  for stem in ("isoflops", "optimal", "law"):
    for ext in ("png", "svg"):
      assert os.path.getsize(tmp_path / "p" / f"{stem}.{ext}") > 1000
  printed = capsys.readouterr().out
  assert "Approach 2: a = " in printed and "Approach 1 skipped" in printed
  # The law plans: N* at a budget inside the fitted range, with an interval.
  assert cli.run(["plan", f"--law={out}", "--flops=1e19", "--json"]) == 0
  plan = json.loads(capsys.readouterr().out)
  N_star = law.optimum(1e19)[0]
  lo, hi = plan["optimum"]["interval"]["N"]
  assert lo < N_star < hi
  assert plan["optimum"]["N"] == pytest.approx(N_star, rel=1e-6)


def test_bad_runs_are_refused_and_nothing_written(tmp_path, capsys):
  bad = tmp_path / "bad.csv"
  bad.write_text("N,D,loss\n1e6,2e7,3.1\n2e6,1e7,nan\n")
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
  assert cli.run(["fit", write_csv(tmp_path / "ok.csv", budgets=(1e18,)), f"--out={out}",
                  "--approach=2", "--bootstrap=0"]) == 2
  assert "at least two budgets" in capsys.readouterr().err
  assert not out.exists()
