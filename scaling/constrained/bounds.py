"""When do the runs bound a decay constant, and how to state it when they do not.

R_D* (R_N*) shapes the effective D' (N') only through x = D/U_D − 1 (N/U_N − 1) of the runs
that repeat data (exceed N*(U_D)): the fraction of the undecayed value kept is

    f(R, x) = (1 + R·(1 − exp(−x/R))) / (1 + x),

which tends to 1 as R → ∞ (no decay) and to 1/(1 + x) as R → 0 (repeats worth nothing).
Beyond `open_range`'s upper end no run's effective size is more than TOL from the no-decay
value, and below its lower end no run's is more than TOL of U from the worthless one: the
runs cannot tell R there from ∞ (from 0). A fit or a bootstrap refit that lands there is
read as ∞ (0), never as a number, and an interval with such an end is one-sided:
"R_N* > 107, not bounded above". The optimizer searches a decade beyond each end, so that
reaching the open region is possible and a finite bound is never returned as an estimate.
"""

import numpy as np
# scipy is imported in the functions that use it: a fit needs none of it (0.5 s of import).

from chinchax.scaling.numerics import fmt

TOL = 0.01  # 1% of every run's effective size: the runs' resolution of a decay constant


def _kept(log_R: float, x: float) -> float:
  R = np.exp(log_R)
  return (1.0 + R * -np.expm1(-x / R)) / (1.0 + x)


def open_range(x) -> tuple[float, float]:
  """(lo, hi): below lo and above hi, R changes no run's effective size by more than TOL.

  x: the runs' excess ratios (D/U_D − 1 or N/U_N − 1); only the largest matters.
  """
  from scipy import optimize
  x = np.asarray(x, np.float64)
  x_max = float(x.max()) if x.size else 0.0
  if x_max <= TOL:  # no run is affected by any R
    return 1.0, 1.0
  hi = optimize.brentq(lambda t: _kept(t, x_max) - (1 - TOL), -20.0, 40.0, xtol=1e-6)
  # Worthless repeats: the decayed part R·(1 − exp(−x/R)) ≤ R is below TOL of U.
  lo = optimize.brentq(lambda t: np.exp(t) * -np.expm1(-x_max / np.exp(t)) - TOL, -20.0,
                       40.0, xtol=1e-6)
  return float(np.exp(lo)), float(np.exp(hi))


def search_bounds(lo: float, hi: float) -> tuple[float, float]:
  """The optimizer's box in log R: a decade beyond each end of the open range."""
  return float(np.log(lo / 10.0)), float(np.log(hi * 10.0))


def classify(R, lo: float, hi: float) -> np.ndarray:
  """R with values the runs cannot tell from ∞ (from 0) replaced by inf (0)."""
  R = np.array(R, np.float64)
  R[R >= hi] = np.inf
  R[R <= lo] = 0.0
  return R


def interval(point: float, draws, lo: float, hi: float, level: float
             ) -> tuple[float | None, list[float | None], str]:
  """(the estimate or None, [lower, upper] with None for an open end, its statement).

  The point is None when the fit itself is in an open region. A two-sided interval takes the
  (1 ± level)/2 quantiles of the draws; a one-sided one, the 1 − level quantile (above) or
  the level quantile (below), so that it holds `level` of the draws.
  """
  p = float(classify([point], lo, hi)[0])
  R_S = classify(draws, lo, hi)
  # inverted_cdf: a draw, not an interpolation (which is nan between inf and inf)
  q_lo, q_hi = np.quantile(R_S, [(1 - level) / 2, (1 + level) / 2],
                           method="inverted_cdf") if R_S.size else (p, p)
  if np.isinf(p):
    bound = float(np.quantile(R_S, 1 - level, method="inverted_cdf")) if R_S.size else hi
    bound = hi if not np.isfinite(bound) or bound <= 0 else bound
    return None, [bound, None], f"> {fmt.num(bound)}, not bounded above"
  if p == 0.0:
    bound = float(np.quantile(R_S, level, method="inverted_cdf")) if R_S.size else lo
    bound = lo if bound <= 0 or not np.isfinite(bound) else bound
    return None, [None, bound], f"< {fmt.num(bound)}, not bounded below"
  pair = [None if q_lo <= 0 else float(q_lo), None if np.isinf(q_hi) else float(q_hi)]
  ends = [fmt.num(pair[0]) if pair[0] is not None else "not bounded below",
          fmt.num(pair[1]) if pair[1] is not None else "not bounded above"]
  return p, pair, f"= {fmt.num(p)} [{ends[0]}, {ends[1]}]" if R_S.size else (
      f"= {fmt.num(p)} (no interval)")


NO_DECAY, NO_VALUE = 1e15, 1e-15  # R for ∞ and 0 in the law's formulas (exact to 1e-12 here)


def as_number(R: float | None, pair) -> tuple[float, str | None]:
  """A stored constant as a number the law's formulas take, and how an open one was read."""
  if R is not None:
    return float(R), None
  if pair is not None and pair[1] is None:
    return NO_DECAY, "not bounded above: planned as no decay"
  return NO_VALUE, "not bounded below: planned as worthless repeats"
