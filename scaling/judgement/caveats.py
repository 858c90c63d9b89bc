"""What the data support: is Approach 3 well determined, do the approaches agree, which one
to read, and the headline that says so (the same lines on the console, in report.md, and
derived from law.json alone).

Approach 3 is *poorly determined* when any of these holds (issue 12's criteria for a law a
scientist would believe):
  * it fits its 5 parameters to fewer than MIN_RUNS = 10 runs;
  * alpha or beta lies outside PLAUSIBLE_EXPONENTS (no language model scales like that);
  * A or B exceeds MAX_COEFFICIENT (the coefficient ran off with its exponent);
  * its interval of a is wider than MAX_A_WIDTH, or that of alpha or beta spans more than
    MAX_EXPONENT_RATIO x;
  * more than MAX_DROPPED of its bootstrap refits gave no law;
  * the fit itself warns (a term not identified, E at a bound, a fragile minimum).
The recommended approach is Approach 3 when it is well determined (it also predicts losses),
else Approach 2, else Approach 1, each only if it has an interval of a that passed its checks
and is no wider than Approach 3's, else a poorly determined Approach 3 with that caveat;
except that an approach whose backtest (scaling.judgement.backtest: refitted without the largest
budget, predicting it) missed the held-out N* by more than BACKTEST_MISS, by more than twice
that budget's own noise, and by more than BACKTEST_RATIO times another approach's miss gives
way to that other approach.

Two approaches *disagree* when their intervals of a (or of b) do not overlap (`agreement`).
Each approach reads a and b its own way; on data from one law their intervals overlap.
Disjoint intervals mean at least one reading is biased, and the usual causes are known:

* asymmetric exponents (alpha far from beta): the IsoFLOP profile is not symmetric in log N,
  so a parabola in log N misplaces N* (Czech et al. 2026), and estimators that weight the
  runs differently part ways when the law's form does not hold exactly;
* off-centre grids: a budget's sizes not centred on its optimum, which biases the parabola
  further, and a budget whose minimum sits near the edge of its sizes is poorly read by any
  method;
* otherwise: the law's form does not fit the runs well (the approaches read different parts
  of the data), or too few runs.

A parameter is *unidentified* when its interval spans more than MAX_RATIO x (`unidentified`):
E = 1.3 with a 90% interval [3.5e-7, 1.08] is such a case, a flat loss surface trading E
against A and B; reading E from that law would be a mistake, however good the fit of a and b.

`agreement` takes the approaches' entries as law.json stores them."""

import math
from collections.abc import Mapping, Sequence
from typing import Any

from chinchax.scaling.judgement import backtest_doc
from chinchax.scaling.numerics import fmt


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


MIN_RUNS = 10  # twice the parameters: fewer leave a bootstrap too few distinct points
PLAUSIBLE_EXPONENTS = (0.05, 1.5)
MAX_COEFFICIENT = 1e12
MAX_A_WIDTH = 0.3
MAX_EXPONENT_RATIO = 10.0
MAX_DROPPED = 0.1
PREFERENCE = ("3", "2", "1")
BACKTEST_MISS = 0.25  # a held-out N* missed by more than this fraction...
BACKTEST_RATIO = 2.0  # ...and by this many times another approach's miss: read the other


def approach3_problems(entry: Mapping[str, Any], n_runs: int) -> list[str]:
  """Why Approach 3's law should not be read as the answer; empty when well determined."""
  out = []
  if n_runs < MIN_RUNS:
    out.append(f"it fits 5 parameters to only {n_runs} runs (at least {MIN_RUNS} needed)")
  lo, hi = PLAUSIBLE_EXPONENTS
  # The nesting form's loss falls as N^-(alpha gamma) and D^-(beta gamma), with coefficients
  # A^gamma and B^gamma: those are what the law's own bounds are about.
  g = entry.get("gamma", 1.0)
  said = (lambda name: name) if g == 1.0 else (lambda name: f"{name}^gamma" if name in "AB"
                                               else f"{name}*gamma")
  for name in ("alpha", "beta"):
    if not lo <= entry[name] * g <= hi:
      out.append(f"{said(name)} = {fmt.num(entry[name] * g)} is outside the plausible "
                 f"[{lo}, {hi}]")
  for name in ("A", "B"):
    if entry[name]**g > MAX_COEFFICIENT:
      out.append(f"{said(name)} = {fmt.num(entry[name]**g)} ran away "
                 f"(above {fmt.num(MAX_COEFFICIENT)})")
  ci = entry.get("ci") or {}
  if ci.get("a") and ci["a"][1] - ci["a"][0] > MAX_A_WIDTH:
    out.append(f"its {fmt.percent(ci['level'])} interval of a, {fmt.interval(ci['a'])}, is "
               f"wider than {MAX_A_WIDTH}")
  for name in ("alpha", "beta"):
    pair = ci.get(name)
    if pair and (pair[0] <= 0 or pair[1] / pair[0] > MAX_EXPONENT_RATIO):
      out.append(f"its interval of {name}, {fmt.interval(pair)}, spans more than "
                 f"{MAX_EXPONENT_RATIO:g}x")
  boot = entry.get("bootstrap") or {}
  if boot.get("n_resamples") and boot.get("dropped", 0) > MAX_DROPPED * boot["n_resamples"]:
    out.append(f"{boot['dropped']} of {boot['n_resamples']} bootstrap refits gave no law")
  if entry.get("warnings"):
    out.append("the fit itself warns (see the warnings)")
  return out


