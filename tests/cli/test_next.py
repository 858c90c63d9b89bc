"""`chinchax next`: the JSON the issue names, one text line per cell, the pool of a workdir's
sweep config, and one-line refusals (exit 2) for bad input."""

import contextlib
import io
import json

import numpy as np
import pytest

from chinchax import cli
from chinchax.sweeps.configs import smoke
from tests.helpers import synthetic_law as syn

BUDGETS = np.logspace(18, 20, 5)


def run_cli(argv):
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    rc = cli.run(argv)
  return rc, out.getvalue(), err.getvalue()


@pytest.fixture(name="files")
def _files(tmp_path):
  N = np.concatenate([syn.N_opt(c) * np.geomspace(1 / 6, 6, 6) for c in BUDGETS])
  C = np.repeat(BUDGETS, 6)
  D = C / (6 * N)
  pool = tmp_path / "pool.csv"
  pool.write_text("N,D,budget\n" + "".join(f"{n:.6g},{d:.6g},{c:g}\n" for n, d, c in
                                           zip(N, D, C)))
  rng = np.random.default_rng(0)
  ran = np.arange(0, 30, 3)  # 10 runs, two per budget
  L = syn.loss(N[ran], D[ran]) * (1 + 0.005 * rng.standard_normal(len(ran)))
  runs = tmp_path / "runs.csv"
  runs.write_text("N,D,loss,budget\n" + "".join(
      f"{N[i]:.6g},{D[i]:.6g},{l:.6f},{C[i]:g}\n" for i, l in zip(ran, L)))
  return str(pool), str(runs), N, D, ran


def test_json_names_the_cells_the_stop_and_the_expectation(files):
  pool, runs, N, D, ran = files
  rc, out, _ = run_cli(["next", runs, f"--candidates={pool}", "--k=3", "--json"])
  assert rc == 0
  doc = json.loads(out)
  assert set(doc) == {"next", "stop", "why", "expected"} and doc["stop"] is False
  assert len(doc["next"]) == 3
  for cell in doc["next"]:
    assert {"N", "D", "budget"} <= set(cell)
    j = int(np.argmin(np.abs(np.log(N / cell["N"])) + np.abs(np.log(D / cell["D"]))))
    assert cell["N"] == pytest.approx(N[j], rel=1e-5) and j not in ran  # a pool cell, not run
    assert cell["cost"] == pytest.approx(6 * N[j] * D[j], rel=1e-5)
  e = doc["expected"]
  assert e["target"] == "N" and e["C_target"] == pytest.approx(1e21)  # 10x the largest
  assert e["interval"][0] <= e["estimate"] <= e["interval"][1]
  assert e["width"] == pytest.approx(e["interval"][1] - e["interval"][0])
  # Ten runs leave log N*(1e21) more than a factor e wide: the fit is poorly determined, so the
  # cells spread the design and no width after them is promised.
  assert e["width"] > 1.0 and e["phase"] == "spread" and e["width_after"] is None
  assert "wider than 1" in doc["why"] and all("poorly determined" in c["why"]
                                               for c in doc["next"])


def test_text_is_one_line_per_cell_and_the_budget_is_kept(files, tmp_path):
  pool, _, N, D, _ = files
  ran = np.arange(0, 30, 2)  # 15 runs: a fit well determined, the Gaussian update's phase
  L = syn.loss(N[ran], D[ran]) * (1 + 0.005 * np.random.default_rng(1).standard_normal(15))
  runs = tmp_path / "runs15.csv"
  runs.write_text("N,D,loss\n" + "".join(f"{N[i]:.6g},{D[i]:.6g},{l:.6f}\n"
                                         for i, l in zip(ran, L)))
  rc, out, _ = run_cli(["next", str(runs), f"--candidates={pool}", "--k=2", "--target=a",
                        "--width=0.01", "--flops-left=3e19"])
  lines = out.strip().splitlines()
  assert rc == 0 and len(lines) <= 3 and lines[0].startswith("a = ")
  assert all("expected to remove" in line for line in lines[1:])
  spent = sum(float(line.split("N=")[1].split()[0]) * float(line.split("D=")[1].split()[0]) * 6
              for line in lines[1:])
  assert spent <= 3e19 * 1.0001


def test_no_runs_gives_a_first_design(files):
  pool, *_ = files
  rc, out, _ = run_cli(["next", f"--candidates={pool}", "--k=4", "--json"])
  doc = json.loads(out)
  assert rc == 0 and len(doc["next"]) == 4 and "first design" in doc["why"]
  assert max(c["budget"] for c in doc["next"]) <= 1e19  # the cheaper half of the budgets


def test_a_workdir_pool_is_its_configs_budgets_at_every_size(tmp_path):
  (tmp_path / "sweep.json").write_text(smoke.get_config().to_json_best_effort())
  rc, out, _ = run_cli(["next", str(tmp_path), "--k=30", "--json"])
  doc = json.loads(out)
  assert rc == 0
  sizes = {round(c["N"]) for c in doc["next"]}
  assert sizes <= set(smoke.LADDER) and {c["budget"] for c in doc["next"]} <= set(smoke.BUDGETS)
  # Every rung is offered at every budget: the smallest budget's cells go past its own sizes.
  small = {round(c["N"]) for c in doc["next"] if c["budget"] == smoke.BUDGETS[0]}
  assert small - set(smoke.SIZES[0]), small


@pytest.mark.parametrize("argv, message", [
    (["--k=3"], "give --candidates=CSV"),
    (["--candidates={pool}", "--k=0"], "--k must be a whole number >= 1"),
    (["--candidates={pool}", "--flops-left=-1"], "--flops-left"),
    (["--candidates={pool}", "--target=b"], "--target"),
    (["--candidates={pool}", "--width=0"], "--width must be a positive number"),
    (["{d}/missing.csv", "--candidates={pool}"], "no such file"),
    (["--candidates={d}/missing.csv"], "not found"),
    (["{d}", "--k=2"], "not a sweep workdir with a sweep.json"),
])
def test_bad_input_is_one_line_and_exit_2(files, tmp_path, argv, message):
  pool = files[0]
  argv = [a.format(pool=pool, d=tmp_path) for a in argv]
  rc, out, err = run_cli(["next", *argv])
  assert rc == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, err


def test_an_adaptive_workdir_pool_is_the_whole_grid_not_the_budgets_chosen(tmp_path):
  """An adaptive round's sweep.json holds only the budgets chosen so far; the pool is the
  config's whole grid (adaptive_pool.csv), so a budget no round chose yet is offered."""
  config = smoke.get_config()
  config.budgets, config.sizes = (smoke.BUDGETS[0],), (tuple(smoke.SIZES[0]),)
  (tmp_path / "sweep.json").write_text(config.to_json_best_effort())
  N = np.array([float(n) for n in smoke.LADDER for _ in smoke.BUDGETS])
  C = np.array([float(b) for _ in smoke.LADDER for b in smoke.BUDGETS])
  (tmp_path / "adaptive_pool.csv").write_text("N,D,C,budget\n" + "".join(
      f"{n},{c / (6 * n)},{c},{c}\n" for n, c in zip(N.tolist(), C.tolist())))
  rc, out, _ = run_cli(["next", str(tmp_path), "--k=40", "--json"])
  doc = json.loads(out)
  assert rc == 0 and doc["expected"]["cells_left"] == int(np.sum(C >= 6 * N**2))  # D/N >= 1
  assert {c["budget"] for c in doc["next"]} - {smoke.BUDGETS[0]}, doc["next"]
