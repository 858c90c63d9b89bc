"""The adaptive sweep (sweeps/adaptive/rounds.py) on stand-in runs whose losses are the known law
(tests/helpers/sweep_helper.synthetic_train): rounds of `chinchax next` recorded in
adaptive.jsonl and report.md, within adaptive.max_flops, and a rerun that replays them."""

import json

from chinchax import cli
from chinchax.sweeps.adaptive import rounds
from chinchax.sweeps.train import loop
from tests.helpers.sweep_helper import synthetic_argv, synthetic_train

ADAPTIVE = ["--config.adaptive.round_cells=3", "--config.adaptive.first_cells=8",
            "--config.adaptive.max_flops=4e13", "--config.adaptive.width=0.001",
            "--config.bootstrap=0", "--quiet"]


def test_rounds_are_recorded_kept_within_max_flops_and_replayed(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  wd = tmp_path / "sweep"
  assert cli.run(["sweep", *synthetic_argv(wd), *ADAPTIVE]) == 0
  rounds = [json.loads(l) for l in (wd / "adaptive.jsonl").read_text().splitlines()]
  assert len(rounds[0]["cells"]) == 8 and "first design" in rounds[0]["why"]
  assert all(len(r["cells"]) <= 3 for r in rounds[1:]) and rounds[-1]["stop"]
  runs = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  assert len(runs) == sum(len(r["cells"]) for r in rounds)  # every chosen cell, once
  spent = sum(6 * r["N_total"] * r["D"] for r in runs)
  assert spent <= 4e13 * 1.0001
  # The grid of 3 budgets x 5 sizes is the pool's sizes at every budget: 15 sizes x 3 budgets.
  assert len(runs) < 45
  # The whole pool is kept beside the rounds (`chinchax next WORKDIR` reads it): every budget
  # of the config, every cell trained among its rows, and more cells than were trained.
  pool = [[float(x) for x in l.split(",")]
          for l in (wd / "adaptive_pool.csv").read_text().splitlines()[1:]]
  assert {b for *_, b in pool} == {1e12, 3e12, 1e13} and len(pool) > len(runs)
  assert {(r["N_total"], r["budget"]) for r in runs} <= {(n, b) for n, _, _, b in pool}
  report = (wd / "report.md").read_text()
  assert "## Adaptive rounds" in report and report.count("\n| ") >= len(rounds) + 1
  before = (wd / "adaptive.jsonl").read_text()
  capsys.readouterr()
  assert cli.run(["sweep", *synthetic_argv(wd), *ADAPTIVE]) == 0
  assert (wd / "adaptive.jsonl").read_text() == before  # the same decisions, none new
  assert "adaptive round 0: first design" in capsys.readouterr().out


def test_the_rounds_table_promises_no_width_while_poorly_determined():
  base = {"cells": [[1e5, 1e12]] * 4, "stop": False, "flops_spent": 1e12, "answer": "a"}
  text = rounds.table([
      {**base, "round": 1, "interval": [0.2, 0.8], "width": 0.6, "width_after": None,
       "phase": "spread"},
      {**base, "round": 2, "interval": [0.4, 0.5], "width": 0.1, "width_after": 0.08,
       "phase": "gain"}])
  row = {l.split("|")[1].strip(): l for l in text.splitlines() if l.startswith("| ")}
  assert row["1"].endswith("| none promised: poorly determined, the cells spread the design |")
  assert row["2"] == "| 2 | 1e12 | [0.4, 0.5] | 0.1 | 4 | 0.08 |", row["2"]


def test_a_chosen_cell_the_sweep_refused_costs_no_flops(tmp_path):
  """Only cells with a line in runs.jsonl (done or failed) count as spent: the smoke's
  C8e11-N1.01e4, past the data's unique tokens, was refused and had been counted."""
  lines = [{"name": "C1e11-N1e4", "N_total": 10000, "budget": 1e11, "status": "done"},
           {"name": "C2e11-N2e4", "N_total": 20000, "budget": 2e11, "status": "failed"}]
  (tmp_path / "runs.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
  chosen = [(10000.0, 1e11), (20000.0, 2e11), (10000.0, 8e11)]
  assert rounds._trained(str(tmp_path), chosen) == chosen[:2]  # pylint: disable=protected-access
