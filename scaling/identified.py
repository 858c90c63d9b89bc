"""Which of a law's parameters the data leave unidentified: an interval that spans orders of
magnitude says the data cannot tell that parameter's value, however good the fit of a and b.

E = 1.3 with a 90% interval [3.5e-7, 1.08] is such a case: a flat loss surface trades E
against A and B, and reading E (the irreducible loss) from that law would be a mistake.
"""

from collections.abc import Mapping
from typing import Any

from chinchax.scaling import fmt

MAX_RATIO = 100.0  # two orders of magnitude between the interval's ends
NAMES = ("E", "A", "B", "alpha", "beta")


def unidentified(entry: Mapping[str, Any]) -> list[str]:
  """'E [3.5e-7, 1.08]'-style strings for each parameter of `entry` (an approach's entry or
  a law's `ci`) whose interval spans more than MAX_RATIO x or reaches 0."""
  ci = entry.get("ci") if "ci" in entry else entry
  out = []
  for name in NAMES:
    pair = (ci or {}).get(name)
    if pair and pair[1] > 0 and (pair[0] <= 0 or pair[1] / pair[0] > MAX_RATIO):
      out.append(f"{name} {fmt.interval(pair)}")
  return out


def sentence(entry: Mapping[str, Any]) -> str | None:
  """One line for the headline, or None when every interval is within MAX_RATIO x."""
  names = unidentified(entry)
  if not names:
    return None
  return (f"unidentified (interval spans over {MAX_RATIO:g}x): {', '.join(names)}; the data "
          "do not pin these down, so do not read them on their own")
