"""WSD cooldown branches against cosine runs of the same (N, D), on CPU.

    python bench/wsd_bench.py [--workdir /tmp/chinchax-wsd-bench] [--steps 60,120,240]
                              [--peak-lr 1e-2] [--decay-fraction 0.2]

One model size; for each D_i (given in steps of batch_size · seq_len tokens) a cosine run of
D_i tokens, and one WSD run (`sweeps.wsd`) with a cooldown branch at every D_i. Prints each
branch's eval loss next to the cosine run's, then the tokens, 6ND FLOPs and wall time each
approach spent: cosine sum_i D_i tokens; WSD max_i s_i + sum_i decay_i (`sweeps.wsd`).
Wall times include each run's compile (as a sweep pays it).
"""

import argparse
import os
import shutil
import time

from chinchax.scaling.runs import conventions
from chinchax.sweeps import wsd
from chinchax.sweeps.configs import train as train_configs
from chinchax.sweeps.train import loop


def base_config(args):
  c = train_configs.get_config("tiny")
  c.model.update(d_model=64, n_layers=2, n_heads=2, d_ff=192)
  c.seq_len, c.batch_size = 64, 16
  c.optimizer.peak_lr, c.optimizer.warmup_steps = args.peak_lr, 10
  c.eval_every, c.log_every, c.eval_tokens = 10**9, 20, 16384
  c.checkpoint.every_steps = 10**9
  return c


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--workdir", default="/tmp/chinchax-wsd-bench")
  p.add_argument("--steps", default="60,120,240")
  p.add_argument("--peak-lr", type=float, default=1e-2)
  p.add_argument("--decay-fraction", type=float, default=0.2)
  args = p.parse_args()
  shutil.rmtree(args.workdir, ignore_errors=True)
  c = base_config(args)
  tps = c.batch_size * c.seq_len
  Ds = [int(s) * tps for s in args.steps.split(",")]

  cosine, t_cos = {}, 0.0
  for D in Ds:
    r = c.copy_and_resolve_references()
    r.name, r.tokens = f"cos-D{D}", float(D)
    t0 = time.time()
    cosine[D] = loop.train(r, os.path.join(args.workdir, r.name), quiet=True)
    t_cos += time.time() - t0

  w = c.copy_and_resolve_references()
  w.name = "wsd"
  w.wsd.branches, w.wsd.decay_fraction = tuple(float(D) for D in Ds), args.decay_fraction
  t0 = time.time()
  out = wsd.train_wsd(w, os.path.join(args.workdir, "wsd"), quiet=True)
  t_wsd = time.time() - t0

  N = cosine[Ds[0]]["N_total"]
  fpt = conventions.flops_per_token(conventions.Shape(**cosine[Ds[0]]["shape"]), "6ND")
  plan = wsd.plan(Ds, args.decay_fraction, tps, c.optimizer.warmup_steps)
  print(f"N = {N:,} parameters, {tps} tokens/step, WSD decay fraction {args.decay_fraction}")
  print(f"{'D':>10} {'cosine loss':>12} {'WSD loss':>10} {'diff':>8}")
  for D, b in zip(Ds, out.branches):
    lc, lw = cosine[D]["eval_loss"], b["eval_loss"]
    print(f"{D:>10,} {lc:>12.4f} {lw:>10.4f} {lw - lc:>+8.4f}")
  tok_cos = sum(Ds)
  tok_wsd = wsd.trained_steps(plan) * tps
  print(f"{'':>10} {'tokens':>12} {'FLOPs 6ND':>10} {'wall s':>8}")
  print(f"{'cosine':>10} {tok_cos:>12,} {tok_cos * fpt:>10.3g} {t_cos:>8.1f}")
  print(f"{'WSD':>10} {tok_wsd:>12,} {tok_wsd * fpt:>10.3g} {t_wsd:>8.1f}")
  print(f"WSD / cosine compute: {tok_wsd / tok_cos:.2f}")


if __name__ == "__main__":
  main()
