"""The main job's figures: `chinchax sweep` (the CPU smoke sweep) timed end to end.

    python bench/smoke_bench.py [--workdir=DIR]   # default: a fresh temporary folder

Runs the smoke sweep in a fresh process and a fresh workdir, exactly as README's first command
does, then prints from its law.json: the wall time, each budget's IsoFLOP minimum and the
sizes it was sampled between, and the exponents a, b of every approach with their bootstrap
intervals. Wall time depends on the machine and on what else it runs: quote both.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--workdir", default="", help="where the sweep writes (default: a temp dir)")
  args = p.parse_args()
  workdir = args.workdir or os.path.join(tempfile.mkdtemp(prefix="smoke-bench-"), "smoke")
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  t0 = time.time()
  out = subprocess.run([sys.executable, "-m", "chinchax.sweeps.cli", "sweep", f"--workdir={workdir}"],
                       env=env, cwd=ROOT, capture_output=True, text=True)
  wall = time.time() - t0
  if out.returncode != 0:
    sys.exit(f"chinchax sweep exited {out.returncode}:\n{out.stderr[-2000:]}")
  cells = sum(": done, eval loss" in l for l in out.stdout.splitlines())
  print(f"chinchax sweep: {cells} cells, {wall:.1f} s wall ({wall / 60:.2f} min), "
        f"{os.cpu_count()} CPU cores")

  with open(os.path.join(workdir, "law.json")) as f:
    law = json.load(f)
  with open(os.path.join(workdir, "runs.jsonl")) as f:
    runs = [json.loads(l) for l in f if l.strip()]
  fit2 = law["approaches"].get("2")
  if fit2:
    for C, N in zip(fit2["points"]["C"], fit2["points"]["N"]):
      sizes = [r["N_total"] for r in runs if r.get("budget") and abs(r["budget"] / C - 1) < 0.1]
      inside = min(sizes) < N < max(sizes)
      print(f"  C={C:.3g}: N*={N:.3g}, sizes {min(sizes):,}-{max(sizes):,} "
            f"({'inside' if inside else 'OUTSIDE'})")
  for name, entry in sorted(law["approaches"].items()):
    ci = entry.get("ci") or {}
    text = "   ".join(
        f"{k} = {entry[k]:.3f}" + (f" [{ci[k][0]:.3f}, {ci[k][1]:.3f}]" if k in ci else "")
        for k in ("a", "b"))
    print(f"  Approach {name}: {text}")


if __name__ == "__main__":
  main()
