"""The main job's figures: `chinchax sweep` (the CPU smoke sweep) timed end to end.

    python bench/smoke_bench.py [--workdir=DIR] [--cold] [--report-only] [-- --config.KEY=VALUE ...]

Runs the smoke sweep in a fresh process and a fresh workdir, exactly as README's first command
does (extra flags after `--` go to `chinchax sweep`, e.g. `--config.train.seed=1`), then
prints

* the wall time, and where each cell's time went (a WSD job's stable run and its branches
  each a row): init (the initial state, its compile
  included), compile (the train step), data, step, eval, checkpoint and other, from the
  `time_s` field of each record (`sweeps/train/metrics.py`); the cells' summed time against the
  wall time until the last one ended (how many ran at a time), and the time after it (fit,
  report);
* from law.json: each budget's IsoFLOP minimum and the sizes it was sampled between, the
  exponents a, b of every approach with their bootstrap intervals, and issue 12's checks
  (PASS/FAIL): alpha and beta in [0.05, 1.5], A and B below 1e12, the 90% interval of a at
  most 0.3 wide, Approaches 2 and 3 within 0.1 on a, `chinchax plan` at 10x the largest
  budget between 1 and 1000 tokens per parameter.

* a reference of this host's speed, measured after the sweep (`--no-reference` skips it,
  about 30 s): the smoke's own train step (bench/step_bench.py --K 16, 8 x 64 tokens, float32,
  on one core) at 48k and 176k parameters, in tokens/s. One release's smoke took 154 s warm
  in one session and 172-189 s in another, on machines of the same kind, its 48k step at
  142-144k and 104-138k tok/s: compare wall times across sessions only beside this line.

`--report-only` prints the split and the checks of the finished sweep in --workdir (e.g.
runs/smoke) without running it. The sweep's own output is kept in WORKDIR/sweep_stdout.txt.

`--cold` points the persistent compilation cache (`sweeps/accel/compile_cache.py`) at an empty
folder, as on a machine that never ran chinchax; by default the cache in ~/.cache is used, as a
second run on the same machine would. Wall time depends on the machine and on what else it
runs: quote both (the load average is printed).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from chinchax.scaling.numerics import fmt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("init", "compile", "data", "step", "eval", "checkpoint", "other")


def split_table(runs: list[dict]) -> list[str]:
  """One row per cell (in the order they ran) with its time per phase, then the totals."""
  rows = [r for r in runs if r.get("time_s")]
  head = ["cell", "N", "steps", "wall s"] + [f"{p} s" for p in PHASES]
  table = [[r["name"], f"{r['N_total']:,}", str(r["steps"]), f"{r['wall_s']:.1f}"]
           + [f"{r['time_s'].get(p, 0.0):.1f}" for p in PHASES] for r in rows]
  totals = {p: sum(r["time_s"].get(p, 0.0) for r in rows) for p in PHASES}
  wall = sum(r["wall_s"] for r in rows)
  table.append(["all cells", "", str(sum(r["steps"] for r in rows)), f"{wall:.1f}"]
               + [f"{totals[p]:.1f}" for p in PHASES])
  table.append(["share", "", "", ""] + [f"{totals[p] / max(wall, 1e-9):.0%}" for p in PHASES])
  widths = [max(len(x[i]) for x in [head] + table) for i in range(len(head))]
  fmt = lambda x: "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                            for i, (v, w) in enumerate(zip(x, widths)))
  return [fmt(head)] + [fmt(x) for x in table]


REFERENCE_SIZES = "4.8e4,1.76e5"


def reference() -> str:
  """One line: the smoke's train step on one core (bench/step_bench.py), in tokens/s."""
  cmd = [sys.executable, os.path.join(ROOT, "bench", "step_bench.py"), "--sizes",
         REFERENCE_SIZES, "--seq-len", "64", "--batch", "8", "--dtype", "float32", "--K", "16",
         "--steps", "128", "--rounds", "5", "--nanodo", "", "--json"]
  if hasattr(os, "sched_getaffinity") and shutil.which("taskset"):
    cmd = ["taskset", "-c", str(min(os.sched_getaffinity(0)))] + cmd  # one core, as a cell has
  out = subprocess.run(cmd, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True,
                       text=True)
  rows = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
  if out.returncode != 0 or not rows:
    return f"host reference: bench/step_bench.py failed ({out.stderr.strip()[-300:]})"
  sizes = ", ".join(f"{r['N'] / 1e3:.0f}k {r['tok_s'] / 1e3:,.1f}k tok/s" for r in rows)
  return (f"host reference (bench/step_bench.py, the smoke's train step on one core, after the "
          f"sweep): {sizes}")


