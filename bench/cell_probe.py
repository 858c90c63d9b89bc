"""One cell of the smoke sweep trained at several peak LRs, final LR ratios and seeds.

    python bench/cell_probe.py --C=1.5e11 --N=2.24e4 [--lr=1e-2,2e-2] [--final=0.1,0] [--seeds=3]

The cell is the smoke config's (`sweeps/configs/smoke.py`: its shape recipe, batch, warmup
and LR line), trained as one cosine run of its own; `--lr` replaces the LR line's value with
fixed values, `--final` the ratio the schedule decays to. Prints each run's eval loss, then
per setting the mean and the standard deviation over seeds: the pilot figures of the smoke's
docstring (the seed-to-seed spread that cooling down to zero removes, and the LR each size
prefers) come from here.
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # pylint: disable=wrong-import-position

from chinchax.sweeps import grid  # pylint: disable=wrong-import-position
from chinchax.sweeps.configs import smoke  # pylint: disable=wrong-import-position
from chinchax.sweeps.train import loop  # pylint: disable=wrong-import-position


def floats(text: str) -> list[float]:
  return [float(x) for x in text.split(",") if x.strip()]


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--C", type=float, required=True, help="the cell's budget (6ND FLOPs)")
  p.add_argument("--N", type=float, required=True, help="the cell's target size")
  p.add_argument("--lr", default="", help="fixed peak LRs, comma-separated (default: the line)")
  p.add_argument("--final", default="", help="final LR ratios (default: the config's)")
  p.add_argument("--seeds", type=int, default=1)
  a = p.parse_args()
  c = smoke.get_config()
  c.schedule, c.budgets, c.sizes = "cosine", (a.C,), (a.N,)
  print(f"load average {os.getloadavg()[0]:.1f}")
  for lr in floats(a.lr) or [None]:
    for final in floats(a.final) or [None]:
      if lr:
        c.recipe.lr_rule, c.recipe.peak_lr = "fixed", lr
      (cell,), _ = grid.make_grid(c)
      losses = []
      for seed in range(a.seeds):
        c.train.seed = seed
        cfg = cell.train_config(c)
        if final is not None:
          with cfg.unlocked():
            cfg.optimizer.final_lr_ratio = final
        t = time.time()
        with tempfile.TemporaryDirectory() as workdir:
          r = loop.train(cfg, workdir, quiet=True)
        losses.append(r["eval_loss"])
        print(f"  {cell.name} lr {cfg.optimizer.peak_lr:.3g} final {cfg.optimizer.final_lr_ratio:g} "
              f"seed {seed}: {r['eval_loss']:.4f} ({r['steps']} steps, {time.time() - t:.1f} s)",
              flush=True)
      sd = f", sd {np.std(losses, ddof=1):.4f}" if len(losses) > 1 else ""
      print(f"{cell.name} lr {cfg.optimizer.peak_lr:.3g} final {cfg.optimizer.final_lr_ratio:g}: "
            f"mean {np.mean(losses):.4f} over {len(losses)} seeds{sd}", flush=True)


if __name__ == "__main__":
  main()
