"""Coverage of the default fit on designs that are not IsoFLOP grids: ladders and checkpoints
along D, from truths in and out of the law's family.

For each design and truth, over `--draws` noise seeds (0.5% multiplicative noise): the
default fit (`chinchax.fit`, every approach the design supports, `--resamples` bootstrap
draws), which approach it recommends, whether that approach's 90% interval of a holds the
true a, the median width of that interval, whether the recommended law predicts losses, how
many laws are the nesting form (the runs rejected the law's form: "nested"), and how many
fits warned that the checkpoints bend as a schedule does ("bent").
The true a is computed with no estimator: each truth's loss minimised numerically along
C = 6ND at the design's smallest and largest C (tests/helpers/truths.py `a_true`).

    python bench/design_coverage.py --draws=100 --resamples=200
    python bench/design_coverage.py --designs=ladder --truths=chinchilla --draws=20
    python bench/design_coverage.py --model-noise=0.01   # each model off the law by its own 1%
    python bench/design_coverage.py --designs=checkpoints --truths=cosine,constant_lr

Truths (tests/helpers/truths.py): "chinchilla" (the law's own family), "kaplan" (Kaplan et
al.'s form, no irreducible term), "constant_lr" (a run that never cools down: its loss is
above the law by 0.02 ln(1 + D/20N); along D, the checkpoints of a WSD run's stable phase),
"undertrained", "broken"; and checkpoints of one run per size whose schedule ends at the
model's last checkpoint (tests/helpers/truths.py SCHEDULES: "cosine", "linear" decay,
"cosine_by_N" whose excess is mildly larger for small models, "wsd" whose stable phase's
excess decays over the last fifth of each run), above the law of runs trained
to each D until the run's end. "checkpoints_ends" runs each model to its own token multiple
(80 down to 20 tokens per parameter): each checkpoint's place f is in its own model's run;
"checkpoints_one_D" runs every model to one D, as Pythia's suite does.
Columns "sched": fits that fitted the law beneath the schedule (`parametric.schedule`),
"beneath": fits whose law it is (the checkpoints bent as a schedule bends them).
"""

import argparse
import collections
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests.helpers import truths  # pylint: disable=g-import-not-at-top,wrong-import-position

import chinchax  # pylint: disable=g-import-not-at-top,wrong-import-position
from chinchax.errors import UserError  # pylint: disable=g-import-not-at-top


def ladder(rng):
  """5 sizes x token multipliers 1, 2, 5, 10 of 20 tokens per parameter."""
  N, m = np.meshgrid(np.geomspace(1e8, 2e9, 5), np.array([1, 2, 5, 10]) * 20.0)
  del rng
  return N.ravel(), (N * m).ravel()


def checkpoints(rng):
  """8 models, each evaluated at 15 D from 1 to 40 tokens per parameter."""
  N, m = np.meshgrid(np.geomspace(5e7, 3e9, 8), np.geomspace(1, 40, 15))
  del rng
  return N.ravel(), (N * m).ravel()


def mix(rng):
  """An IsoFLOP grid (4 budgets x 5 sizes around Chinchilla's optimum) and a 4-size ladder
  at 2x and 8x its largest budget's sizes."""
  del rng
  N, D = [], []
  for C in np.logspace(18.5, 20, 4):
    n = np.geomspace(0.3, 3, 5) * np.sqrt(C / 6 / 20)
    N.append(n), D.append(C / 6 / n)
  n_l, m = np.meshgrid(np.geomspace(1e9, 3e9, 4), np.array([10, 20, 40]))
  N.append(n_l.ravel()), D.append((n_l * m).ravel())
  return np.concatenate(N), np.concatenate(D)


def checkpoints_ends(rng):
  """8 models as `checkpoints`, each run to its own multiple, 80 tokens per parameter for the
  smallest down to 20 for the largest, evaluated at 15 D from 1 to that multiple."""
  del rng
  N = np.geomspace(5e7, 3e9, 8)
  D = [n * np.geomspace(1, end, 15) for n, end in zip(N, np.geomspace(80, 20, 8))]
  return np.repeat(N, 15), np.concatenate(D)


def checkpoints_one_D(rng):
  """A Pythia-style suite: 8 models from 7e7 to 1.2e10 parameters, every one run to the same
  3e11 tokens (25 to 4,300 tokens per parameter), evaluated at 15 D from 2e9 to 3e11."""
  del rng
  N = np.geomspace(7e7, 1.2e10, 8)
  return np.repeat(N, 15), np.tile(np.geomspace(2e9, 3e11, 15), 8)


