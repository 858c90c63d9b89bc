"""Coverage of fit-hparams' bootstrap intervals on synthetic grids with a known truth.

    python bench/hparams_coverage.py [--replicates=200] [--bootstrap=200] [--ci=0.9]

Each replicate is a fresh noisy LR x batch grid (tests/scaling/hparams_synthetic.py: 9 (N, D)
points, 7 LRs x 5 batches each, StepLaw's η* = 1.79·N^-0.713·D^0.307 and B* = 0.58·D^0.571 as
the truth, loss noise sd 0.003 nats) fitted with its own bootstrap. Prints, per surface, the
fraction of replicates whose interval holds the true value of each coefficient and exponent,
with its binomial standard error, and the median interval width:

* quadratic: L = L* + 0.04·(ln η/η*)² + 0.02·(ln B/B*)²;
* skewed: the LR term steeper above the optimum (+0.04·u³ for u = ln η/η* > 0) and runs
  beyond 5x the optimal LR diverged (nan), as real surfaces are.
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # pylint: disable=wrong-import-position

from chinchax.scaling.hparams import fit as hparams_fit  # pylint: disable=wrong-import-position
from tests.scaling import hparams_synthetic as S  # pylint: disable=wrong-import-position

SURFACES = {"quadratic": {}, "skewed": {"skew": 1.0, "diverge_at": 1.6}}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--replicates", type=int, default=200)
  p.add_argument("--bootstrap", type=int, default=200)
  p.add_argument("--ci", type=float, default=0.9)
  a = p.parse_args()
  for name, kw in SURFACES.items():
    t0 = time.time()
    hits, widths = {}, {}
    for i in range(a.replicates):
      doc = hparams_fit.fit(S.runs(np.random.default_rng(1000 + i), **kw),
                            bootstrap=a.bootstrap, ci=a.ci, seed=i)
      for which in ("lr", "batch"):
        for var, truth in S.TRUTH[which].items():
          lo, hi = doc[which]["ci"][var]
          hits.setdefault((which, var), []).append(lo <= truth <= hi)
          widths.setdefault((which, var), []).append(hi - lo)
    print(f"{name} surface, {a.replicates} replicates x {a.bootstrap} resamples, "
          f"{a.ci:.0%} intervals ({time.time() - t0:.0f} s):")
    for (which, var), h in hits.items():
      cov = float(np.mean(h))
      se = (cov * (1 - cov) / len(h))**0.5
      print(f"  {which:<5} {var:<5} coverage {cov:.3f} ± {se:.3f}   median width "
            f"{np.median(widths[(which, var)]):.3g}")


if __name__ == "__main__":
  main()
