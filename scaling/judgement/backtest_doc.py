"""law.json's `backtest` block (scaling.judgement.backtest) as the headline states it, and its check.

The headline's lines: "backtest: fitted on 5e10-1.5e12; predicting the largest budget from
the others, Approach 3 missed its N* by 9% and its loss by 0.3%; Approach 2 its N* by 12%",
then the same without the largest two budgets where the data allowed it.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.json_checks import integer, interval, number, obj, shown, string


def miss(doc_backtest: Mapping[str, Any] | None, approach: str, dropped: int = 1
         ) -> dict[str, Any] | None:
  """The scored forecast of `approach` with `dropped` budgets held out, or None."""
  for h in (doc_backtest or {}).get("holdouts", ()):
    if h["dropped"] == dropped:
      got = h["approaches"].get(approach)
      if not got or "error" in got or not measurable(h):
        return None
      return {**got, "reference_N_rel_sd": h["reference"].get("N_rel_sd")}
  return None


def measurable(holdout: Mapping[str, Any]) -> bool:
  """Whether a holdout's misses measure anything: its reference N* is a bound when the
  held-out budget's lowest loss is at an end of its sizes, or it has fewer than 3 sizes
  (`backtest.reference` flags both `at_edge`), and a miss against a bound says nothing of
  which approach forecasts better. Such a holdout is reported, and chooses nothing."""
  return not holdout["reference"]["at_edge"]


def pct(x: float) -> str:
  return f"{100 * abs(x):.2g}%" if abs(x) < 0.1 else f"{100 * abs(x):.0f}%"


def _clause(name: str, got: Mapping[str, Any], first: bool) -> str:
  text = (f"Approach {name} missed its N* by {pct(got['N_error'])}" if first else
          f"Approach {name} its N* by {pct(got['N_error'])}")
  if got.get("loss_error") is not None:
    text += f" and its loss by {pct(got['loss_error'])}"
  return text


def headline(bt: Mapping[str, Any] | None, order: Sequence[str]) -> list[str]:
  """The headline's backtest lines, the approaches in `order` (the recommended first)."""
  if not bt:
    return ["backtest: fewer than 4 budgets, so no budget could be held out and predicted"]
  lines = []
  for h in bt["holdouts"]:
    scored = [(k, h["approaches"][k]) for k in order
              if k in h["approaches"] and "error" not in h["approaches"][k]]
    what = "the largest budget" if h["dropped"] == 1 else "it without the largest two"
    lead = (f"backtest: fitted on {fmt.num(bt['fitted'][0])}-{fmt.num(bt['fitted'][1])}; "
            f"predicting the largest budget from the others" if h["dropped"] == 1 else
            f"  predicting {what} (fitted on {fmt.num(h['fitted_on'][0])}-"
            f"{fmt.num(h['fitted_on'][1])})")
    if not scored:
      lines.append(f"{lead}: no approach could be refitted")
      continue
    clauses = [_clause(k, g, i == 0) for i, (k, g) in enumerate(scored)]
    ref = h["reference"]
    edge = (" (its lowest loss is at an end of its sizes: the reference N* is a bound, so the "
            "misses are not measurable and choose no approach)"
            if ref["at_edge"] else f" (the held-out budget's own N* is known to "
            f"±{pct(ref['N_rel_sd'])})" if ref.get("N_rel_sd") is not None and h["dropped"] == 1
            else "")
    lines.append(f"{lead}, {'; '.join(clauses)}{edge}")
  return lines


def validate(bt: Any):
  """The optional `backtest` block (scaling.judgement.backtest): what the headline reads of it."""
  if bt is None:
    return
  bt = obj(bt, "backtest", ("fitted", "holdouts"))
  interval(bt["fitted"], "backtest.fitted", "positive")
  if not isinstance(bt["holdouts"], list):
    raise UserError(f"backtest.holdouts: expected a list, got {shown(bt['holdouts'])}")
  for i, h in enumerate(bt["holdouts"]):
    where = f"backtest.holdouts[{i}]"
    h = obj(h, where, ("dropped", "fitted_on", "C", "reference", "approaches"))
    integer(h["dropped"], f"{where}.dropped", 1)
    interval(h["fitted_on"], f"{where}.fitted_on", "positive")
    number(h["C"], f"{where}.C", "positive")
    ref = obj(h["reference"], f"{where}.reference", ("N", "loss", "at_edge"))
    number(ref["N"], f"{where}.reference.N", "positive")
    number(ref["loss"], f"{where}.reference.loss", "positive")
    number(ref.get("N_rel_sd"), f"{where}.reference.N_rel_sd", "nonnegative", nullable=True)
    for k, got in obj(h["approaches"], f"{where}.approaches").items():
      got = obj(got, f"{where}.approaches.{k}")
      if "error" in got:
        string(got["error"], f"{where}.approaches.{k}.error")
        continue
      obj(got, f"{where}.approaches.{k}", ("N", "loss", "N_error", "loss_error"))
      number(got["N"], f"{where}.approaches.{k}.N", "positive")
      number(got["N_error"], f"{where}.approaches.{k}.N_error")
      number(got["loss"], f"{where}.approaches.{k}.loss", "positive", nullable=True)
      number(got["loss_error"], f"{where}.approaches.{k}.loss_error", nullable=True)