DESIGNS = {"ladder": ladder, "checkpoints": checkpoints, "mix": mix,
           "checkpoints_ends": checkpoints_ends, "checkpoints_one_D": checkpoints_one_D}

# The schedules' truths are checkpoints of one run per size, above the law of runs trained to
# each D until the run's end (tests/helpers/truths.py SCHEDULES): a is Chinchilla's.
TRUTHS = {"chinchilla": truths.chinchilla, **{k: t.loss for k, t in truths.TRUTHS.items()},
          **truths.SCHEDULES}
A_OF = {k: truths.chinchilla for k in truths.SCHEDULES}  # the law the runs stand for


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--draws", type=int, default=100)
  p.add_argument("--resamples", type=int, default=200)
  p.add_argument("--noise", type=float, default=0.005)
  p.add_argument("--model-noise", type=float, default=0.0,
                 help="each size off the law by this much (lognormal sd), shared by its runs")
  p.add_argument("--designs", default=",".join(DESIGNS))
  p.add_argument("--truths", default="chinchilla,kaplan,constant_lr")
  p.add_argument("--verbose", action="store_true", help="a line per draw as it ends")
  p.add_argument("--seeds", default=None,
                 help="only these draws (comma-separated seeds), e.g. to rerun the ones a "
                      "change touches; --draws is then their count")
  a = p.parse_args()
  if a.seeds:
    a.draws = len(a.seeds.split(","))
  print(f"{a.draws} draws per row, {a.resamples} resamples, noise {a.noise:.1%} per run"
        f"{f' and {a.model_noise:.1%} per size' if a.model_noise else ''}")
  print(f"{'design':<12} {'truth':<12} {'a true':>7} {'held':>6} {'width':>7} "
        f"{'loss law':>8} {'nested':>6} {'bent':>6} {'sched':>6} {'beneath':>7}  "
        "recommended    s/fit")
  for dname in a.designs.split(","):
    for tname in a.truths.split(","):
      loss = TRUTHS[tname]
      N, D = DESIGNS[dname](None)
      C = 6 * N * D
      a_true = truths.a_true(A_OF.get(tname, loss), [C.min(), C.max()])
      held, widths, predicts, recommended, t0 = 0, [], 0, collections.Counter(), time.time()
      nested = bent = sched = beneath = 0
      seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else range(a.draws)
      for i, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        sizes = np.unique(N, return_inverse=True)[1]
        offset = a.model_noise * rng.standard_normal(sizes.max() + 1)[sizes]
        L = loss(N, D) * np.exp(offset + a.noise * rng.standard_normal(len(N)))
        try:
          with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            law = chinchax.fit({"N": N, "D": D, "loss": L}, bootstrap=a.resamples, seed=seed)
        except UserError as e:
          recommended[f"refused: {str(e)[:30]}"] += 1
          continue
        k = law.recommended["approach"]
        recommended[k] += 1
        lo, hi = law.doc["approaches"][k]["ci"]["a"] if law.doc["approaches"][k].get(
            "ci") else (np.nan, np.nan)
        held += bool(lo <= a_true <= hi)
        widths.append(hi - lo)
        predicts += bool(law.predicts_loss)
        nested += "gamma" in law.doc["law"]
        bent += any(w.startswith("the checkpoints bend") for w in law.warnings)
        schedule = law.doc["approaches"].get("3", {}).get("schedule")
        sched += schedule is not None
        beneath += bool(schedule and schedule["adopted"])
        if a.verbose:
          print(f"  {dname} {tname} draw {seed}: Approach {k} [{lo:.3f}, {hi:.3f}] "
                f"held {held}/{i + 1}", flush=True)
      rec = ", ".join(f"{k}: {v}" for k, v in recommended.most_common())
      print(f"{dname:<12} {tname:<12} {a_true:7.4f} {held:>3}/{a.draws:<3} "
            f"{np.nanmedian(widths) if widths else np.nan:7.3f} {predicts:>4}/{a.draws:<3} "
            f"{nested:>6} {bent:>6} {sched:>6} {beneath:>7}  "
            f"{rec:<14} {(time.time() - t0) / a.draws:5.1f}")


if __name__ == "__main__":
  main()
