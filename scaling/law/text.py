"""A law as a notebook shows it: a few lines (`repr`) and a Markdown table
(`_repr_markdown_`). The bootstrap draws stay on the object (`law.samples`), out of sight."""

import math

from chinchax.scaling.judgement import caveats
from chinchax.scaling.numerics import fmt
from chinchax.scaling.law import schema as law_schema


def _formula(law) -> str:
  v = law.doc["law"]
  if law.predicts_loss:
    return f"L(N, D) = {fmt.loss_law(v)}"
  return (f"N* = {fmt.num(math.exp(v['log_kN']))}·C^{v['a']:.3f}, "
          f"D* = {fmt.num(math.exp(v['log_kD']))}·C^{v['b']:.3f}")


def _exponents(law) -> str:
  ci = law.doc["ci"] or {}
  level = f" ({fmt.percent(ci['level'])})" if ci.get("a") else " (no intervals)"
  return (f"a = {law.a:.3f} {fmt.interval(ci.get('a'))}".rstrip() + ", "
          + f"b = {law.b:.3f} {fmt.interval(ci.get('b'))}".rstrip() + level)


def _origin(law) -> str:
  prov = law.doc["provenance"]
  if prov.get("fitted") is False or law.doc.get("preset"):
    return "not fitted here: " + str(prov.get("reference") or law.doc.get("reference") or
                                      "given coefficients")
  boot = law.doc["bootstrap"]
  n = boot["n"] if boot else 0
  C = law.fitted_range
  span = f", fitted at C = {fmt.num(C[0])}..{fmt.num(C[1])}" if C else ""
  return f"{law.doc['data']['points'] or '?'} runs{span}, {n} bootstrap draws (.samples)"


def short(law) -> str:
  rec = law.recommended
  lines = [f"ScalingLaw (Approach {law.approach}): {_formula(law)}",
           f"  {_exponents(law)}",
           f"  recommended: Approach {rec['approach']}; {len(law.warnings)} warnings "
           "(.warnings)",
           f"  {_origin(law)}"]
  unknown = caveats.unidentified(law.doc["ci"] or {})
  if unknown:
    lines.append(f"  unidentified: {', '.join(unknown)}")
  return "\n".join(lines)


def markdown(law) -> str:
  ci = law.doc["ci"] or {}
  rows = ["| | value | interval |", "|---|---|---|"]
  names = [n for n in law_schema.COLUMNS[law.form] if n not in ("a", "b")]
  for name in ("a", "b", *names):
    value = law.doc["law"].get(name, law.a if name == "a" else law.b if name == "b" else None)
    rows.append(f"| {name} | {fmt.num(value, 4)} | {fmt.interval(ci.get(name))} |")
  lines = [f"**ScalingLaw** (Approach {law.approach}): `{_formula(law)}`", "", *rows, "",
           f"recommended: Approach {law.recommended['approach']}: {law.recommended['why']}",
           "", f"{len(law.warnings)} warnings; {_origin(law)}"]
  lines += [f"- {w}" for w in law.warnings[:5]]
  return "\n".join(lines)
