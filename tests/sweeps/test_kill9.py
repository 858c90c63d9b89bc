"""Kill -9 anywhere (tests/helpers/kill_harness.py): `chinchax train` and `chinchax sweep`
killed at named points (a step, a checkpoint save in flight or written but uncommitted, an eval,
a torn metrics line, the writes of result.json, runs.jsonl, sweep.json and report.md, the fit),
at random times, and sent SIGTERM, then rerun: every loss equals an uninterrupted run's to the
bit, no finished cell is trained again, runs.jsonl holds each cell once.

The plans are fixed (seeded times), so a failure reproduces. Each test prints its figures.
"""

import json
import random
import re

import pytest

from tests.helpers import kill_harness as kh
from tests.helpers import train_util as tu

P = lambda point: kh.Kill("point", point)  # noqa: E731
TERM = lambda point: kh.Kill("point", point, signal="TERM")  # noqa: E731

TRAIN_PLAN = [
    [P("step:5")],                     # before the first checkpoint
    [P("step:13")],                    # between checkpoints
    [P("checkpoint:1")],               # step 8's async save in flight
    [P("checkpoint-commit:2")],        # step 16's save written, not committed
    [P("checkpoint-commit:3")],        # the final save written, not committed
    [P("eval:2")],                     # step 16's eval computed, not recorded
    [P("eval:3")],                     # the final eval, after the final checkpoint
    [P("append:metrics.jsonl:20")],    # a torn metrics line
    [P("write:result.json")],          # the record half-written (the final eval row is in)
    [P("write:config.json")],          # at the very start
    [P("step:10"), P("checkpoint-commit:1")],  # killed again while resuming
    [TERM("step:11")],                 # preempted mid-run: saves step 11, exits 143
    [TERM("step:3"), P("step:6")],     # preempted, then killed in the resumed run
    "time", "time", "term",
]
SWEEP_PLAN = [
    [P("write:sweep.json")],
    [P("checkpoint-commit:2")],        # inside the first cell
    [P("eval:1")],
    [P("write:result.json:1")],        # the first cell's record half-written
    [P("write:runs.jsonl:1")],         # the first cell done, its line half-written
    [P("write:runs.jsonl:2")],         # the second cell's line
    [P("fit")],
    [P("write:report.md")],
    [P("write:runs.jsonl:1"), P("step:3")],  # killed again in the next cell
    [TERM("step:4")],                  # preempted inside the first cell
    "time", "term",
]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp("kill9")
  env = tu.child_env(str(root / "xla_cache"))
  return {"root": root, "data": str(root / "tfds"), "env": env}


def _run_plan(kind, plan, dirs, seed):
  ref = kh.reference(kind, str(dirs["root"] / f"{kind}-reference"), dirs["data"], dirs["env"])
  rng = random.Random(seed)
  results = []
  for i, kills in enumerate(plan):
    if isinstance(kills, str):  # a random moment of a run as long as the reference
      kills = [kh.Kill(kills, at_s=rng.uniform(0.2, 0.95) * ref["wall_s"])]
    results.append(kh.trial(kind, kills, str(dirs["root"] / f"{kind}-{i}"), dirs["data"],
                            dirs["env"], ref))
  kills = [k for r in results for k in r["kills"] if "ended first" not in k]
  figures = {"kind": kind, "trials": len(results),
             "kill points": sorted({re.split(r"[:@]", k.replace("write:", "write/").replace(
                 "append:", "append/"))[0] + (" SIGTERM" if "SIGTERM" in k else "")
                                    for k in kills}),
             "kills": len(kills),
             "results equal": sum(not r["problems"] for r in results),
             "cells retrained": sum(r["retrained"] for r in results),
             "reference wall s": round(ref["wall_s"], 1)}
  report = "\n".join(json.dumps(x) for x in [figures, *results])
  print(report)  # pytest -rP shows it
  (dirs["root"] / f"{kind}-figures.jsonl").write_text(report + "\n")
  return results, figures


def _check(results, figures, plan):
  assert figures["trials"] == len(plan)
  assert figures["cells retrained"] == 0
  problems = [(r["kills"], p) for r in results for p in r["problems"]]
  assert not problems, problems
  assert figures["results equal"] == len(plan)


@pytest.mark.slow
def test_train_killed_anywhere_resumes_to_the_bit(dirs):
  results, figures = _run_plan("train", TRAIN_PLAN, dirs, seed=17)
  _check(results, figures, TRAIN_PLAN)


@pytest.mark.slow
def test_sweep_killed_anywhere_resumes_to_the_bit_without_retraining(dirs):
  results, figures = _run_plan("sweep", SWEEP_PLAN, dirs, seed=71)
  _check(results, figures, SWEEP_PLAN)
