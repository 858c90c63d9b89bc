"""Percentile intervals of bootstrap draws: the one place an interval level is checked and a
[lo, hi] is read from draws.

An interval at level q is [quantile (1 − q)/2, quantile (1 + q)/2] of the draws (numpy's
default linear interpolation). Every fit that reports an interval reads it here: law.json's
approaches and tables (`scaling.law.build`), a loaded law's bands at any level
(`scaling.law.artifact`), the hyperparameter laws (`scaling.hparams.law`)."""

import numpy as np

from chinchax.errors import UserError


def check_level(level, name: str = "ci") -> float:
  """`level` as a float strictly between 0 and 1; a UserError naming `name` otherwise."""
  if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not (
      0 < level < 1):
    raise UserError(f"{name} must be a level strictly between 0 and 1 (e.g. 0.9), "
                    f"got {level!r}")
  return float(level)


def quantiles(values_S, level: float, axis=None) -> np.ndarray:
  """[lo, hi] of the draws at `level` (along `axis`: an array of shape (2, ...))."""
  return np.quantile(np.asarray(values_S, np.float64), [(1 - level) / 2, (1 + level) / 2],
                     axis=axis)


def interval(values_S, level: float) -> list[float]:
  """[lo, hi] of the draws at `level`, as plain floats (what law.json stores)."""
  lo, hi = quantiles(values_S, level)
  return [float(lo), float(hi)]


def holding(pair: list[float], estimate) -> list[float]:
  """The interval widened, where it must be, to hold its point estimate: the percentile
  interval of a bootstrap whose draws are shifted from the estimate (a biased estimator on
  this design) can miss it, and an interval that excludes its own estimate is no interval
  of it."""
  if estimate is None or not np.isfinite(estimate):
    return pair
  return [min(pair[0], float(estimate)), max(pair[1], float(estimate))]


def with_reflection(values_S, estimate: float, level: float) -> list[float]:
  """The percentile interval joined with the basic one (the percentile interval reflected
  about the estimate: [2·est - hi, 2·est - lo]). The percentile interval is right when the
  estimator's bias and skew are the draws' own; the basic one when they are mirrored, as
  where the estimate sits against a bound or on a ridge of the fit (the draws then lean
  away from the truth as the estimate does). When the fit cannot tell which, the union holds
  either."""
  lo, hi = interval(values_S, level)
  return [min(lo, 2 * estimate - hi), max(hi, 2 * estimate - lo)]