def time_model(records: list[dict]) -> tuple[float, float, float]:
  """The CPU time model (sweeps/chips/cpu_time.py: a run's start, a cost per step and a
  FLOP rate) fitted to these records: the start is the median init + compile of the runs that
  start from scratch, the other two the least-squares fit of the rest of each record's wall
  time to the steps it trained and their Chinchilla FLOPs (a WSD branch trains only its decay
  from its main run's checkpoint)."""
  rows = [r for r in records if r.get("time_s") and r.get("steps")]
  fresh = [not r.get("branch_of") for r in rows]
  start = float(np.median([r["time_s"].get("init", 0.0) + r["time_s"].get("compile", 0.0)
                           for r, f in zip(rows, fresh) if f]))
  trained = np.array([1.0 if f else _decay_steps(r) / r["steps"] for r, f in zip(rows, fresh)])
  X = np.stack([[r["steps"] for r in rows], [r["flops_chinchilla"] for r in rows]], 1)
  X = X * trained[:, None]
  y = np.array([r["wall_s"] for r in rows]) - start * np.array(fresh, float)
  (step_s, s_per_flop), *_ = np.linalg.lstsq(X, y, rcond=None)
  return start, float(step_s), float(1.0 / s_per_flop)


def _decay_steps(branch: dict) -> int:
  """The steps a WSD branch trains itself: its decay, as `sweeps.wsd.plan` cuts it."""
  from chinchax.sweeps import wsd  # pylint: disable=g-import-not-at-top
  h = branch["hparams"]
  return wsd.plan([branch["D"]], h["decay_fraction"], h["batch_size"] * h["seq_len"])[0].decay_steps


