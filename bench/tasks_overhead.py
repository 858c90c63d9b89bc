"""What scoring the built-in task at every eval adds to a sweep: the tiny sweep with and
without `train.tasks = ("stdlib_next_line",)` (sweeps/configs/tiny.py:tasks), each in a fresh
workdir, one after the other on the same machine, then `chinchax fit-tasks` on the one with
tasks.

    python bench/tasks_overhead.py [--config=sweeps/configs/tiny.py] [--repeats=1]

Prints, per sweep, the wall time of `chinchax sweep` (one process each: the compile caches
start alike), the cells' summed wall time and eval phase (result.json's time_s.eval, where the
task scoring is counted), then the added time in seconds and percent, and the fit-tasks
summary. Wall times follow the machine's load: compare the two sweeps of one invocation only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sweep(config: str, workdir: str) -> dict:
  t = time.perf_counter()
  subprocess.run([sys.executable, "-m", "chinchax.cli", "sweep", f"--config={config}",
                  f"--workdir={workdir}", "--quiet"], cwd=ROOT, check=True,
                 stdout=subprocess.DEVNULL)
  wall = time.perf_counter() - t
  recs = [json.loads(l) for l in open(os.path.join(workdir, "runs.jsonl")) if l.strip()]
  return {"wall": wall, "cells": sum(r["wall_s"] for r in recs),
          "eval": sum(r["time_s"]["eval"] for r in recs), "runs": len(recs)}


def main() -> None:
  p = argparse.ArgumentParser()
  p.add_argument("--config", default="sweeps/configs/tiny.py")
  p.add_argument("--repeats", type=int, default=1)
  args = p.parse_args()
  out = tempfile.mkdtemp(prefix="tasks-overhead-")
  rows = []
  for r in range(args.repeats):
    for arg in ("", "tasks"):
      wd = os.path.join(out, f"{arg or 'plain'}-{r}")
      m = _sweep(args.config + (f":{arg}" if arg else ""), wd)
      rows.append((arg or "plain", m))
      print(f"{arg or 'plain':6s} sweep {m['wall']:7.1f} s   cells {m['cells']:7.1f} s   "
            f"eval phase {m['eval']:6.1f} s   ({m['runs']} runs)", flush=True)
  plain = [m for a, m in rows if a == "plain"]
  tasks = [m for a, m in rows if a == "tasks"]
  mean = lambda ms, k: sum(m[k] for m in ms) / len(ms)
  for k, what in (("wall", "sweep wall"), ("cells", "cells' wall"), ("eval", "eval phase")):
    d = mean(tasks, k) - mean(plain, k)
    print(f"added by the task: {what} {d:+.1f} s ({100 * d / mean(plain, 'wall'):+.1f}% of "
          f"the plain sweep's wall)")
  wd = os.path.join(out, f"tasks-{args.repeats - 1}")
  fit = subprocess.run([sys.executable, "-m", "chinchax.cli", "fit-tasks", wd,
                        f"--out={os.path.join(wd, 'tasks.json')}", "--bootstrap=200"],
                       cwd=ROOT, capture_output=True, text=True)
  print(fit.stdout or fit.stderr)
  print(f"workdirs under {out}")


if __name__ == "__main__":
  main()
