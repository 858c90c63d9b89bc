"""The two-stage data-constrained fit on synthetic truths: recovery, coverage, one-sided
intervals and time.

Design like Muennighoff et al.'s 2023 study (tests/helpers/synthetic_law.muennighoff_design):
7 sizes 10M-3B trained for 1-64 epochs of 3 unique pools (1e8, 1e9, 1e10 tokens) plus
single-epoch runs at 20-1000 tokens per parameter, 189 runs; loss from Muennighoff et al.'s
law on a base law (Hoffmann et al.'s, or another with 70 tokens/param at 1e9) times
exp(noise · z). For each truth (R_D*, R_N*; inf: no excess-parameter penalty) and seed it
fits both stages inside one bootstrap and prints the statements; then the share of seeds
whose interval holds the truth, and how often an infinite R_N* is stated one-sided.

  python -m bench.dc_fit_bench [--seeds 10] [--resamples 200] [--noise 0.005] [--time 1000]
"""

import argparse
import time

import numpy as np

from chinchax.scaling.constrained import two_stage as dc_two_stage
from tests.helpers import synthetic_law as syn

TRUTHS = ((syn.HOFFMANN, 15.4, 5.3), ((2.1, 500.0, 800.0, 0.36, 0.30), 4.0, 20.0),
          (syn.HOFFMANN, 15.4, np.inf))


def _holds(truth, pair) -> bool:
  lo, hi = pair
  return (lo is None or lo <= truth) and (hi is None or truth <= hi)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--seeds", type=int, default=10)
  p.add_argument("--resamples", type=int, default=200)
  p.add_argument("--noise", type=float, default=0.005)
  p.add_argument("--time", type=int, default=1000, help="resamples of the timed fit (0: none)")
  args = p.parse_args()
  for theta, R_D, R_N in TRUTHS:
    held = {"R_D_star": 0, "R_N_star": 0}
    one_sided = 0
    print(f"truth R_D* = {R_D}, R_N* = {R_N}, base {theta}:")
    for seed in range(args.seeds):
      runs = syn.muennighoff_design(R_D, R_N, noise=args.noise, seed=seed, theta=theta)
      out = dc_two_stage.fit(runs["N"], runs["D"], runs["U"], runs["loss"],
                             n_resamples=args.resamples, seed=seed)
      for name, truth in (("R_D_star", R_D), ("R_N_star", R_N)):
        held[name] += _holds(truth, out["ci"][name])
      one_sided += out["R_N_star"] is None
      print(f"  seed {seed}: {out['statements']['R_D_star']}; {out['statements']['R_N_star']}"
            f" (base runs {out['base_runs']})")
    print(f"  {args.seeds} seeds, {100 * 0.9:.0f}% intervals: R_D* held {held['R_D_star']}, "
          f"R_N* held {held['R_N_star']}; R_N* stated one-sided in {one_sided}")
  if args.time:
    runs = syn.muennighoff_design(15.4, 5.3, noise=args.noise, seed=0)
    t0 = time.perf_counter()
    dc_two_stage.fit(runs["N"], runs["D"], runs["U"], runs["loss"], n_resamples=args.time)
    print(f"time: both stages, {args.time} resamples, 189 runs: "
          f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
  main()