def stable_runs(workdir: str, runs: list[dict]) -> list[dict]:
  """The stable runs of WSD jobs (WORKDIR/<job>/result.json): not rows of runs.jsonl (their
  branches are), but their time is the sweep's."""
  names, out = {r["name"] for r in runs}, []
  for d in sorted(os.listdir(workdir)):
    path = os.path.join(workdir, d, "result.json")
    if os.path.exists(path):
      with open(path) as f:
        r = json.load(f)
      if r.get("name") not in names:
        out.append(r)
  return out


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--workdir", default="", help="where the sweep writes (default: a temp dir)")
  p.add_argument("--cold", action="store_true", help="an empty compilation cache")
  p.add_argument("--report-only", action="store_true",
                 help="no sweep: print the split and the checks of --workdir's finished sweep")
  p.add_argument("--no-reference", dest="reference", action="store_false",
                 help="skip the host's speed reference (the smoke's step on one core)")
  p.add_argument("flags", nargs="*", help="more `chinchax sweep` flags (after --)")
  args = p.parse_args()
  if args.workdir and not args.report_only and os.path.isdir(args.workdir) and os.listdir(
      args.workdir):
    # The sweep would resume there: nothing to time, and the cells' wall clock is a past run's.
    sys.exit(f"smoke_bench: --workdir={args.workdir} is not empty; the sweep would resume a "
             "past run and time nothing. Give a new folder, or --report-only to read that one")
  tmp = tempfile.mkdtemp(prefix="smoke-bench-")
  workdir = args.workdir or os.path.join(tmp, "smoke")
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  if args.cold:
    env["CHINCHAX_COMPILE_CACHE"] = os.path.join(tmp, "xla-cache")
  load = os.getloadavg()[0]
  t0 = time.time()
  if args.report_only:
    wall = None
  else:
    out = subprocess.run([sys.executable, "-m", "chinchax.cli", "sweep",
                          f"--workdir={workdir}", *args.flags],
                         env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.time() - t0
    if out.returncode != 0:
      sys.exit(f"chinchax sweep exited {out.returncode}:\n{out.stderr[-2000:]}")
    with open(os.path.join(workdir, "sweep_stdout.txt"), "w") as f:
      f.write(out.stdout)
    jobs = sum(": done, eval loss" in l for l in out.stdout.splitlines())
    print(f"chinchax sweep {' '.join(args.flags)}: {jobs} jobs, {wall:.1f} s wall "
          f"({wall / 60:.2f} min), {os.cpu_count()} CPU cores, load average {load:.1f} before "
          f"and {os.getloadavg()[0]:.1f} after, {'cold' if args.cold else 'warm'} compile cache")

  with open(os.path.join(workdir, "runs.jsonl")) as f:
    runs = [json.loads(l) for l in f if l.strip()]
  for line in split_table(runs + stable_runs(workdir, runs)):
    print("  " + line)
  in_cells = sum(r.get("wall_s") or 0.0 for r in runs + stable_runs(workdir, runs))
  if wall is not None:
    # Cells may run side by side (executor='packed'): the span from the start to the last
    # result.json is the training's wall time, the rest the fit and report's. A WSD run's
    # branches write theirs below its folder, after its own.
    last = max(os.path.getmtime(os.path.join(top, "result.json"))
               for top, _, files in os.walk(workdir) if "result.json" in files)
    train_s = last - t0
    print(f"  cells: {in_cells:.1f} s of cell time in {train_s:.1f} s of wall "
          f"({in_cells / max(train_s, 1e-9):.2f} at a time); after the last cell (fit, "
          f"report, exit): {wall - train_s:.1f} s")

  start, step_s, rate = time_model(runs + stable_runs(workdir, runs))
  if step_s > 0 and rate > 0:
    print(f"  the CPU time model fitted to these cells (sweeps/chips/cpu_time.py): {start:.1f} s "
          f"per run's start, {step_s * 1e3:.2f} ms per step, {fmt.num(rate, 2)} FLOP/s (chinchilla)")
  else:  # on a GPU the step's time hardly grows with its FLOPs: the fit's rate goes negative
    print(f"  the CPU time model (sweeps/chips/cpu_time.py) does not fit these cells: "
          f"{step_s * 1e3:.2f} ms per step and {fmt.num(rate, 2)} FLOP/s (not a CPU's times?)")

  with open(os.path.join(workdir, "law.json")) as f:
    law = json.load(f)
  fit2 = law["approaches"].get("2")
  if fit2:
    for C, N in zip(fit2["points"]["C"], fit2["points"]["N"]):
      sizes = [r["N_total"] for r in runs if r.get("budget") and abs(r["budget"] / C - 1) < 0.1]
      inside = min(sizes) < N < max(sizes)
      print(f"  C={fmt.num(C)}: N*={fmt.num(N)}, sizes {min(sizes):,}-{max(sizes):,} "
            f"({'inside' if inside else 'OUTSIDE'})")
  for name, entry in sorted(law["approaches"].items()):
    ci = entry.get("ci") or {}
    text = "   ".join(
        f"{k} = {entry[k]:.3f}" + (f" [{ci[k][0]:.3f}, {ci[k][1]:.3f}]" if k in ci else "")
        for k in ("a", "b") if k in entry)
    extra = "   ".join(f"{k} = {fmt.num(entry[k])}" for k in ("alpha", "beta") if k in entry)
    print(f"  Approach {name}: {text}   {extra}".rstrip())
  for line in checks(law, workdir):
    print("  " + line)
  if args.reference and not args.report_only:
    print("  " + reference(), flush=True)


def checks(law: dict, workdir: str) -> list[str]:
  """Issue 12's checks of the smoke's law.json, one line each, PASS or FAIL."""
  from chinchax.scaling import api  # pylint: disable=g-import-not-at-top
  out = []
  ok = lambda good: "PASS" if good else "FAIL"
  head = law["approaches"].get("3") or {}  # the parametric law (the headline's when sound)
  if head:
    al, be, A, B = (head[k] for k in ("alpha", "beta", "A", "B"))
    out.append(f"{ok(0.05 <= al <= 1.5 and 0.05 <= be <= 1.5)}: alpha = {al:.3f}, "
               f"beta = {be:.3f} in [0.05, 1.5]")
    out.append(f"{ok(A < 1e12 and B < 1e12)}: A = {fmt.num(A)}, B = {fmt.num(B)} below 1e12")
  else:
    out.append("FAIL: law.json has no parametric law")
  fit2, fit3 = law["approaches"].get("2"), law["approaches"].get("3")
  ci = (fit2 or {}).get("ci", {}).get("a")
  if ci:
    out.append(f"{ok(ci[1] - ci[0] <= 0.3)}: the interval of a (Approach 2) "
               f"[{ci[0]:.3f}, {ci[1]:.3f}] is {ci[1] - ci[0]:.3f} wide (at most 0.3)")
  else:
    out.append("FAIL: Approach 2 gives no interval of a")
  if fit2 and fit3:
    d = abs(fit2["a"] - fit3["a"])
    out.append(f"{ok(d <= 0.1)}: Approaches 2 and 3 agree on a within {d:.3f} (at most 0.1)")
  C_max = max(fit2["points"]["C"]) if fit2 else None
  if C_max and head:
    p = api.plan(os.path.join(workdir, "law.json"), flops=10 * C_max).to_dict()
    r = p["optimum"]["tokens_per_param"]
    out.append(f"{ok(1 <= r <= 1000)}: chinchax plan at 10x the largest budget "
               f"({fmt.num(10 * C_max)} FLOPs) gives {fmt.num(r)} tokens per parameter (1 to 1000)")
  return out


if __name__ == "__main__":
  main()
