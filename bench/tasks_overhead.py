"""What scoring the built-in task at every eval adds to a sweep: the tiny sweep with and
without `train.tasks = ("stdlib_next_line",)` (sweeps/configs/tiny.py:tasks), each in a fresh
workdir, one after the other on the same machine. The sweep with tasks also fits them at its
end (WORKDIR/tasks.json, counted in its wall time), whose summary is printed last.

    python bench/tasks_overhead.py [--config=sweeps/configs/tiny.py] [--repeats=1]

Prints, per sweep, the wall time of `chinchax sweep` (one process each, each with its own empty
persistent compilation cache, so neither reads the other's programs), its CPU seconds (user +
system of the sweep's process: less moved by other processes than wall time on a busy
machine), the cells' summed wall time and eval phase (result.json's time_s.eval, where the
task scoring is counted) and the load average over the sweep; then the added time in seconds
and percent, and the task laws. `--repeats=K` interleaves K pairs. Wall times follow the
machine's load: compare the sweeps of one invocation only.
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
  env = dict(os.environ, CHINCHAX_COMPILE_CACHE=workdir + "-xla-cache")
  load = [os.getloadavg()[0]]
  t = time.perf_counter()
  p = subprocess.Popen([sys.executable, "-m", "chinchax.cli", "sweep", f"--config={config}",
                        f"--workdir={workdir}", "--quiet"], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL)
  while True:  # the 1-minute load average, sampled through the sweep
    pid, status, usage = os.wait4(p.pid, os.WNOHANG)
    if pid:
      break
    time.sleep(5)
    load.append(os.getloadavg()[0])
  if os.waitstatus_to_exitcode(status):
    raise SystemExit(f"chinchax sweep --config={config} exited "
                     f"{os.waitstatus_to_exitcode(status)}")
  wall = time.perf_counter() - t
  recs = [json.loads(l) for l in open(os.path.join(workdir, "runs.jsonl")) if l.strip()]
  return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
          "cells": sum(r["wall_s"] for r in recs),
          "eval": sum(r["time_s"]["eval"] for r in recs), "runs": len(recs),
          "load": sum(load) / len(load)}


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
      print(f"{arg or 'plain':6s} sweep {m['wall']:7.1f} s   CPU {m['cpu']:7.1f} s   "
            f"cells {m['cells']:7.1f} s   "
            f"eval phase {m['eval']:6.1f} s   ({m['runs']} runs, load {m['load']:.1f})",
            flush=True)
  plain = [m for a, m in rows if a == "plain"]
  tasks = [m for a, m in rows if a == "tasks"]
  mean = lambda ms, k: sum(m[k] for m in ms) / len(ms)
  for k, what in (("wall", "sweep wall"), ("cpu", "sweep CPU"), ("cells", "cells' wall"),
                  ("eval", "eval phase")):
    d = mean(tasks, k) - mean(plain, k)
    base = "cpu" if k == "cpu" else "wall"
    print(f"added by the task: {what} {d:+.1f} s ({100 * d / mean(plain, base):+.1f}% of "
          f"the plain sweep's {'CPU' if base == 'cpu' else 'wall'})")
  wd = os.path.join(out, f"tasks-{args.repeats - 1}")
  sys.path.insert(0, ROOT)
  from chinchax.scaling.tasks import file as tasks_file  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.tasks import text as tasks_text  # pylint: disable=g-import-not-at-top
  path = os.path.join(wd, "tasks.json")
  print(tasks_text.summary(tasks_file.load(path)) if os.path.exists(path) else
        f"no {path}: the sweep's task fit failed (its stderr says why)")
  print(f"workdirs under {out}")


if __name__ == "__main__":
  main()
