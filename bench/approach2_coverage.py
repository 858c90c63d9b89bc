"""Coverage of Approach 2's intervals on synthetic truths outside the model family.

For each truth of tests/helpers/truths.py (an undertraining term, a Kaplan-form law,
constant-LR runs without cooldown, a broken power law; heavy-tailed noise, 2 diverged runs
per sweep) and each method, over `--sweeps` noise seeds: the true a, the mean and sd of the
estimate, the median width of the 90% interval, and how many intervals hold the truth.

    python bench/approach2_coverage.py --sweeps=100 --resamples=200 [--diverged=0] [--drift=2.2]
    python bench/approach2_coverage.py --truths=law:0.7/0.35 --methods=auto,vp --drift=2.2 \
        --diverged=0    # the law's own profiles: what the default's caution costs in the family
    python bench/approach2_coverage.py --methods=approach3 --sweeps=40 --resamples=100
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests.helpers import truths  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests.scaling import synthetic  # pylint: disable=g-import-not-at-top,wrong-import-position

import chinchax  # pylint: disable=g-import-not-at-top,wrong-import-position
from chinchax.errors import UserError  # pylint: disable=g-import-not-at-top
from chinchax.scaling.isoflop import fit as isoflop  # pylint: disable=g-import-not-at-top
from chinchax.scaling.isoflop import bootstrap as isoflop_bootstrap


def _truth(name: str) -> truths.Truth:
  """A truth of tests/helpers/truths.py, or `law:ALPHA/BETA`: the law E + A/N^alpha + B/D^beta
  itself (tests/scaling/synthetic.py), the family vp assumes."""
  if not name.startswith("law:"):
    return truths.TRUTHS[name]
  alpha, beta = (float(v) for v in name[len("law:"):].split("/"))
  p = synthetic.law(alpha, beta)
  return truths.Truth(name, lambda N, D: synthetic.loss(p, N, D))


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--sweeps", type=int, default=100)
  p.add_argument("--resamples", type=int, default=400)
  p.add_argument("--level", type=float, default=0.9)
  p.add_argument("--methods", default="auto,parabola,vp")
  p.add_argument("--truths", default=",".join(truths.TRUTHS),
                 help="names in tests/helpers/truths.py, or law:ALPHA/BETA for the law's own")
  p.add_argument("--sizes", type=int, default=9, help="sizes per budget")
  p.add_argument("--diverged", type=int, default=2, help="diverged runs per sweep")
  p.add_argument("--drift", type=float, default=0.3,
                 help="how far each budget's grid centre wanders in log N: past ln 6 = 1.79 "
                      "some budgets' lowest loss is at an end of their sizes")
  args = p.parse_args()
  q = [(1 - args.level) / 2, (1 + args.level) / 2]
  print(f"{args.sweeps} sweeps per row, {args.resamples} resamples, {args.level:.0%} intervals, "
        f"{args.diverged} diverged runs per sweep, drift {args.drift}, {args.sizes} sizes")
  print(f"{'truth':13s} {'method':9s} {'a_true':>7s} {'mean a':>7s} {'sd':>6s} "
        f"{'width':>6s} {'cover':>6s} {'used':>14s} {'s/sweep':>7s}")
  for name in args.truths.split(","):
    t = _truth(name)
    a_true = t.a()
    for method in args.methods.split(","):
      est, hit, width, used = [], 0, [], {}
      t0 = time.perf_counter()
      for seed in range(args.sweeps):
        runs = truths.sweep(t, args.sizes, seed=1000 + seed, n_diverged=args.diverged,
                            drift=args.drift)
        with warnings.catch_warnings():
          warnings.simplefilter("ignore")
          if method == "approach3":  # Approach 3's law and its pairs bootstrap, for comparison
            e = chinchax.fit(runs, approaches="3", bootstrap=args.resamples,
                             seed=seed).approaches["3"]
            a_hat, (lo, hi) = e["a"], e["ci"]["a"]
            warned = (e.get("lack_of_fit") or {}).get("fits") is False
            label = "warns" if warned else "silent"
          else:
            try:
              fit = isoflop.fit_isoflop(runs, method)
              boot = isoflop_bootstrap.bootstrap_isoflop(runs, args.resamples, seed=seed,
                                                         method=method)
            except UserError:  # as law.json: no estimate or no interval; counted as a miss
              used["refused"] = used.get("refused", 0) + 1
              continue
            a_hat, label = fit.a, fit.method
            lo, hi = np.quantile(boot["a"], q)
            lo, hi = min(lo, a_hat), max(hi, a_hat)  # as law.json's: holds its estimate
        est.append(a_hat)
        width.append(hi - lo)
        hit += lo <= a_true <= hi
        used[label] = used.get(label, 0) + 1
      dt = (time.perf_counter() - t0) / args.sweeps
      print(f"{name:13s} {method:9s} {a_true:7.4f} {np.mean(est):7.4f} {np.std(est):6.4f} "
            f"{np.median(width):6.4f} {hit:3d}/{args.sweeps:<3d} "
            f"{','.join(f'{k}:{v}' for k, v in used.items()):>14s} {dt:7.2f}", flush=True)


if __name__ == "__main__":
  main()
