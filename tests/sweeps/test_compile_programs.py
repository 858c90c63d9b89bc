"""The XLA programs a sweep compiles (bench/programs.py, cold cache, a fresh process): the
programs it trains with, once per model size, and the LR table's few eager ops once."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import sweep_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The two-size grid of sweep_helper as WSD runs: 2 sizes, 4 run parts (a stable run and a
# branch each). 3 programs per size (init, the train chunk and the eval step) and at most 10 of their own:
# the LR tables' eager ops, once per process whatever the run lengths, jax's seed and a
# staging copy. Before issue 38 it was 40 (the LR table's ops per run part, and the
# checkpoint fingerprint's program per size).
PROGRAMS_MAX = 16
STEPS = ("jit(init_state)", "jit(train_chunk)", "jit(eval_step)")


@pytest.mark.slow
def test_the_tiny_wsd_sweep_compiles_its_steps_once_per_size_and_little_else(tmp_path):
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  argv = sweep_helper.argv(str(tmp_path / "sweep"), "--config.schedule=wsd", "--quiet")
  p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "programs.py"), "--json",
                      "--cold", "--", "sweep", *argv],
                     env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
  out = json.loads(p.stdout.strip().splitlines()[-1])
  with open(tmp_path / "sweep" / "runs.jsonl") as f:
    rows = [json.loads(line) for line in f if line.strip()]
  # Both branches trained (the fit of two runs then fails: the command's exit 1).
  assert [(r["status"], bool(r.get("branch_of"))) for r in rows] == [("done", True)] * 2, p.stderr
  by_name = out["by_name"]
  assert {name: by_name[name][1] for name in STEPS} == {name: 2 for name in STEPS}, by_name
  assert "jit(_tree_sums)" not in by_name  # the fingerprint is computed on the host
  assert out["programs"] <= PROGRAMS_MAX, by_name
