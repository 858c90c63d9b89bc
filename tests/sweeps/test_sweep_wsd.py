"""A sweep whose fixed-N series runs as one WSD run with cooldown branches (issue: WSD in sweeps)."""

import json
import os

import pytest

from chinchax.scaling.law import artifact as law_lib
from chinchax.errors import UserError
from chinchax import cli
from chinchax.sweeps import wsd
from chinchax.sweeps import spec as spec_lib
from chinchax.cli import flags
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.train import loop

from tests.helpers import sweep_helper


def cli_flags_config(argv):
  """The sweep config `chinchax sweep argv` resolves (its --config and overrides)."""
  return flags.parse_config_flags(argv, "chinchax sweep", sweep_helper.CONFIG).config


@pytest.mark.slow
def test_fixed_n_series_as_wsd_branches(tmp_path, tiny_sweep_argv):
  workdir = str(tmp_path / "wsd")
  args = tiny_sweep_argv(workdir, "--config.fixed_n.sizes=(44440,)",
                           "--config.fixed_n.tokens_per_param=(1.0,2.0)",
                           "--config.fixed_n.schedule=wsd", "--quiet")
  cli.run(["sweep", *args])  # the fit of a 4-run toy sweep may fail; the records matter here
  with open(os.path.join(workdir, "runs.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  wsd_rows = [r for r in rows if r.get("schedule") == "wsd"]
  iso_rows = [r for r in rows if r.get("budget")]
  assert len(iso_rows) == 2
  assert len(wsd_rows) == 2  # the two cooldown branches; the stable run is no scaling point
  assert {r["branch_of"] for r in wsd_rows} == {"N4.44e4-wsd"}
  assert sorted(r["D"] for r in wsd_rows)[1] > sorted(r["D"] for r in wsd_rows)[0]
  assert all(r["status"] == "done" and r["N_total"] == 44440 for r in wsd_rows)
  # A rerun trains nothing and keeps the same rows.
  mtimes = {r["name"]: os.path.getmtime(os.path.join(workdir, "N4.44e4-wsd", r["name"],
                                                     "result.json")) for r in wsd_rows}
  cli.run(["sweep", *args])
  for name, t in mtimes.items():
    assert os.path.getmtime(os.path.join(workdir, "N4.44e4-wsd", name, "result.json")) == t
  with open(os.path.join(workdir, "runs.jsonl")) as f:
    assert len([json.loads(line) for line in f]) == 4


def test_isoflop_cells_as_wsd_branches_feed_every_branch_into_the_fit(tmp_path, monkeypatch):
  """schedule='wsd': one WSD job per size, a cooldown branch at each budget's D; every branch is
  a row of runs.jsonl with its budget, and the fit (of a known law) uses them all."""
  monkeypatch.setattr(loop, "train", sweep_helper.synthetic_train)
  wd = tmp_path / "sweep"
  argv = sweep_helper.synthetic_argv(wd) + [
      "--config.schedule=wsd", "--config.sizes=(4e4,7e4,1.2e5,2e5,3.5e5,6e5)",
      "--config.recipe.batch_rule=fixed", "--config.recipe.batch_tokens=1024", "--quiet"]
  cfg = cli_flags_config(argv)
  spec = spec_lib.resolve(cfg, str(wd))
  assert len(spec.cells) == 18 and len(spec.jobs) == 6  # 6 sizes x 3 budgets, one job a size
  for job in spec.jobs:
    cells = sorted((c for c in spec.cells if c.shape == job.shape), key=lambda c: c.D)
    assert job.config.wsd.branches == tuple(c.D for c in cells)
    assert job.config.wsd.budgets == tuple(c.budget for c in cells)
    assert job.config.optimizer.warmup_steps == cells[0].warmup_steps
    for b in wsd.branches_of(job.config):  # each branch is its cell: D, budget, steps
      cell = next(c for c in cells if c.D == b.D)
      r = wsd.branch_config(job.config, b, job.workdir)
      assert (r.budget, r.tokens, r.optimizer.schedule) == (cell.budget, cell.D, "wsd")
      assert b.total_steps == cell.steps
    assert wsd.main_config(job.config, wsd.branches_of(job.config)).budget == 0.0

  assert cli.run(["sweep", *argv]) == 0
  rows = [json.loads(line) for line in (wd / "runs.jsonl").read_text().splitlines()]
  assert len(rows) == 18 and all(r["status"] == "done" for r in rows)
  assert sorted((r["N_total"], r["budget"]) for r in rows) == sorted(
      (c.N, c.budget) for c in spec.cells)
  law = law_lib.load_law(wd / "law.json")
  assert law["data"]["points"] == 18
  for k in ("alpha", "beta"):
    assert law["law"][k] == pytest.approx(sweep_helper.TRUTH[k], rel=1e-3)
  a_true = sweep_helper.TRUTH["beta"] / (sweep_helper.TRUTH["alpha"] + sweep_helper.TRUTH["beta"])
  assert law["optimal"]["a"] == pytest.approx(a_true, rel=1e-3)


def test_wsd_budgets_must_match_the_branches():
  c = train_config.get_config("tiny")
  c.wsd.branches, c.wsd.budgets = (4096.0, 8192.0), (1e9,)
  b = wsd.branches_of(c)[0]
  with pytest.raises(UserError, match="wsd.budgets has 1 values for 2 branches"):
    wsd.branch_config(c, b, "/tmp/x")


def test_schedule_must_be_cosine_or_wsd(tmp_path, capsys):
  argv = sweep_helper.argv(str(tmp_path / "wd"), "--config.schedule=linear")
  assert cli.run(["sweep", *argv]) == 2
  assert "schedule='linear' (of the IsoFLOP cells) is not cosine or wsd" in capsys.readouterr().err