def recommend(entries: Mapping[str, Mapping[str, Any]], asked: Sequence[str] | None = None
              ) -> tuple[str, str]:
  """(approach, why) among the approaches that ran; `asked`: the user's explicit choice."""
  if asked is not None and len(asked) == 1:
    return asked[0], f"asked for (--approach={asked[0]})"
  e3 = entries.get("3")
  others = [k for k in ("2", "1") if k in entries and (not e3 or _better_determined(
      entries[k], e3))]
  if e3 and not e3.get("problems"):
    k, why = "3", ("Approach 3's parametric law is well determined (plausible exponents, "
                   "bounded coefficients, enough runs); it also predicts losses")
  elif others:
    k = others[0]
    what = {"2": "the IsoFLOP minima", "1": "the loss curves' envelope"}[k]
    why = (("Approach 3's law is poorly determined (see the warnings); " if e3 else "")
           + f"Approach {k}'s exponents come from {what} directly")
  elif "2" in entries or "1" in entries:
    return "3", ("Approach 3's law is poorly determined (see the warnings), and no other "
                 f"approach is better determined: {_why_not(entries, e3)}")
  else:
    return "3", ("the only approach these runs support, though poorly determined (see the "
                 "warnings)")
  for other in PREFERENCE:
    usable = other != "3" or (e3 and not e3.get("problems"))
    usable = usable and other in entries and (sound(entries[other]) or not sound(entries[k]))
    if other != k and usable and _forecasts_better(entries, other, k):
      return other, _backtest_why(entries, other, k)
  return k, why + _closer_in_backtest(entries, k)


def _width(entry: Mapping[str, Any]) -> float:
  lo_hi = (entry.get("ci") or {}).get("a")
  return float(lo_hi[1] - lo_hi[0]) if lo_hi else float("inf")


def _better_determined(entry: Mapping[str, Any], e3: Mapping[str, Any]) -> bool:
  """Whether Approach 1 or 2 may stand in for a poorly determined Approach 3: it has an
  interval of a that passed its checks and is no wider than Approach 3's. An approach with no
  interval, or a wider one, is no better an answer than the law it would replace."""
  return sound(entry) and _width(entry) <= _width(e3)


def _why_not(entries: Mapping[str, Mapping[str, Any]], e3: Mapping[str, Any]) -> str:
  said = []
  for k in ("2", "1"):
    if k not in entries:
      continue
    e = entries[k]
    if not (e.get("ci") or {}).get("a"):
      said.append(f"Approach {k} has no interval of a")
    elif not sound(e):
      said.append(f"Approach {k} fails its lack-of-fit check")
    else:
      said.append(f"Approach {k}'s interval of a is {_width(e):.2f} wide against "
                  f"Approach 3's {_width(e3):.2f}")
  return "; ".join(said)


def sound(entry: Mapping[str, Any]) -> bool:
  """An approach with an interval of a that passed its own checks (no lack of fit): the
  backtest never recommends one without both over one with them."""
  ci = entry.get("ci") or {}
  return ci.get("a") is not None and (entry.get("lack_of_fit") or {}).get("fits") is not False


def _forecasts_better(entries, k: str, other: str | None) -> bool:
  """Approach k's backtest missed the held-out N* by less than 1/BACKTEST_RATIO of
  `other`'s miss, which was above BACKTEST_MISS and above twice the noise of the held-out
  budget's own minimum: its forecast is the one to read."""
  mine = (entries[k].get("backtest") or {}).get("N_error")
  bt = entries.get(other or "", {}).get("backtest") or {}
  theirs, noise = bt.get("N_error"), bt.get("reference_N_rel_sd") or 0.0
  if mine is None or theirs is None:
    return False
  return (abs(theirs) > max(BACKTEST_MISS, 2 * noise)
          and abs(mine) * BACKTEST_RATIO < abs(theirs))


