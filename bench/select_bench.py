"""The adaptive study of `chinchax next` against the full grid and two naive studies at the same
FLOPs, on synthetic truths in and out of the law's family (tests/helpers/active_study.py).

    .venv/bin/python bench/select_bench.py [--replicates=100] [--truths=law,broken,...]
        [--resamples=200] [--k=4] [--first-seed=0] [--log=FILE.jsonl]
    .venv/bin/python bench/select_bench.py --table=A.jsonl,B.jsonl   # the table of logs

`--resamples` is the bootstrap of each round's decision only; every study's interval of a is
chinchax.fit's with 200. `--log` appends a line per replicate, so several processes (each its
own --first-seed) share one table and a run cut short still gives one.

Each replicate draws a dense pool (10 budgets 1e18-1e21 x 8 sizes over N*/6..6N* around a
prior that wanders ±0.3 in log N, 0.5% noise, 2 diverged cells) and its losses once; the
adaptive study (a 10-cell first design, then 4 cells a round by expected narrowing of a per
FLOP, until a's 90% interval is 0.025 wide or `--max-share` of the full grid's FLOPs is spent)
and two naive studies at the FLOPs the adaptive one spent (the largest budgets dropped; three
sizes per budget around the prior, the largest budgets dropped to fit) are fitted by
chinchax.fit (200 resamples). Printed per truth and study: the mean share of the full grid's
FLOPs, how many of the replicates' 90% intervals of a hold the true a (the least-squares slope
of the true N*(C) over the pool's budgets), and the median width relative to the full grid's
on the same replicate.

100 replicates per truth on the 2-core shared host (load average 13-16; 4 processes with
--log and --first-seed, `--resamples=100` in the rounds, 200 in every fit compared; about
2 replicates a minute in all), the rule of scaling/select/spread.py in force:

    truth        study              FLOPs      held width/full   width
    law          full              100.0%   93/100        1.00   0.025
    law          adaptive           32.1%   92/100        1.21   0.029
    law          drop_largest       20.3%   91/100        1.38   0.034
    law          three_per_budget   16.7%   99/100        5.77   0.142
    broken       full              100.0%   92/100        1.00   0.028
    broken       adaptive           34.1%   93/100        1.18   0.031
    broken       drop_largest       21.2%   88/100        1.31   0.037
    broken       three_per_budget   17.2%   97/100        5.41   0.151

(15.1 and 15.5 rounds per adaptive study.) kaplan and constant_lr were not run to 100 here.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests.helpers import active_study  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests.helpers import synthetic_law  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests.helpers import truths  # pylint: disable=g-import-not-at-top,wrong-import-position

TRUTHS = {"law": truths.Truth("law", synthetic_law.loss), **truths.TRUTHS}
STUDIES = ("full", "adaptive", "drop_largest", "three_per_budget")


def replicate(truth, seed: int, max_share: float, width: float | None, resamples: int = 200,
              k: int = 4):
  w = active_study.world(truth, seed)
  total = float(w.pool.cost.sum())
  chosen, rounds = active_study.adaptive(w, max_share * total, width=width, k=k,
                                         resamples=resamples)
  spent = float(w.pool.cost[chosen].sum())
  cells = {"full": active_study.full(w), "adaptive": chosen,
           "drop_largest": active_study.drop_largest(w, spent),
           "three_per_budget": active_study.three_per_budget(w, spent)}
  out = {}
  for name, c in cells.items():
    got = active_study.interval_a(w, c) if len(c) >= 5 else None
    out[name] = (float(w.pool.cost[c].sum()) / total, got, w.a_true)
  return out, len(rounds)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--replicates", type=int, default=100)
  p.add_argument("--truths", default="law,broken,kaplan,constant_lr")
  p.add_argument("--max-share", type=float, default=0.35)
  p.add_argument("--width", type=float, default=0.025)
  p.add_argument("--resamples", type=int, default=200,
                 help="bootstrap refits of each round's decision (the fits compared: 200)")
  p.add_argument("--k", type=int, default=4, help="cells a round adds")
  p.add_argument("--first-seed", type=int, default=0)
  p.add_argument("--log", help="append each replicate's result as a JSON line here")
  p.add_argument("--table", help="print the table of a --log file (several: comma-separated) "
                 "and stop")
  args = p.parse_args()
  if args.table:
    seen = {}  # a (truth, seed) logged twice, by overlapping processes, counts once
    for f in args.table.split(","):
      for l in open(f):
        if l.strip():
          rec = json.loads(l)
          seen.setdefault((rec["truth"], rec["seed"]), rec)
    lines = list(seen.values())
    for t in dict.fromkeys(l["truth"] for l in lines):
      mine = [l for l in lines if l["truth"] == t]
      print_table(t, [l["result"] for l in mine], [l["rounds"] for l in mine], 0.0)
    return
  print(f"{'truth':<12} {'study':<17} {'FLOPs':>6} {'held':>9} {'width/full':>10} "
        f"{'width':>7} {'no interval':>11}  (90% intervals of a, {args.replicates} replicates)")
  for t in args.truths.split(","):
    start = time.time()
    results, rounds = [], []
    for seed in range(args.first_seed, args.first_seed + args.replicates):
      r, n = replicate(TRUTHS[t], seed, args.max_share, args.width, args.resamples, args.k)
      results.append(r)
      rounds.append(n)
      if args.log:
        with open(args.log, "a") as f:
          f.write(json.dumps({"truth": t, "seed": seed, "rounds": n, "result": r}) + "\n")
    print_table(t, results, rounds, time.time() - start)


def print_table(t: str, results: list, rounds: list, seconds: float) -> None:
  for s in STUDIES:
    share = np.mean([r[s][0] for r in results])
    held = sum(1 for r in results if r[s][1] and r[s][1][1][0] <= r[s][2] <= r[s][1][1][1])
    rel = [(r[s][1][1][1] - r[s][1][1][0]) / (r["full"][1][1][1] - r["full"][1][1][0])
           for r in results if r[s][1] and r["full"][1]]
    missing = sum(1 for r in results if not r[s][1])
    widths = [r[s][1][1][1] - r[s][1][1][0] for r in results if r[s][1]]
    print(f"{t:<12} {s:<17} {share:>6.1%} {held:>4}/{len(results):<4} "
          f"{np.median(rel) if rel else float('nan'):>10.2f} "
          f"{np.median(widths) if widths else float('nan'):>7.3f} {missing:>11}")
  print(f"{t:<12} ({len(results)} replicates, {np.mean(rounds):.1f} rounds per adaptive study; "
        f"{seconds:.0f} s)")


if __name__ == "__main__":
  main()
