"""WSD cooldown branches: the plan against the optimizer's own WSD schedule, and a tiny run
with two branches whose records beat the constant-LR run at the same step."""

import json
import os

import numpy as np
import pytest

from chinchax.scaling.runs import records
from chinchax.errors import UserError
from chinchax.sweeps.train import metrics, optimizer
from chinchax.sweeps import wsd


def test_plan_branch_points_are_where_the_wsd_schedule_starts_to_decay():
  cfg = optimizer.OptimizerConfig(peak_lr=1.0, warmup_steps=5, schedule="wsd",
                                  decay_fraction=0.3)
  const = optimizer.schedule(optimizer.OptimizerConfig(peak_lr=1.0, warmup_steps=5,
                                                       schedule="constant"), 1000)
  for b in wsd.plan([7000, 3000], 0.3, tokens_per_step=100, warmup_steps=5):
    lr = optimizer.schedule(cfg, b.total_steps)
    assert b.total_steps == int(np.ceil(b.D / 100))
    assert b.start + b.decay_steps == b.total_steps
    # Up to the branch point the branch's LR is the stable run's, then it decays linearly.
    np.testing.assert_allclose([lr(t) for t in range(b.start + 1)],
                               [const(t) for t in range(b.start + 1)], rtol=1e-6)
    assert float(lr(b.start + 1)) < 1.0
    assert float(lr(b.total_steps)) == pytest.approx(0.1, rel=1e-6)


def test_plan_refuses_bad_branches():
  with pytest.raises(UserError, match="warmup"):
    wsd.plan([1000], 0.2, tokens_per_step=100, warmup_steps=20)
  with pytest.raises(UserError, match="repeats"):
    wsd.plan([1000, 1000], 0.2, tokens_per_step=10)
  with pytest.raises(UserError, match="decay_fraction"):
    wsd.plan([1000], 1.5, tokens_per_step=10)


@pytest.mark.parametrize("second, trained, status", [
    ("failed", [None, 1, 2, 3], "failed"),  # a failed branch: the later ones still train
    ("stopped", [None, 1, 2], "stopped"),   # a stop flag: the run ends there
])
def test_a_failed_branch_leaves_the_later_ones_to_train(monkeypatch, tiny_config, second,
                                                          trained, status):
  c = tiny_config
  tps = c.batch_size * c.seq_len
  c.wsd.branches = (20 * tps, 40 * tps, 60 * tps)
  calls = []

  def loop_train(config, workdir, **_):
    k = len(calls)  # 0: the stable run, then the branches in order
    calls.append(None if k == 0 else k)
    return {"name": config.name, "status": second if k == 2 else "done"}

  monkeypatch.setattr(wsd.loop, "train", loop_train)
  out = wsd.train_wsd(c, "/nonexistent/w", quiet=True)
  assert calls == trained
  assert out.status == status
  assert [r["status"] for r in out.branches] == ["done", second, "done"][:len(trained) - 1]


@pytest.mark.slow
def test_two_cooldown_branches_beat_the_stable_run(tmp_path, tiny_config):
  c = tiny_config
  tps = c.batch_size * c.seq_len
  c.name = "w"
  c.wsd.branches = (20 * tps, 40 * tps)  # T = 20, 40; decays of 5, 10; branch points 15, 30
  c.wsd.decay_fraction = 0.25
  c.optimizer.peak_lr = 2e-2  # high enough that the plateau sits on its noise floor
  c.eval_every, c.log_every = 5, 1
  c.wsd.stable_evals = True  # the stable run's curve, to compare each branch with
  c.checkpoint.every_steps = 1000
  workdir = str(tmp_path / "w")
  out = wsd.train_wsd(c, workdir, quiet=True)
  assert out.status == "done" and len(out.branches) == 2 and out.records == out.branches
  assert out.main["schedule"] == "constant" and out.main["steps"] == 30

  main_eval = {r["step"]: r["eval_loss"] for r in records.read_metrics(os.path.join(workdir, "metrics.jsonl"))
               if r.get("eval_loss") is not None}
  for b, T, start in zip(out.branches, (20, 40), (15, 30)):
    rec_path = os.path.join(workdir, f"{b['name']}", "result.json")
    with open(rec_path) as f:
      rec = json.load(f)
    assert rec["schedule"] == "wsd" and rec["branch_of"] == "w" and rec["init_step"] == start
    assert rec["steps"] == T and rec["D"] == T * tps
    # The branch's logged LR is the closed-form WSD schedule of a T-step run.
    rows = records.read_metrics(os.path.join(workdir, b["name"], "metrics.jsonl"))
    lr = optimizer.schedule(optimizer.OptimizerConfig(
        **{**c.optimizer.to_dict(), "schedule": "wsd", "decay_fraction": 0.25}), T)
    logged = [(r["step"], r["lr"]) for r in rows if r.get("lr") is not None]
    assert [s for s, _ in logged] == list(range(start + 1, T + 1))
    np.testing.assert_allclose([v for _, v in logged], [float(lr(s - 1)) for s, _ in logged],
                               rtol=1e-5)
    # Cooling down helps: below the stable run at the same step (or at the branch point when
    # the stable run stops there).
    assert rec["eval_loss"] < main_eval[min(T, 30)]


def test_the_dry_run_prices_a_wsd_sweep_as_its_runs(tmp_path):
  """The smoke sweep's 30 cells are 9 WSD runs: per size, the main run to its last branch
  point plus each branch's decay (round(0.2 T) of its T steps), counted here from the cells'
  own steps by the formula in sweeps/wsd.py's docstring."""
  import collections  # pylint: disable=g-import-not-at-top
  from chinchax.cli import flags  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps import configs, dry_run, spec as spec_lib  # pylint: disable=g-import-not-at-top
  spec = spec_lib.resolve(flags.load(configs.resolve("smoke")), str(tmp_path / "wd"))
  by_size = collections.defaultdict(list)
  for cell in spec.cells:
    by_size[cell.N].append(cell.steps)
  W = sum(max(T - round(0.2 * T) for T in Ts) + sum(round(0.2 * T) for T in Ts)
          for Ts in by_size.values())
  S = sum(c.steps for c in spec.cells)
  line = dry_run.wsd_line(spec, lambda cell: 60.0)  # a minute a cell, as a run of its own
  assert len(by_size) == 9 and W < S
  assert line.startswith(f"as 9 WSD runs (one per size, its cells cooldown branches): "
                         f"{W:,} steps, {round(100 * W / S)}% of the cells' {S:,}; ")
  first, names = line.split("\n")
  assert first.endswith(" with 2 at a time"), line  # the smoke's cpu_devices=2, packed
  # A cell's other names: the run that trains it, and its branch (as its records name it).
  assert names == ("  names: cell C5e10-N1.01e4 trains as branch C-N1.01e4-wsd-D8.25e05 of run "
                   "C-N1.01e4-wsd (progress lines name the run; runs.jsonl and report.md the "
                   "branch)")
