"""bench/init_bench.py runs on a CPU (both paths on the CPU), so that the command an
accelerator host runs does not rot: each path's state on its devices, the two equal."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow  # a process that compiles two inits of a 1.1M-parameter model
def test_the_init_bench_on_a_cpu(tmp_path):
  env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu",
         "CHINCHAX_COMPILE_CACHE": str(tmp_path / "cache")}
  done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "init_bench.py"),
                         "--sizes=1.1e6"], env=env, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  lines = done.stdout.splitlines()
  made = [l for l in lines if " made on the " in l]
  assert [re.search(r"made on the (\w+)", l).group(1) for l in made] == ["devices", "host"]
  assert all(l.endswith("state on ['cpu']") for l in made)
  # Both compiled unoptimised on the CPU from one key: the same parameters to the bit.
  assert "the two states' parameters differ by at most 0" in done.stdout
  assert lines[-1] == "a CPU mesh: a run makes its state on the mesh, whatever its size"
