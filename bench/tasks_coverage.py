"""Coverage of the task laws' intervals on synthetic two-step truths (tests/helpers/task_truths.py:
OLMo's ladder shape, 5 sizes x 4 token counts x 6 checkpoints, noise on the task loss and
binomial noise on accuracy): per link, how often the 90% intervals of the predicted task loss
and accuracy at 10x the largest run's compute hold the truth, their median width, the median
miss of the point prediction, and how often each warning fired. Prints a table.

    .venv/bin/python bench/tasks_coverage.py [--replicates=100] [--bootstrap=200]
"""

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from chinchax.scaling.tasks import table, steps, predict  # pylint: disable=wrong-import-position
from chinchax.scaling.tasks import fit as tasks_fit  # pylint: disable=wrong-import-position
from tests.helpers import task_truths as T  # pylint: disable=wrong-import-position


def run(link: str, replicates: int, bootstrap: int, scale: float, chance: bool):
  N, D = T.target(scale)
  L_true = float(T.task_loss(N, D))
  acc_true = float(T.accuracy(L_true, link))
  held = {"loss": 0, "accuracy": 0}
  widths, misses, warned, extrapolated = [], [], {}, 0
  for seed in range(replicates):
    d = table.from_columns(T.ladder(seed, link=link, chance=chance))["synth"]
    f = steps.fit_task(d, bootstrap=bootstrap, seed=seed)
    p = predict.at(tasks_fit.entry(f, 0.9, seed), N, D, 0.9)
    for name, truth in (("loss", L_true), ("accuracy", acc_true)):
      lo, hi = p[f"{name}_interval"]
      held[name] += lo <= truth <= hi
    widths.append(p["accuracy_interval"][1] - p["accuracy_interval"][0])
    misses.append(abs(p["accuracy"] - acc_true))
    extrapolated += p["extrapolated"]
    for w in f.warnings:
      key = w.split(":")[0] + ": " + w.split(":")[1][:40]
      warned[key] = warned.get(key, 0) + 1
  return dict(link=link, L=L_true, acc=acc_true, held=held, width=float(np.median(widths)),
              miss=float(np.median(misses)), extrapolated=extrapolated, warned=warned)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--replicates", type=int, default=100)
  ap.add_argument("--bootstrap", type=int, default=200)
  ap.add_argument("--scale", type=float, default=10.0, help="x the largest run's compute")
  ap.add_argument("--links", default="sigmoid,gompertz")
  ap.add_argument("--free-floor", action="store_true", help="no chance column: fit the floor")
  args = ap.parse_args()
  print(f"{args.replicates} ladders per link, {args.bootstrap} resamples each, target "
        f"{args.scale:g}x the largest run's compute (N, D = {T.target(args.scale)[0]:.3g}, "
        f"{T.target(args.scale)[1]:.3g}), floor {'fitted' if args.free_floor else 'held'}")
  print(f"{'link':<9} {'true L':>7} {'true acc':>8} {'loss held':>9} {'acc held':>8} "
        f"{'acc width':>9} {'acc miss':>8} {'extrap':>6}  s")
  for link in args.links.split(","):
    t = time.perf_counter()
    r = run(link, args.replicates, args.bootstrap, args.scale, not args.free_floor)
    print(f"{link:<9} {r['L']:>7.4f} {r['acc']:>8.4f} {r['held']['loss']:>9} "
          f"{r['held']['accuracy']:>8} {r['width']:>9.4f} {r['miss']:>8.4f} "
          f"{r['extrapolated']:>6}  {time.perf_counter() - t:.0f}")
    for w, n in sorted(r["warned"].items()):
      print(f"          warned in {n}: {w}...")


if __name__ == "__main__":
  main()
