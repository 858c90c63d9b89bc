"""The backtest every law carries (scaling.judgement.backtest) on a synthetic smoke-like sweep: the
headline it prints, its misses over seeds, and what it costs.

The sweep: the smoke config's budgets (5e10-1.5e12 FLOPs, 6 about 2x apart), five rungs of
its size ladder (10.1k-176k) nearest each budget's optimum, losses from the law Approach 3
gave on the smoke sweep (seed 0: E 0.82, A 11.9, B 447, alpha 0.271, beta 0.507) times
exp(noise · z), noise 0.0025 (the pilot's 0.0046 nats at loss 1.9).

  python -m bench.backtest_bench [--seeds 20] [--noise 0.0025] [--resamples 200]
"""

import argparse
import time

import numpy as np

import chinchax
from chinchax.scaling.judgement import backtest
from chinchax.scaling.judgement import caveats
from chinchax.sweeps.configs import smoke

LAW = (0.82, 11.9, 447.0, 0.271, 0.507)


def sweep(noise: float, seed: int) -> dict:
  E, A, B, alpha, beta = LAW
  rng = np.random.default_rng(seed)
  G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
  ladder = np.array(smoke.LADDER, np.float64)
  N, C = [], []
  for c in smoke.BUDGETS:
    N_opt = G * (c / 6) ** (beta / (alpha + beta))
    near = np.sort(ladder[np.argsort(np.abs(np.log(ladder / N_opt)))[:5]])
    N += near.tolist()
    C += [c] * 5
  N, C = np.array(N), np.array(C)
  D = C / (6 * N)
  loss = (E + A / N**alpha + B / D**beta) * np.exp(noise * rng.standard_normal(len(N)))
  return {"N": N, "D": D, "loss": loss, "budget": C}


def _timed(runs, resamples, with_backtest: bool) -> float:
  keep = backtest.backtest
  if not with_backtest:
    backtest.backtest = lambda *a, **k: None
  try:
    t0 = time.perf_counter()
    chinchax.fit(runs, bootstrap=resamples)
    return time.perf_counter() - t0
  finally:
    backtest.backtest = keep


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--seeds", type=int, default=20)
  p.add_argument("--noise", type=float, default=0.0025)
  p.add_argument("--resamples", type=int, default=200)
  args = p.parse_args()
  law = chinchax.fit(sweep(args.noise, 0), bootstrap=args.resamples)
  print("seed 0's headline:")
  print("\n".join(f"  {l}" for l in caveats.headline(law.doc)))
  rows = {k: [] for k in ("2", "3", "loss3", "sd", "2x2", "2x3")}
  for seed in range(args.seeds):
    bt = chinchax.fit(sweep(args.noise, seed), bootstrap=0).doc["backtest"]
    one, two = bt["holdouts"]
    rows["2"].append(abs(one["approaches"]["2"]["N_error"]))
    rows["3"].append(abs(one["approaches"]["3"]["N_error"]))
    rows["loss3"].append(abs(one["approaches"]["3"]["loss_error"]))
    rows["sd"].append(one["reference"]["N_rel_sd"] or np.nan)
    rows["2x2"].append(abs(two["approaches"]["2"]["N_error"]))
    rows["2x3"].append(abs(two["approaches"]["3"]["N_error"]))
  med = {k: float(np.nanmedian(v)) for k, v in rows.items()}
  print(f"{args.seeds} seeds, median |miss| predicting 1.5e12 without it: Approach 2 N* "
        f"{med['2']:.1%}, Approach 3 N* {med['3']:.1%}, loss {med['loss3']:.2%}; the held-out "
        f"budget's own N* sd {med['sd']:.1%}; without the largest two: Approach 2 "
        f"{med['2x2']:.1%}, Approach 3 {med['2x3']:.1%}")
  runs = sweep(args.noise, 0)
  for resamples in (0, args.resamples):
    t = {True: [], False: []}
    for _ in range(3):  # alternated, best of three: the host is shared
      for on in (True, False):
        t[on].append(_timed(runs, resamples, on))
    print(f"fit time, {resamples} resamples, best of 3: {min(t[True]):.2f} s with the "
          f"backtest, {min(t[False]):.2f} s without (same process, shared host)")


if __name__ == "__main__":
  main()
