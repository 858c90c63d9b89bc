"""The smoke sweep's pilot: every (size, budget) cell trained, as cosine runs or WSD branches.

    python bench/smoke_pilot.py --budgets=3e10,1e11,3e11,1e12 --sizes=8e3,1.1e4,... \\
        [--schedule=cosine|wsd] [--seq-len=64] [--batch=32] [--seed=0] [--lr=X] [--workdir=DIR]
        [--compare=OTHER_WORKDIR] [--report-only]

Cells come from the smoke config (`sweeps/configs/smoke.py`: its model, data, LR and warmup
recipe) with the sizes given for every budget and a fixed batch of `--batch` x `--seq-len`
tokens, so that one size has one shape and one batch at every budget. All cells train in this
process (one compile per shape, `sweeps.train.step`). `--schedule=cosine`: one run per cell, as the
sweep runs them. `--schedule=wsd`: per size one warmup-stable-decay run (`sweeps.wsd`) with a
cooldown branch at each budget's D = C / (6N) (decay over the last 20% of the branch; the
warmup of the size's shortest cell), the IsoFLOP design's WSD variant.

Prints the eval loss of every cell (sizes x budgets), each budget's minimum (a parabola in
log N through the lowest point and its neighbours) and whether it lies strictly inside the
sizes, the tokens and 6ND FLOPs trained and the wall time per size; with `--compare` the
loss differences against another pilot's cells (e.g. WSD minus cosine). Results land in
WORKDIR/pilot.json.
"""

import argparse
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # pylint: disable=wrong-import-position

from chinchax.sweeps import grid, wsd  # pylint: disable=wrong-import-position
from chinchax.sweeps.configs import smoke  # pylint: disable=wrong-import-position
from chinchax.sweeps.train import loop  # pylint: disable=wrong-import-position


def sweep_config(args):
  c = smoke.get_config()
  c.budgets = tuple(float(x) for x in args.budgets.split(","))
  per_budget = [tuple(float(x) for x in part.split(",")) for part in args.sizes.split(";")]
  c.sizes = per_budget[0] if len(per_budget) == 1 else tuple(per_budget)
  c.train.seq_len = args.seq_len
  c.train.seed = args.seed
  c.recipe.batch_rule, c.recipe.batch_tokens = "fixed", args.batch * args.seq_len
  c.min_steps = args.min_steps
  if args.lr:
    c.recipe.lr_rule, c.recipe.peak_lr = "fixed", args.lr
  return c


def run_cosine(cells, c, workdir):
  out = {}
  for cell in cells:
    t = time.time()
    r = loop.train(cell.train_config(c), os.path.join(workdir, cell.name), quiet=True)
    out[cell.name] = {"N": cell.N, "C": cell.budget, "D": cell.D, "loss": r["eval_loss"],
                      "tokens": cell.D, "wall": time.time() - t, "time_s": r.get("time_s")}
    print(f"  {cell.name}: {r['eval_loss']:.4f} ({time.time() - t:.1f} s)", flush=True)
  return out


def run_wsd(cells, c, workdir, decay_fraction=0.2):
  out = {}
  for N in sorted({cell.N for cell in cells}):
    group = sorted((x for x in cells if x.N == N), key=lambda x: x.D)
    cfg = group[-1].train_config(c)
    with cfg.unlocked():
      cfg.name = f"N{N}-wsd"
      cfg.optimizer.warmup_steps = group[0].warmup_steps
      cfg.wsd.branches = tuple(x.D for x in group)
      cfg.wsd.decay_fraction = decay_fraction
    t = time.time()
    res = wsd.train_wsd(cfg, os.path.join(workdir, cfg.name), quiet=True)
    wall = time.time() - t
    plan = wsd.plan(cfg.wsd.branches, decay_fraction, cfg.batch_size * cfg.seq_len,
                    cfg.optimizer.warmup_steps)
    tokens = wsd.trained_steps(plan) * (
        cfg.batch_size * cfg.seq_len)
    for cell, rec in zip(group, res.branches):
      out[cell.name] = {"N": cell.N, "C": cell.budget, "D": cell.D, "loss": rec["eval_loss"],
                        "tokens": tokens / len(group), "wall": wall / len(group)}
    print(f"  N={N:,}: " + ", ".join(f"{r['eval_loss']:.4f}" for r in res.branches)
          + f" ({wall:.1f} s)", flush=True)
  return out


