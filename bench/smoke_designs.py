"""What cheaper smoke designs would cost and give, read off one finished smoke sweep.

    python bench/smoke_designs.py runs/smoke [--resamples 400]

A WSD sweep's cells are cooldown branches of one stable run per size, so a design with fewer
cells is a subset of the same runs: each size's stable run shortened to its largest remaining
budget's branch point, its remaining branches as they were. For each design the script prints
its cells, its cell-seconds from the sweep's own `wall_s` (a stable run's scaled by the tokens
it still needs; at two cells at a time the wall time is about half), and the fit of its runs
(`chinchax.fit`, `--resamples` bootstrap): Approach 2's a with its 90% interval and width,
Approach 3's a and interval, how far they are apart, and the backtest's miss of the held-out
budget's N* (the largest budget predicted from the others). The smoke's checks
(bench/smoke_bench.py) ask for an interval of a at most 0.3 wide and the approaches within 0.1.
"""

import argparse
import json
import os
import sys
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's chinchax, not an installed one

import chinchax  # pylint: disable=wrong-import-position


def load(workdir: str):
  with open(os.path.join(workdir, "runs.jsonl")) as f:
    cells = [json.loads(l) for l in f if l.strip()]
  stable = {}
  for d in sorted(os.listdir(workdir)):
    path = os.path.join(workdir, d, "result.json")
    if os.path.exists(path):
      with open(path) as f:
        r = json.load(f)
      stable[r["N_total"]] = r
  return cells, stable


def cost(kept, cells, stable) -> float:
  """Cell-seconds of the design: per size, its stable run to its largest kept budget's D
  (scaled from the run's own time) and its kept branches."""
  total = 0.0
  for N, run in stable.items():
    mine = [c for c in kept if c["N_total"] == N]
    if mine:
      D_max = max(c["D"] for c in cells if c["N_total"] == N)
      total += run["wall_s"] * max(c["D"] for c in mine) / D_max + sum(c["wall_s"] for c in mine)
  return total


def fitted(kept, resamples: int) -> str:
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    law = chinchax.fit({"N": [c["N_total"] for c in kept], "D": [c["D"] for c in kept],
                        "loss": [c["eval_loss"] for c in kept]}, bootstrap=resamples)
  a2, a3 = law.approaches["2"], law.approaches["3"]
  (lo2, hi2), (lo3, hi3) = a2["ci"]["a"], a3["ci"]["a"]
  held = ((law.doc.get("backtest") or {}).get("holdouts") or [{}])[0].get("approaches", {})
  miss = lambda k: f"{held[k]['N_error']:+.0%}" if "N_error" in held.get(k, {}) else "-"
  return (f"A2 a = {a2['a']:.3f} [{lo2:.3f}, {hi2:.3f}] ({hi2 - lo2:.3f} wide)   "
          f"A3 a = {a3['a']:.3f} [{lo3:.3f}, {hi3:.3f}]   apart {abs(a2['a'] - a3['a']):.3f}   "
          f"backtest N* miss A2 {miss('2')}, A3 {miss('3')}")


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("workdir", help="a finished smoke sweep (runs.jsonl, one folder per size)")
  p.add_argument("--resamples", type=int, default=400)
  args = p.parse_args()
  cells, stable = load(args.workdir)
  sizes = sorted(stable)
  budgets = sorted({c["budget"] for c in cells})
  top = budgets[-1]
  at_top = sorted(c["N_total"] for c in cells if c["budget"] == top)
  designs = [
      ("as run", lambda c: True),
      (f"the largest budget without its largest size", lambda c: not (
          c["budget"] == top and c["N_total"] == at_top[-1])),
      (f"the largest budget without its smallest size", lambda c: not (
          c["budget"] == top and c["N_total"] == at_top[0])),
      (f"the largest budget's middle 3 sizes", lambda c: not (
          c["budget"] == top and c["N_total"] in (at_top[0], at_top[-1]))),
      (f"without the largest budget ({top:.2g})", lambda c: c["budget"] != top),
  ] + [(f"without the budget {b:.2g} (5 budgets, still {top / budgets[0]:.0f}x)",
        lambda c, b=b: c["budget"] != b) for b in budgets[1:-1]] + [
      # The cheapest single cut that keeps the range (the second-largest budget) with the
      # largest budget's cuts above: about 75% and 65% of the cell time.
      (f"without the budget {budgets[-2]:.2g}, the largest without its largest size",
       lambda c: c["budget"] != budgets[-2] and not (
           c["budget"] == top and c["N_total"] == at_top[-1])),
      (f"without the budget {budgets[-2]:.2g}, the largest's middle 3 sizes",
       lambda c: c["budget"] != budgets[-2] and not (
           c["budget"] == top and c["N_total"] in (at_top[0], at_top[-1]))),
  ]
  full = cost(cells, cells, stable)
  print(f"{args.workdir}: {len(cells)} cells of {len(sizes)} sizes at {len(budgets)} budgets "
        f"({budgets[0]:.2g}-{top:.2g}), {full:.1f} cell-seconds as run")
  for name, keep in designs:
    kept = [c for c in cells if keep(c)]
    c = cost(kept, cells, stable)
    print(f"  {name}: {len(kept)} cells, {c:.1f} cell-s ({c / full:.0%})")
    print(f"    {fitted(kept, args.resamples)}")


if __name__ == "__main__":
  main()
