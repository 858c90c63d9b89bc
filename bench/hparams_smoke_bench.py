"""Times `chinchax sweep --config=hparams_smoke` end to end and prints its table and laws.

    python bench/hparams_smoke_bench.py [--workdir=/tmp/hparams_smoke] [--keep]

Trains the grid (sweeps/configs/hparams_smoke.py) into a fresh workdir, prints the wall and
CPU time of the sweep (training, fit-hparams and the plots), the load average before and
after (the host is shared: the wall time follows its load, the CPU time much less), whether
every point's LR optimum is interior, and the fitted table and laws (hparams.json). Then the
smoke sweep's hand-picked LR line (sweeps/configs/smoke.py) against the LR law fitted to the
runs at the smoke's own batch (8 x 64): for each of its 30 cells, its LR over the law's, and
whether it lies inside the law's 90% interval and inside the fitted points' 1% band (the LR
range over which the loss stays within 1% of the optimum).
"""

import argparse
import json
import os
import resource
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # pylint: disable=wrong-import-position

import chinchax  # pylint: disable=wrong-import-position
from chinchax.scaling.hparams import file as hparams_file  # pylint: disable=wrong-import-position
from chinchax.scaling.hparams import fit as hparams_fit
from chinchax.scaling.hparams import law as hparams_law
from chinchax.scaling.hparams import text as hparams_text
from chinchax.sweeps import grid  # pylint: disable=wrong-import-position
from chinchax.sweeps.configs import hparams_smoke, smoke  # pylint: disable=wrong-import-position


def smoke_check(workdir: str) -> None:
  """The smoke's LR line against the LR law of the runs at the smoke's batch."""
  batch = smoke.BATCH
  with open(os.path.join(workdir, "runs.jsonl")) as f:
    records = [json.loads(line) for line in f if line.strip()]
  path = os.path.join(workdir, f"runs_B{batch}.jsonl")
  with open(path, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in records
                 if r["hparams"]["batch_size"] == batch)
  doc = hparams_fit.fit([path], bootstrap=1000)
  print(f"\n=== the LR law at the smoke's batch ({batch} x 64) ===")
  print(hparams_text.summary(doc))
  half = np.median([np.log(p["lr"]["within_tol"][1] / p["lr"]["opt"]) for p in doc["points"]])
  cells, _ = grid.make_grid(smoke.get_config())
  ratios, inside = [], 0
  for c in cells:
    value, (lo, hi) = hparams_law.predict(doc["lr"], {"N": c.N, "D": c.D, "C": 6 * c.N * c.D})
    ratios.append(c.peak_lr / value)
    inside += lo <= c.peak_lr <= hi
  r = np.array(ratios)
  fitted = doc["lr"]["range"]["N"]
  print(f"smoke LR / law LR over its {len(cells)} cells: min {r.min():.2f}, median "
        f"{np.median(r):.2f}, max {r.max():.2f}; {inside} inside the law's 90% interval; "
        f"{int((np.abs(np.log(r)) <= half).sum())} inside the 1% band (x{np.exp(half):.2f} "
        f"either side, the points' median); the law is fitted over N {fitted[0]:.3g}-"
        f"{fitted[1]:.3g}, the smoke's cells reach {max(c.N for c in cells):.3g}")


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--workdir", default="/tmp/hparams_smoke")
  p.add_argument("--keep", action="store_true", help="resume an existing workdir")
  a = p.parse_args()
  if not a.keep:
    shutil.rmtree(a.workdir, ignore_errors=True)
  load0 = os.getloadavg()
  usage = lambda: sum(getattr(resource.getrusage(w), f) for w in (
      resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
  t0, c0 = time.time(), usage()
  result = chinchax.sweep(hparams_smoke.get_config(), a.workdir, quiet=True)
  wall = time.time() - t0
  cpu = usage() - c0
  doc = hparams_file.load(os.path.join(a.workdir, "hparams.json"))
  interior = all(not p["lr"]["flags"] for p in doc["points"])
  print("\n=== hparams_smoke ===")
  print(hparams_text.summary(doc))
  print(f"status {result.status}, failed {len(result.failed)}, fit error {result.fit_error}")
  print(f"LR optimum interior at every point: {interior}")
  print(f"wall {wall:.0f} s, CPU {cpu:.0f} s ({cpu / wall:.2f} cores); load average "
        f"{load0[0]:.1f} before, {os.getloadavg()[0]:.1f} after (1-minute)")
  print(json.dumps({"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "interior": interior}))
  smoke_check(a.workdir)


if __name__ == "__main__":
  main()
