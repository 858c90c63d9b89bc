"""The sweep's counts as README states them: WSD runs and the cells they train, each branch's
loss with its budget, and a resumed sweep's count going on from the runs already done."""

import io
import types

from chinchax.sweeps import console
from chinchax.sweeps import sweep


def test_a_resumed_sweep_counts_on_from_the_runs_done():
  out = io.StringIO()
  p = console.SweepProgress(["c", "d"], [1.0, 1.0], stream=out, live=False,
                             clock=lambda: 0.0, done_before=7)
  p.start("c")
  assert p.end("c", "done", "eval loss 2.0").startswith("[8/9] c: done")
  p.start("d")
  assert p.end("d", "done", "eval loss 1.9").startswith("[9/9] d: done")


def test_wsd_runs_say_how_many_cells_they_train(monkeypatch):
  branches = {"N1-wsd": 6, "N2-wsd": 6, "N3-wsd": 4}
  monkeypatch.setattr(sweep.job_lib, "record_dirs", lambda j: ["x"] * branches[j.name])
  jobs = [types.SimpleNamespace(name=n) for n in branches]
  line = sweep._todo_line(jobs, jobs[1:], "packed")  # pylint: disable=protected-access
  assert line.startswith("2 of 3 runs to train (10 of 16 cells to train as their cooldown")
  monkeypatch.setattr(sweep.job_lib, "record_dirs", lambda j: ["x"])
  line = sweep._todo_line(jobs, jobs, "local")  # pylint: disable=protected-access
  assert line == "3 of 3 cells to train with executor='local'"


def test_each_branch_loss_names_its_budget():
  records = [{"eval_loss": 2.30121, "budget": 5e10}, {"eval_loss": 2.2205, "budget": 1e11}]
  losses = sweep._losses  # pylint: disable=protected-access
  assert losses(records) == "2.3012 (C=5e10), 2.2205 (C=1e11)"
  assert losses(records[:1]) == "2.3012"
  assert losses([dict(records[0], schedule="wsd")]) == "2.3012 (C=5e10)"  # a lone branch
