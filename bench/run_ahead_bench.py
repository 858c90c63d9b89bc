"""The cases of issue 40's hang, repeated, with the train loop's run-ahead bound and without.

    python bench/run_ahead_bench.py [--case=train|sweep|both] [--repeats=10]
        [--in-flight=2,0] [--timeout=400] [--out=/tmp/run-ahead]

`train`: `chinchax train --config=tiny --cell=C2.5e11-N3.2e4` (d_model 32, 2 layers, batch
24 x 64, 849 steps) on one process x 4 CPU devices, mesh data=4, `log_every=50`. `sweep`: the
tiny sweep (its own `log_every`, 50) on 2 processes x 2 CPU devices joined over loopback with
gloo (launch/multiproc.py), `recipe.batch_multiple=4`. Each run gets --timeout seconds; one
past it is a hang (killed, its last lines kept); the watchdog (sweeps/hosts/watchdog.py) ends a
stuck one first, exit 77. A sweep whose cells all trained but whose fit failed counts as
trained to the end: the bound changes no value the fit sees. `--in-flight` lists the bounds
to compare: sweeps/train/loop.py's IN_FLIGHT, 0 for none (the host dispatches as far ahead as
it likes, as before the bound). Prints one line per run (status, exit code, seconds) and a summary per case
and bound: runs finished, median and slowest seconds, and the host's 5-minute load average
(the 2-core host is shared, so the times move with it).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def child(in_flight: int, argv: list[str]) -> int:
  """`chinchax ARGV` with the loop's bound set to `in_flight` (0: unbounded)."""
  from chinchax import cli  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.train import loop  # pylint: disable=g-import-not-at-top
  loop.IN_FLIGHT = in_flight or 10**9
  return cli.run(argv)


def command(case: str, workdir: str, data_dir: str, in_flight: int) -> list[str]:
  me = [sys.executable, os.path.abspath(__file__), f"--child={in_flight}", "--"]
  if case == "train":
    return me + ["train", "--config=tiny", "--cell=C2.5e11-N3.2e4", f"--workdir={workdir}",
                 "--config.train.log_every=50", "--config.train.mesh.data=4",
                 f"--config.train.data.data_dir={data_dir}"]
  launch = [sys.executable, "-m", "chinchax.launch.multiproc", "--processes=2", "--devices=2",
            "--"]
  return launch + me + ["sweep", "--config=tiny", f"--workdir={workdir}",
                        "--config.recipe.batch_multiple=4",
                        f"--config.train.data.data_dir={data_dir}"]


def once(case: str, run_dir: str, data_dir: str, in_flight: int, timeout: float):
  shutil.rmtree(run_dir, ignore_errors=True)
  os.makedirs(run_dir)
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT}
  if case == "train":
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
  log = os.path.join(run_dir, "log.txt")
  t = time.monotonic()
  with open(log, "w") as f:
    q = subprocess.Popen(command(case, os.path.join(run_dir, "wd"), data_dir, in_flight),
                         env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
      rc = q.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      os.killpg(q.pid, 9)  # a hang: its session, every process of the job
      q.wait()
      rc = None
  return rc, time.monotonic() - t, log


def _fit_failed(log: str) -> bool:
  """Every cell trained and the fit, which this bench does not judge, failed."""
  with open(log) as f:
    text = f.read()
  return "the fit failed" in text and "cells failed" not in text


def main() -> int:
  if len(sys.argv) > 1 and sys.argv[1].startswith("--child="):
    return child(int(sys.argv[1].split("=")[1]), sys.argv[3:])
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--case", default="both", choices=("train", "sweep", "both"))
  p.add_argument("--repeats", type=int, default=10)
  p.add_argument("--in-flight", default="2,0")
  p.add_argument("--timeout", type=float, default=400)
  p.add_argument("--out", default="/tmp/run-ahead")
  args = p.parse_args()
  data_dir = os.path.join(args.out, "data")
  cases = ("train", "sweep") if args.case == "both" else (args.case,)
  bounds = [int(k) for k in args.in_flight.split(",")]
  times, loads = {}, {}
  for i in range(args.repeats):  # interleaved, so that both bounds see the same machine load
    for case in cases:
      for k in bounds:
        rc, s, log = once(case, os.path.join(args.out, f"{case}-{k}-{i}"), data_dir, k,
                          args.timeout)
        status = ("hung" if rc is None else "done" if rc == 0 else
                  "trained, fit failed" if rc == 1 and _fit_failed(log) else f"exit {rc}")
        times.setdefault((case, k), []).append((status, s))
        load = os.getloadavg()[1]  # the host's load over the last 5 minutes, others' work included
        loads.setdefault((case, k), []).append(load)
        print(f"{case} in_flight={k or 'unbounded'} run {i + 1}: {status} in {s:.1f} s, "
              f"load {load:.1f}" + ("" if status == "done" else f" ({log})"), flush=True)
  for (case, k), runs in times.items():
    ok = [s for st, s in runs if st in ("done", "trained, fit failed")]
    print(f"{case} in_flight={k or 'unbounded'}: {len(ok)}/{len(runs)} trained to the end"
          + (f", median {statistics.median(ok):.1f} s, slowest {max(ok):.1f} s" if ok else "")
          + f"; host load {min(loads[case, k]):.1f}-{max(loads[case, k]):.1f}"
          + f"; others: {[st for st, _ in runs if st != 'done']}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
