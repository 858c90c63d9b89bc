"""How far a plan lies outside the runs its law was fitted on, in N, D and C separately.

For a quantity x and the fitted range [lo, hi] of the runs, the factor is

    max(x / hi, lo / x, 1)        (1 inside the range, 17 for 17x beyond either end),

computed for the plan's N, D and C (the compute-optimal N*, D* of the budget, or the N and D
given). A plan warns when any factor exceeds THRESHOLD = 3, about half a decade: a fitted
law is tested only where its runs are, and 3x is one step of the usual IsoFLOP grid (budgets
3x apart) past the last one. The warning gives the bootstrap interval of N* there, which
assumes the law's form holds that far and so is the least the uncertainty can be. Inside the
threshold it stays quiet. A law whose ranges are unknown (a hand-built one) gets no factors.
"""

from typing import Any

from chinchax.scaling.numerics import fmt
from chinchax.scaling.law import build
from chinchax.scaling.law.artifact import ScalingLaw

THRESHOLD = 3.0


def factor(x: float, lo: float, hi: float) -> float:
  return build.beyond(x, (lo, hi))  # law.json's `beyond_fit`, for N and D as well as C


def table_label(law: ScalingLaw, C: float, N: float, D: float) -> str:
  """An allocation table's row: `inside`, `10x past: extrapolated` (C past the fitted
  budgets), or, at a budget inside them, where N* or D* leaves the runs' sizes or tokens (an
  optimum below the smallest size sampled, say); `?` where the ranges are unknown."""
  ranges = law.ranges
  if ranges["C"] is None:
    return "?"
  f = factor(C, *ranges["C"])
  if f > 1 + 1e-9:
    return f"{fmt.factor(f)} past: extrapolated"
  out = [f"{k}* {fmt.factor(f)} outside" for k, x in (("N", N), ("D", D))
         if ranges[k] is not None and (f := factor(x, *ranges[k])) > 1 + 1e-9]
  return "; ".join(out) + ": extrapolated" if out else "inside"


def _where(x: float, lo: float, hi: float) -> str:
  if x > hi:
    return f"{fmt.factor(x / hi)} above the largest fitted {fmt.num(hi)}"
  if x < lo:
    return f"{fmt.factor(lo / x)} below the smallest fitted {fmt.num(lo)}"
  return "inside the fitted range"


def extrapolation(law: ScalingLaw, N: float, D: float, C: float,
                  level: float | None = None) -> tuple[dict[str, Any] | None, list[str]]:
  """({fitted ranges, query, factors, threshold}, warnings) for a plan at (N, D, C)."""
  ranges = law.ranges
  if all(r is None for r in ranges.values()):
    return None, []
  query = {"N": N, "D": D, "C": C}
  factors = {k: None if ranges[k] is None else factor(query[k], *ranges[k]) for k in query}
  out = {"fitted": {k: list(v) if v else None for k, v in ranges.items()}, "query": query,
         "factors": factors, "threshold": THRESHOLD}
  beyond = [k for k, f in factors.items() if f is not None and f > THRESHOLD]
  if not beyond:
    return out, []
  parts = ", ".join(f"{k} {'inside' if f <= 1 else fmt.factor(f)}"
                    for k, f in factors.items() if f is not None)
  detail = "; ".join(f"{k} = {fmt.num(query[k])} is {_where(query[k], *ranges[k])}"
                     for k in beyond)
  band = law.interval("N", C, level)
  if band is None:
    width = "this law has no bootstrap draws, so no interval shows the uncertainty there"
  else:
    width = (f"the {fmt.percent(level or law.ci_level)} interval of N* there is "
             f"{fmt.interval(band)}, and assumes the law's form holds that far")
  return out, [f"this plan extrapolates beyond the fitted runs by {parts} (warning above "
               f"{fmt.factor(THRESHOLD)}): {detail}; {width}"]
