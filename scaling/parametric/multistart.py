"""The reference path of Approach 3: every one of the paper's 4,500 starts to a local minimum.

Hoffmann et al. ran L-BFGS from each start of a grid (`paper_grid`). Here every start is
carried to a local minimum of the Huber objective (`scaling.parametric.huber`) by a homotopy, all
starts at once:

1. least squares (delta = inf: smooth, so far starts reach a basin in few steps) on a fixed
   subsample of 48 points, then
2. the objective itself on all points, from the distinct end points of stage 1,

each stage by the batched trust-region Newton of `scaling.parametric.huber`; starts that meet are
merged and go on as one. Its best objective is the minimum a plain L-BFGS-B loop over the
same starts finds (`bench/fit_bench.py`), and the variable-projection fit (`scaling.parametric.vp`) is
tested against it.
"""

import dataclasses

import numpy as np

from chinchax.scaling.parametric import huber

STAGE1_POINTS = 48  # points (a fixed random subsample) in stage 1 of the homotopy.


def paper_grid() -> np.ndarray:
  """The 4,500 starts of Hoffmann et al.: (4500, 5) in (a, b, e, alpha, beta) order."""
  a = b = np.arange(0.0, 25.0 + 1e-9, 5.0)
  e = np.arange(-1.0, 1.0 + 1e-9, 0.5)
  alpha = beta = np.arange(0.0, 2.0 + 1e-9, 0.5)
  grid = np.meshgrid(a, b, e, alpha, beta, indexing="ij")
  return np.stack([g.ravel() for g in grid], axis=1)


def local_minima(pb: huber.Problem, starts_Sx5: np.ndarray, w: np.ndarray):
  """Carry every (centred) start to a local minimum: (theta, F, converged) per start.

  Stage 1 is least squares on a fixed subsample of the points: smooth, so far-away starts
  reach a basin in few cheap steps, and the thousands of starts collapse onto a few
  distinct points. Stage 2 minimises the objective itself on all points from each of those.
  """
  n = len(pb.x)
  sub = np.arange(n)
  if n > STAGE1_POINTS:
    sub = np.sort(np.random.default_rng(0).choice(n, STAGE1_POINTS, replace=False))
  pb1 = dataclasses.replace(pb, x=pb.x[sub], y=pb.y[sub], l=pb.l[sub],
                            moments=pb.moments[sub], delta=np.inf)
  th1, _, _ = huber.on_all_cores(lambda th: huber.minimize_batched(
      pb1, th, w[None, sub], max_iter=150, xtol=1e-5, merge_tol=1e-3, stall_rtol=1e-6),
                                 starts_Sx5)
  _, first, inverse = np.unique(np.round(th1 / 3e-2), axis=0, return_index=True,
                                return_inverse=True)
  th2, f2, conv2 = huber.on_all_cores(lambda th: huber.minimize_batched(pb, th, w[None]),
                                      th1[first])
  inverse = inverse.ravel()
  return th2[inverse], f2[inverse], conv2[inverse]
