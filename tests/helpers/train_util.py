"""Shared by the `chinchax train` tests: a small corpus, subprocess runs, the logged losses."""

import json
import os
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "sweeps", "configs", "train.py") + ":tiny"
CHILD = os.path.join(ROOT, "tests", "helpers", "train_child.py")
# The top-level standard-library modules: ~200 documents (enough to give both splits some),
# much cheaper to fingerprint on every run than the whole `stdlib` corpus.
SMALL_CORPUS = os.path.join(sysconfig.get_paths()["stdlib"], "*.py")
CHEAP_XLA = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def tiny_args(workdir, data_dir, *overrides: str) -> list[str]:
  return [f"--config={TINY}", f"--workdir={workdir}", f"--config.data.corpus={SMALL_CORPUS}",
          f"--config.data.data_dir={data_dir}", *overrides]


def child_env(cache_dir: str, devices: int = 1, pause_from: int = 0, pause_s: float = 0.0):
  """Environment of a child run: CPU, cheap compiles shared through a persistent cache.

  Every run of one test compiles the same programs under the same flags, so the cache only
  saves time: a cached executable is the one a fresh compile would give.
  """
  xla = CHEAP_XLA + (f" --xla_force_host_platform_device_count={devices}" if devices > 1 else "")
  return {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla,
          "JAX_COMPILATION_CACHE_DIR": cache_dir,
          "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
          "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
          "CHINCHAX_TEST_PAUSE_FROM": str(pause_from), "CHINCHAX_TEST_PAUSE_S": str(pause_s)}


def start(args: list[str], env: dict) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, CHILD, *args], env=env, cwd=ROOT, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run(args: list[str], env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, CHILD, *args], env=env, cwd=ROOT, text=True,
                        capture_output=True, timeout=timeout)


def rows(workdir) -> list[dict]:
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


def losses(workdir) -> dict[str, list[tuple[int, float]]]:
  """(step, value) of every logged train loss and eval loss, in order."""
  r = rows(workdir)
  return {k: [(x["step"], x[k]) for x in r if k in x] for k in ("train_loss", "eval_loss")}


def result(workdir) -> dict | None:
  path = os.path.join(workdir, "result.json")
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)
