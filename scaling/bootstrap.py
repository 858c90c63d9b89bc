"""Bootstrap of the Approach-3 fit: resample the runs with replacement and refit.

A resample of n points drawn with replacement is the same problem as the original points
with integer weights w ~ Multinomial(n, 1/n) (a point drawn k times counts k times in the
summed Huber objective), so every resample is one row of a weight matrix and all of them
are minimised together by the batched Newton of `scaling.huber`. Each resample starts
from the full-data fit (by default the variable-projection fit, `scaling.vp`) and from two
starts with the exponents scaled by 0.6 and 1.6 (in centred coordinates, so each term keeps
its value at the centre of the data), to catch a resample whose best basin moved; the best
of its starts is kept. The extra starts cost 3x the time and earn it: on small noisy sweeps
(12-40 points, noise 2-10%, one outlier) the full-data start alone misses the resample's
best minimum in 1-4% of resamples.

Percentile intervals of the returned columns (`scaling.intervals.law_intervals`) are the
fit's confidence intervals; the kind of bootstrap is `KIND`.
"""

import numpy as np

from chinchax.scaling import huber, parametric
from chinchax.errors import UserError

COLUMNS = ("E", "A", "B", "alpha", "beta")
KIND = "pairs"  # runs resampled with replacement
EXPONENT_SCALES = (1.0, 0.6, 1.6)


def bootstrap_parametric(N, D, loss, *, n_resamples=4000, seed=0,
                         delta=parametric.DEFAULT_DELTA,
                         fit: parametric.ParametricFit | None = None) -> np.ndarray:
  """(n_resamples, 5) refits, columns [E, A, B, alpha, beta]; deterministic given `seed`."""
  N, D, loss, _ = parametric.check_data(N, D, loss)
  if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or (
      n_resamples < 1):
    raise UserError(f"bootstrap: n_resamples must be a positive integer, got {n_resamples!r}")
  if fit is None:
    fit = parametric.fit_parametric(N, D, loss, delta=delta)
  elif fit.n_points != len(N) or fit.delta != delta:
    raise UserError(f"bootstrap: the given fit was made on {fit.n_points} points with "
                    f"delta={fit.delta}, not on these {len(N)} points with delta={delta}; "
                    "pass the fit of this data or none")
  n = len(N)
  rng = np.random.default_rng(seed)
  counts_Rxn = rng.multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype(np.float64)
  return refit(N, D, loss, counts_Rxn, fit, delta)


def refit(N, D, loss, counts_Rxn: np.ndarray, fit: parametric.ParametricFit,
          delta: float) -> np.ndarray:
  """(R, 5) laws [E, A, B, alpha, beta], one per row of run counts (a resample), each the best
  of the starts `EXPONENT_SCALES` around `fit`, all minimised in one batch."""
  N, D, loss = (np.asarray(x, np.float64) for x in (N, D, loss))
  R, k = len(counts_Rxn), len(EXPONENT_SCALES)
  pb = huber.Problem.make(np.log(N), np.log(D), np.log(loss), delta)
  center = pb.to_centered(fit.log_theta()[None])[0]
  starts_kx5 = np.repeat(center[None], k, axis=0)
  starts_kx5[:, 3:] *= np.asarray(EXPONENT_SCALES)[:, None]
  th_Sx5, F_S, _ = huber.minimize_batched(
      pb, np.tile(starts_kx5, (R, 1)), np.repeat(counts_Rxn, k, axis=0),
      group_S=np.repeat(np.arange(R), k))
  best = np.argmin(F_S.reshape(R, k), axis=1)
  th_Rx5 = pb.from_centered(th_Sx5.reshape(R, k, 5)[np.arange(R), best])
  a, b, e, alpha, beta = th_Rx5.T
  with np.errstate(over="ignore"):  # a runaway refit overflows to inf: law.json drops it
    return np.stack([np.exp(e), np.exp(a), np.exp(b), alpha, beta], axis=1)
