"""Do the approaches agree? Warnings when their intervals of a or b do not overlap.

Each approach reads the compute-optimal exponents a (N* ∝ C^a) and b (D* ∝ C^b) its own
way; on data from one law their intervals overlap. Disjoint intervals mean at least one
reading is biased, and the usual causes are known:

* asymmetric exponents (alpha far from beta): the IsoFLOP profile is not symmetric in log N,
  so a parabola in log N misplaces N* (Czech et al. 2026), and estimators that weight the
  runs differently part ways when the law's form does not hold exactly;
* off-centre grids: a budget's sizes not centred on its optimum, which biases the parabola
  further, and a budget whose minimum sits near the edge of its sizes is poorly read by any
  method;
* otherwise: the law's form does not fit the runs well (the approaches read different parts
  of the data), or too few runs.

`agreement` takes the approaches' entries as law.json stores them.
"""

from collections.abc import Mapping

ASYMMETRY = 0.25  # |alpha - beta| / max(alpha, beta) above this: "asymmetric exponents"
EDGE = 0.25  # a budget's optimum within this fraction of its log-size range from an end
BIAS = 0.05  # the grid diagnostics' parabola_bias above which the parabola is biased


def _exponents(entries: Mapping[str, Mapping]) -> tuple[float, float] | None:
  """(alpha, beta) from Approach 3's entry, else from an Approach 2 profile fit."""
  for entry in entries.values():
    if "alpha" in entry and "beta" in entry:
      return float(entry["alpha"]), float(entry["beta"])
  for entry in entries.values():
    ex = entry.get("exponents")
    if isinstance(ex, Mapping) and "alpha" in ex and "beta" in ex:
      return float(ex["alpha"]), float(ex["beta"])
  return None


def causes(entries: Mapping[str, Mapping]) -> list[str]:
  """The likely causes of a disagreement, most specific first."""
  out = []
  for name, entry in entries.items():
    diag = entry.get("diagnostics") or []
    biased = [d for d in diag if abs(d.get("parabola_bias") or 0.0) > BIAS]
    if entry.get("method") == "parabola" and biased:
      where = ", ".join(f"C={d['C']:.3g} ({d['parabola_bias']:+.1%})" for d in biased)
      out.append(f"Approach {name} used the parabola, which this grid biases ({where}); "
                 "its method 'vp' does not")
  ab = _exponents(entries)
  if ab is not None and max(ab) > 0 and abs(ab[0] - ab[1]) / max(ab) > ASYMMETRY:
    out.append(f"asymmetric exponents (alpha={ab[0]:.3g}, beta={ab[1]:.3g}): the IsoFLOP "
               "profiles are lopsided in log N, where the approaches read N* differently")
  edges = []
  for entry in entries.values():
    for d in entry.get("diagnostics") or []:
      f = d.get("off_centre")
      if f is not None and not EDGE <= f <= 1 - EDGE:
        edges.append(f"C={d['C']:.3g} at {f:.2f}")
  if edges:
    out.append("off-centre grids (the optimum's place in each budget's log-size range: "
               + ", ".join(edges) + "); centre the sizes on the optimum")
  poor = (entries.get("3") or {}).get("problems")
  if poor:
    out.append("a poorly determined Approach 3 (" + "; ".join(poor) + ")")
  if not out:
    out.append("the law's form may not fit these runs, or they are too few: compare the "
               "fits' residuals, and add budgets or sizes")
  return out


def agreement(entries: Mapping[str, Mapping]) -> list[str]:
  """A warning for each pair of approaches whose intervals of a (or of b) are disjoint.

  entries: {"1" | "2" | "3": entry}, each entry with "a", "b" and "ci" = {"a": [lo, hi],
  "b": [lo, hi]} (an entry without an interval is not compared); optionally "alpha" and
  "beta" (Approach 3), "exponents" = {"alpha", "beta"}, "method" and "diagnostics" (Approach
  2's `IsoflopFit.to_dict()`), which name the likely cause.
  """
  names = sorted(entries)
  out = []
  for i, first in enumerate(names):
    for second in names[i + 1:]:
      e1, e2 = entries[first], entries[second]
      for key in ("a", "b"):
        ci1, ci2 = (e1.get("ci") or {}).get(key), (e2.get("ci") or {}).get(key)
        if not ci1 or not ci2 or ci1[1] >= ci2[0] and ci2[1] >= ci1[0]:
          continue
        out.append(
            f"Approaches {first} and {second} disagree on {key}: {e1[key]:.3f} "
            f"[{ci1[0]:.3f}, {ci1[1]:.3f}] vs {e2[key]:.3f} [{ci2[0]:.3f}, {ci2[1]:.3f}], "
            f"disjoint intervals; likely cause: " + "; ".join(causes(entries)))
  return out