def minimum(Ns, losses):
  """log N* of a parabola in log N through the lowest point and its two neighbours."""
  i = int(np.argmin(losses))
  lo, hi = max(0, i - 1), min(len(Ns), i + 2)
  if hi - lo < 3:
    return None
  a, b, _ = np.polyfit(np.log(Ns[lo:hi]), losses[lo:hi], 2)
  return math.exp(-b / (2 * a)) if a > 0 else None


def report(res, other=None):
  Ns = sorted({r["N"] for r in res.values()})
  Cs = sorted({r["C"] for r in res.values()})
  at = {(r["N"], r["C"]): r for r in res.values()}
  print("eval loss (nats/token); rows N, columns C" + (" | minus the compared pilot" if other
                                                       else ""))
  print(f"{'N':>9} " + " ".join(f"{C:>9.3g}" for C in Cs))
  for N in Ns:
    cells = [at.get((N, C)) for C in Cs]
    print(f"{N:>9,} " + " ".join(f"{x['loss']:>9.4f}" if x else f"{'':>9}" for x in cells))
  for C in Cs:
    pts = sorted((N, at[(N, C)]["loss"]) for N in Ns if (N, C) in at)
    n_star = minimum(np.array([p[0] for p in pts], float), np.array([p[1] for p in pts]))
    inside = n_star is not None and pts[0][0] < n_star < pts[-1][0]
    best = min(pts, key=lambda p: p[1])
    print(f"C={C:.3g}: lowest {best[1]:.4f} at N={best[0]:,}; parabola N*="
          f"{'n/a' if n_star is None else f'{n_star:.3g}'} "
          f"({'inside' if inside else 'NOT inside'} {pts[0][0]:,}-{pts[-1][0]:,})")
  tokens = sum(r["tokens"] for r in res.values())
  flops = sum(6 * r["N"] * r["tokens"] for r in res.values())
  wall = sum(r["wall"] for r in res.values())
  print(f"trained {tokens:.3g} tokens, {flops:.3g} FLOPs (6ND), {wall:.0f} s of runs")
  if other:
    print("loss difference (this - compared), per cell:")
    diffs = []
    for N in Ns:
      row = []
      for C in Cs:
        name = next((k for k, r in res.items() if (r["N"], r["C"]) == (N, C)), None)
        if name in other:
          d = res[name]["loss"] - other[name]["loss"]
          diffs.append(d)
          row.append(f"{d:>+9.4f}")
        else:
          row.append(f"{'':>9}")
      print(f"{N:>9,} " + " ".join(row))
    o_tokens = sum(r["tokens"] for r in other.values())
    o_wall = sum(r["wall"] for r in other.values())
    print(f"mean {np.mean(diffs):+.4f}, mean |d| {np.mean(np.abs(diffs)):.4f}, max |d| "
          f"{np.max(np.abs(diffs)):.4f}; tokens {tokens / o_tokens:.2f}x, wall "
          f"{wall / o_wall:.2f}x the compared pilot's")


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--budgets", required=True)
  p.add_argument("--sizes", required=True,
                 help="N targets for every budget, or one list per budget separated by ';'")
  p.add_argument("--schedule", default="cosine", choices=("cosine", "wsd"))
  p.add_argument("--seq-len", type=int, default=64)
  p.add_argument("--batch", type=int, default=32, help="sequences per batch (fixed)")
  p.add_argument("--min-steps", type=int, default=50)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--lr", type=float, default=0.0, help="one peak LR for every cell (default: "
                 "the config's LR recipe)")
  p.add_argument("--workdir", default="/tmp/chinchax-smoke-pilot")
  p.add_argument("--compare", default="", help="another pilot's workdir")
  p.add_argument("--report-only", action="store_true", help="reprint WORKDIR/pilot.json")
  args = p.parse_args()
  other = None
  if args.compare:
    with open(os.path.join(args.compare, "pilot.json")) as f:
      other = json.load(f)["cells"]
  if args.report_only:
    with open(os.path.join(args.workdir, "pilot.json")) as f:
      report(json.load(f)["cells"], other)
    return
  c = sweep_config(args)
  cells, refusals = grid.make_grid(c)
  for r in refusals:
    print(r)
  print(f"{len(cells)} cells, {len({x.N for x in cells})} shapes, {args.schedule}")
  os.makedirs(args.workdir, exist_ok=True)
  t = time.time()
  res = (run_cosine if args.schedule == "cosine" else run_wsd)(cells, c, args.workdir)
  print(f"pilot wall time {time.time() - t:.0f} s (load average {os.getloadavg()[0]:.1f})")
  with open(os.path.join(args.workdir, "pilot.json"), "w") as f:
    json.dump({"args": vars(args), "cells": res}, f, indent=1)
  report(res, other)


if __name__ == "__main__":
  main()