def _closer_in_backtest(entries, k: str) -> str:
  """Why k stands though another approach's backtest came closer: k's miss is not past what
  sets an approach aside (else `recommend` would have read the other). Empty otherwise."""
  bt = entries[k].get("backtest") or {}
  mine = bt.get("N_error")
  closer = [(abs(e["backtest"]["N_error"]), o) for o, e in entries.items()
            if o != k and (e.get("backtest") or {}).get("N_error") is not None]
  closer = [c for c in closer if mine is not None and c[0] < abs(mine)]
  if not closer:
    return ""
  theirs, o = min(closer)
  noise = bt.get("reference_N_rel_sd") or 0.0
  return (f"; in the backtest Approach {o} came closer to the held-out N* "
          f"({backtest_doc.pct(theirs)} against {backtest_doc.pct(mine)} off), but a miss "
          f"sets an approach aside only past {BACKTEST_MISS:.0%}, twice that budget's own "
          f"noise (±{backtest_doc.pct(noise)}) and {BACKTEST_RATIO:g}x the other's")


def _backtest_why(entries, k: str, other: str) -> str:
  mine, theirs = (entries[x]["backtest"]["N_error"] for x in (k, other))
  return (f"predicting the largest budget from the others, Approach {other} missed its N* by "
          f"{backtest_doc.pct(theirs)} and Approach {k} by {backtest_doc.pct(mine)}")


def headline(doc: Mapping[str, Any]) -> list[str]:
  """What the data support, first: each approach's a and b with intervals, whether they
  agree, then the law only when it is well determined (else one sentence saying why not)."""
  entries = doc["approaches"]
  rows = []
  for k in ("1", "2", "3"):
    e = entries.get(k)
    if not e or e.get("a") is None:
      continue
    ci = e.get("ci") or {}
    level = f" ({fmt.percent(ci['level'])} intervals)" if ci.get("a") else " (no interval)"
    rows.append(f"  Approach {k}: a = {e['a']:.3f} {fmt.interval(ci.get('a'))}".rstrip()
                + f"   b = {e['b']:.3f} {fmt.interval(ci.get('b'))}".rstrip() + level)
  lines = (["compute-optimal exponents, N* ∝ C^a and D* ∝ C^b:"] + rows if rows
           else ["no approach could be fitted to these runs (see the notes)"])
  with_ci = [k for k, e in entries.items() if (e.get("ci") or {}).get("a")]
  if doc["fit"].get("disagreements"):
    lines.append("  the approaches DISAGREE: their intervals do not overlap (see the warnings)")
  elif len(with_ci) >= 2:
    a_k = [entries[k]["a"] for k in with_ci]
    # Named: an approach without an interval (Approach 1's bootstrap may fail) is not compared.
    names = sorted(with_ci)
    lines.append(f"  Approaches {', '.join(names[:-1])} and {names[-1]} agree: their intervals "
                 f"of a and b overlap (their estimates of a are {max(a_k) - min(a_k):.3f} "
                 "apart)")
  elif len(entries) >= 2:
    lines.append("  agreement not checked: fewer than two approaches have intervals")
  rec, law = doc["recommended"], doc["law"]
  unknown = sentence(entries["3"]) if entries.get("3") else None
  if unknown:
    lines.append(f"  Approach 3: {unknown}")
  problems = (entries.get("3") or {}).get("problems")
  parametric = law["form"].startswith("E + ")
  if problems:
    tail = ("so it is not given as the answer" if not parametric else
            "and no other approach could be fitted: its numbers are not to be trusted")
    lines.append(f"Approach 3's parametric law is poorly determined ({'; '.join(problems)}), "
                 f"{tail}.")
  if parametric and not problems:
    lines.append(f"law (Approach {law['approach']}): L(N, D) = {fmt.loss_law(law)}")
  elif not parametric:
    lines.append(f"law (Approach {law['approach']}): N* = {fmt.num(math.exp(law['log_kN']))}"
                 f"·C^{law['a']:.3f}, D* = {fmt.num(math.exp(law['log_kD']))}·C^{law['b']:.3f}"
                 " (it plans N and D and predicts no loss)")
  if "backtest" in doc:
    order = [rec["approach"]] + [k for k in ("3", "2", "1") if k != rec["approach"]]
    lines += backtest_doc.headline(doc["backtest"], order)
  lines.append(f"recommended: Approach {rec['approach']}: {rec['why']}")
  return lines


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
      where = ", ".join(f"C={fmt.num(d['C'])} ({d['parabola_bias']:+.1%})" for d in biased)
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
        edges.append(f"C={fmt.num(d['C'])} at {f:.2f}")
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
