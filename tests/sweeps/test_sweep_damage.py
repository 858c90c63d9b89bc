"""A finished sweep whose records are damaged resumes through the damage (`chinchax sweep` in a
child process, the two-cell grid of the other sweep tests): a truncated result.json counts as
not finished, with a warning naming it, and the cell resumes from its checkpoints to the same
loss bit for bit without training again; a damaged and stale runs.jsonl is rebuilt from the
cells' records."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import sweep_helper
from tests.helpers import train_util as tu

pytestmark = pytest.mark.slow  # child processes that train

ROOT = tu.ROOT


def _sweep(wd, env):
  # --verbose: the cells' own lines ("resumed from step N") are part of what is checked.
  cmd = [sys.executable, "-m", "chinchax.cli", "sweep", *sweep_helper.argv(str(wd)),
         "--verbose"]
  return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  root = tmp_path_factory.mktemp("sweep-damage")
  env = tu.child_env(str(root / "xla_cache"))
  p = _sweep(root / "reference", env)
  assert p.returncode == 1, p.stderr[-3000:]  # trained; two cells are too few to fit
  return root, env, sweep_helper.results(str(root / "reference"))


def _copy(reference, name):
  root, _, _ = reference
  shutil.copytree(root / "reference", root / name)
  return root / name


def _untimed(record):
  return {k: v for k, v in record.items() if k not in ("wall_s", "time_s", "tokens_per_s", "mfu")}


def _runs(wd):
  return [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]


def test_a_truncated_result_json_resumes_the_cell_to_the_same_loss(reference):
  _, env, results = reference
  wd = _copy(reference, "truncated")
  damaged, whole = sorted(results)
  path = wd / damaged / "result.json"
  path.write_text(path.read_text()[: len(path.read_text()) // 2])
  rows_before = len(tu.rows(wd / damaged))
  whole_files = {f: (wd / whole / f).read_bytes() for f in ("result.json", "metrics.jsonl")}

  p = _sweep(wd, env)
  assert p.returncode == 1, p.stderr[-3000:]
  warnings = [l for l in p.stderr.splitlines() if "is not a valid run record" in l]
  assert warnings and all(str(path) in l for l in warnings), p.stderr
  assert f"{whole}: skipped, already done" in p.stdout
  assert "1 of 2 cells to train" in p.stdout
  steps = results[damaged]["steps"]
  assert f"resumed from step {steps}" in p.stdout  # its final checkpoint: no step trained
  now = sweep_helper.results(str(wd))
  assert now[whole] == results[whole]
  # The resumed cell's record: the same in all but this session's timing (it trained no step).
  assert _untimed(now[damaged]) == _untimed(results[damaged])
  assert now[damaged]["eval_loss"] == results[damaged]["eval_loss"]
  assert len(tu.rows(wd / damaged)) >= rows_before
  assert tu.losses(str(wd / damaged)) == tu.losses(str(reference[0] / "reference" / damaged))
  assert {f: (wd / whole / f).read_bytes() for f in whole_files} == whole_files
  lines = _runs(wd)
  assert sorted(l["name"] for l in lines) == sorted(results)
  assert all(l == sweep_helper.results(str(wd))[l["name"]] for l in lines)


def test_a_damaged_and_stale_runs_jsonl_is_rebuilt_from_the_records(reference):
  _, env, results = reference
  wd = _copy(reference, "runs-jsonl")
  first, second = sorted(results)
  stale = dict(results[first], eval_loss=99.0)
  (wd / "runs.jsonl").write_text(json.dumps(stale) + "\n" + '{"name": "' + second[:4] + "\n")
  p = _sweep(wd, env)
  assert p.returncode == 1, p.stderr[-3000:]
  assert "0 of 2 cells to train" in p.stdout
  (line,) = [l for l in p.stderr.splitlines() if "disagreed" in l]
  assert "(1 damaged, 1 stale, 1 missing, 0 repeated lines); rebuilt from the records" in line
  assert sorted(_runs(wd), key=lambda l: l["name"]) == [results[first], results[second]]
