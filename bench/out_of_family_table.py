"""Each estimator on one sweep of each synthetic truth outside the model family: the true a,
then every method's estimate of a with its 90% interval (and whether a warning says the
method does not fit). Approach 3 comes from `chinchax.fit`.

    python bench/out_of_family_table.py [--seed=0] [--diverged=2] [--resamples=400]
"""

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests.helpers import truths  # pylint: disable=g-import-not-at-top,wrong-import-position

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import chinchax  # pylint: disable=g-import-not-at-top,wrong-import-position
from chinchax.scaling.isoflop import budgets as isoflop_budgets  # pylint: disable=g-import-not-at-top,wrong-import-position
from chinchax.scaling.runs.table import budget_groups  # pylint: disable=g-import-not-at-top,wrong-import-position

METHODS = ("auto", "local", "vp", "parabola")


def unchecked(runs, method: str) -> float:
  """a of `method` as it stands: every budget, no check, no fallback."""
  bud, _ = isoflop_budgets.screen(runs, budget_groups(runs), runs.loss)
  est = isoflop_budgets.estimate(bud, runs.loss[bud.idx_n][None], method)
  return float(isoflop_budgets.power_laws(bud, est.log_N_star_RxK, np.ones(len(bud.C_K),
                                                                           bool))[0][0])


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--diverged", type=int, default=2)
  p.add_argument("--resamples", type=int, default=400)
  args = p.parse_args()
  print(f"seed {args.seed}, {args.diverged} diverged runs, {args.resamples} resamples, 90% "
        "intervals; [used method], * = warns that its model does not fit")
  for name, t in truths.TRUTHS.items():
    runs = truths.sweep(t, seed=args.seed, n_diverged=args.diverged)
    arrays = {"N": runs.N, "D": runs.D, "loss": runs.loss, "budget": runs.budget}
    cells = []
    for method in METHODS:
      with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        law = chinchax.fit(arrays, approaches="2" if method != "auto" else "2,3",
                           bootstrap=args.resamples, approach2_method=method)
      for k in (("2", "3") if method == "auto" else ("2",)):
        e = law.approaches[k]
        lo, hi = e["ci"]["a"]
        flag = "*" if any("does not fit these runs" in w for w in e["warnings"]) else " "
        label = f"A2 {method}" if k == "2" else "A3"
        used = f"[{e['method']}]" if k == "2" else ""
        lof = e.get("lack_of_fit") or {}
        ratio = f", residuals {lof['ratio']:.1f}x noise" if lof.get("ratio") else ""
        cells.append(f"{label} {used} {e['a']:.4f} [{lo:.4f}, {hi:.4f}]{flag}{ratio}")
    cells.append(f"unchecked: vp {unchecked(runs, 'vp'):.4f}, parabola "
                 f"{unchecked(runs, 'parabola'):.4f}")
    print(f"{name:12s} a_true {t.a():.4f}\n  " + "\n  ".join(cells), flush=True)


if __name__ == "__main__":
  main()
