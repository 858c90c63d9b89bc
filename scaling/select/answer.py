"""The answer a selection narrows: log N*(C_target) (`target="N"`) or the exponent a
(`target="a"`, N* ∝ C^a), as a function of a parametric law theta = [E, A, B, alpha, beta].

The interval of the answer is the percentile interval of its values over the current fit's
bootstrap draws, and its width hi − lo: for "N" in natural-log units (a width w is N* known
within a factor e^w), for "a" in units of a. Default widths at which a study may stop
(`DEFAULT_WIDTH`): 0.25 for log N* (a factor 1.28) and 0.05 for a."""

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt, optimum

TARGETS = ("N", "a")
DEFAULT_WIDTH = {"N": 0.25, "a": 0.05}
PAST_POOL = 10.0  # the default target budget: this many times the pool's largest


def check_target(target: str) -> str:
  if target not in TARGETS:
    raise UserError(f"--target={target!r}: give N (N* at the target budget) or a (the "
                    "exponent of N* ∝ C^a)")
  return target


def values(theta_Sx5: np.ndarray, target: str, C_target: float) -> np.ndarray:
  """The answer of each law (S,): log N*(C_target) or a."""
  theta = np.asarray(theta_Sx5, np.float64)
  if target == "a":
    return optimum.exponents(theta)[0]
  with np.errstate(all="ignore"):  # a runaway draw gives inf: dropped by the caller
    return np.log(optimum.optimum(C_target, theta)[0])


def name(target: str, C_target: float) -> str:
  """How the answer is written: `log N*(1.5e13)` or `a`."""
  return "a" if target == "a" else f"log N*({fmt.num(C_target)})"
