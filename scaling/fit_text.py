"""A fitted law as `chinchax fit` prints it: the headline (scaling.caveats) first, then every
warning and note, each approach's parameters with intervals, and the allocation table from
the largest fitted budget up."""

from chinchax.scaling import caveats
from chinchax.scaling import fmt
from chinchax.scaling import law_build
from chinchax.scaling.law import ScalingLaw

# The table's budgets: the fitted range's ends, then 10x past it, each flagged; a plan further
# out is `chinchax plan`'s, with its extrapolation warning.
PAST_TOP = (1.0, 10.0)


def _parameters(entry: dict) -> list[str]:
  ci = entry.get("ci") or {}
  cells = []
  for name in ("E", "A", "B", "alpha", "beta"):
    band = f" {fmt.interval(ci[name])}" if ci.get(name) else ""
    cells.append(f"{name} = {fmt.num(entry[name], 4)}{band}")
  return ["  " + ", ".join(cells[:3]), "  " + ", ".join(cells[3:])]


def _table(law: ScalingLaw) -> list[str]:
  C_min, C_max = law.fitted_range
  level = fmt.percent(law.ci_level) if law.samples is not None else ""
  lines = [f"compute-optimal allocation from the law of Approach {law.approach}"
           + (f" ({level} intervals):" if level else ":"),
           f"  {'C (FLOPs)':<10} {'N*':<28} {'D*':<28} {'D*/N*':<8} {'loss':<8} fitted range"]
  budgets = sorted({float(f"{C:.2g}") for C in (C_min, *(C_max * k for k in PAST_TOP))})
  for C in budgets:
    factor = law_build.beyond(C, law.fitted_range)
    past = "inside" if factor <= 1 + 1e-9 else f"{fmt.factor(factor)} past: extrapolated"
    N, D = law.optimum(C)
    cells = [fmt.num(C), fmt.num(N), fmt.num(D)]
    if law.samples is not None:
      cells[1] += " " + fmt.interval(law.interval("N", C))
      cells[2] += " " + fmt.interval(law.interval("D", C))
    loss = f"{law.optimal_loss(C):.4f}" if law.predicts_loss else "-"
    lines.append(f"  {cells[0]:<10} {cells[1]:<28} {cells[2]:<28} {fmt.num(D / N):<8} "
                 f"{loss:<8} {past}")
  lines.append("  a larger budget: chinchax plan --law=LAW --flops=C (it warns past 3x)")
  return lines


def summary(law: ScalingLaw, n_runs: int) -> str:
  doc = law.doc
  lines = [f"fitted {n_runs} runs"] + caveats.headline(doc)
  if doc["warnings"]:
    lines += ["warnings:"] + [f"  - {w}" for w in doc["warnings"]]
  if doc["notes"]:
    lines += ["notes:"] + [f"  - {n}" for n in doc["notes"]]
  e3 = doc["approaches"].get("3")
  if e3:
    state = "poorly determined, not the answer" if e3.get("problems") else "well determined"
    unknown = caveats.unidentified(e3)
    if unknown and not e3.get("problems"):
      state = f"a and b well determined; unidentified: {', '.join(unknown)}"
    lines += [f"Approach 3's law L = E + A/N^alpha + B/D^beta ({state}); Huber objective "
              f"{fmt.num(e3['objective'], 4)}, {e3['starts_at_best']}/{e3['starts']} starts "
              "reached it:"] + _parameters(e3)
  if law.fitted_range:
    lines += _table(law)
  if doc["data_constrained"]:
    dc = doc["data_constrained"]
    ci = dc["ci"] or {}
    said = dc.get("statements") or {}
    lines.append("data-constrained law (Muennighoff et al. 2023), base law "
                 f"{dc['base_source']}: "
                 + "; ".join(said.get(k) or f"{k[:3]}* = {fmt.num(dc[k])} "
                             f"{fmt.interval(ci.get(k))}" for k in ("R_D_star", "R_N_star")))
    lines += [f"  {dc['depends_on_base']}"] if dc.get("depends_on_base") else []
  return "\n".join(lines)
