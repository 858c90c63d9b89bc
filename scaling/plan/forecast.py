"""A forecast written before a run, and its score after: `chinchax forecast`.

A law is for extrapolation, so its forecasts are pre-registered, as Marin does before each
large run (2.7587 forecast at 1e21 FLOPs, 2.75814 measured): `make` writes what a law says
a run will reach, with its interval, the law's hash and the time; `score` reads finished
run records and says, for the run the forecast was about, forecast against actual and
whether the actual fell inside the interval.

The record (schema FORECAST_SCHEMA): `created` (UTC), `law` {path, sha256 of the law's JSON
with sorted keys and no spaces (so a reformatted file keeps its hash), approach,
conventions}, `C`, `N`, `D` (the budget; a budget alone gets the law's compute-optimal N*
and D*), `what` ("compute-optimal" or "given N and D"), `loss`, `loss_ci` ([lo, hi] or null
without bootstrap draws), `level`, `warnings` (extrapolation beyond the fitted range).

Which run a forecast is about: the finished run whose N (the law's convention) and D are
both within MATCH_RTOL of the forecast's, the nearest in log distance; for a compute-optimal
forecast with no such run, the lowest loss among the runs whose C is within MATCH_RTOL of
the forecast's (that budget's measured optimum).
"""

import datetime
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from chinchax.errors import UserError
from chinchax.scaling.plan import extrapolation
from chinchax.scaling.numerics import fmt
from chinchax.scaling.plan import planner as plan_lib
from chinchax.json_checks import number, obj, string
from chinchax.scaling.law.artifact import ScalingLaw

FORECAST_SCHEMA = "chinchax/forecast/v1"
MATCH_RTOL = 0.1  # a run within 10% of the forecast's N and D (or C) is the one forecast


def law_hash(law: ScalingLaw) -> str:
  text = json.dumps(law.to_dict(), sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode()).hexdigest()


def make(law: ScalingLaw, *, C: float | None = None, N: float | None = None,
         D: float | None = None, level: float | None = None) -> dict[str, Any]:
  """The forecast record of `law` for a budget C, or a model (N, D) (two of C, N, D)."""
  if C is None and (N is None or D is None):
    raise UserError("forecast: give --flops=C (the compute-optimal model), or --params and "
                    "--tokens (or one of them with --flops)")
  budget, warnings = plan_lib.resolve_budget(law, C=C, N=N, D=D)
  C = float(budget["C"])
  if budget["N"] is None:
    N, D = law.optimum(C)
    loss, band, what = law.optimal_loss(C), law.interval("loss", C, level), "compute-optimal"
  else:
    N, D = float(budget["N"]), float(budget["D"])
    loss, band, what = law.predict(N, D), law.predict_interval(N, D, level), "given N and D"
  _, far = extrapolation.extrapolation(law, N, D, C, level)
  warnings += far
  return {
      "schema": FORECAST_SCHEMA,
      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "law": {"path": law.source, "sha256": law_hash(law), "approach": law.approach,
              "conventions": dict(law.conventions)},
      "C": C, "N": float(N), "D": float(D), "what": what,
      "loss": float(loss),
      "loss_ci": None if band is None else [float(band[0]), float(band[1])],
      "level": float(level if level is not None else law.ci_level),
      "warnings": warnings,
  }


def check(doc: Any, where: str = "forecast") -> dict[str, Any]:
  """`doc` if it is a forecast record; a UserError naming the field otherwise."""
  doc = obj(doc, where, ("schema", "law", "C", "N", "D", "loss", "loss_ci", "level"))
  if doc["schema"] != FORECAST_SCHEMA:
    raise UserError(f"{where}.schema: expected {FORECAST_SCHEMA!r}, got {doc['schema']!r}; "
                    "write one with `chinchax forecast`")
  for k in ("C", "N", "D", "loss"):
    number(doc[k], f"{where}.{k}", "positive")
  number(doc["level"], f"{where}.level", "unit")
  if doc["loss_ci"] is not None:
    if not (isinstance(doc["loss_ci"], list) and len(doc["loss_ci"]) == 2):
      raise UserError(f"{where}.loss_ci: expected [lo, hi] or null")
    for end in doc["loss_ci"]:
      number(end, f"{where}.loss_ci", "positive")
  law = obj(doc["law"], f"{where}.law", ("sha256", "conventions"))
  string(law["sha256"], f"{where}.law.sha256")
  obj(law["conventions"], f"{where}.law.conventions", ("params",))
  return doc


def _n_of(record: Mapping[str, Any], params: str) -> float | None:
  return record.get("N_total" if params == "total" else "N_non_embedding")


def _log_gap(a: float, b: float) -> float:
  return abs(math.log(a / b))


def score(forecast: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
  """Forecast against actual for the run the forecast is about (rule in the docstring)."""
  forecast = check(dict(forecast))
  params = forecast["law"]["conventions"]["params"]
  done = [r for r in records if r.get("status") == "done" and r.get("eval_loss") is not None
          and _n_of(r, params) and r.get("D")]
  tol = math.log1p(MATCH_RTOL)
  near = [r for r in done if _log_gap(_n_of(r, params), forecast["N"]) <= tol
          and _log_gap(r["D"], forecast["D"]) <= tol]
  out = {"forecast": forecast["loss"], "interval": forecast["loss_ci"],
         "level": forecast["level"], "C": forecast["C"], "N": forecast["N"],
         "D": forecast["D"], "law_sha256": forecast["law"]["sha256"]}
  if near:
    run = min(near, key=lambda r: _log_gap(_n_of(r, params), forecast["N"])
              + _log_gap(r["D"], forecast["D"]))
    matched = "the run at the forecast's N and D"
  else:
    budget = [r for r in done if forecast.get("what") == "compute-optimal"
              and _log_gap(6.0 * _n_of(r, params) * r["D"], forecast["C"]) <= tol]
    if not budget:
      return {**out, "status": "no run", "actual": None, "inside": None,
              "why": f"no finished run within {MATCH_RTOL:.0%} of N = {fmt.num(forecast['N'])}"
                     f" and D = {fmt.num(forecast['D'])}"}
    run = min(budget, key=lambda r: r["eval_loss"])
    matched = "the lowest loss at the forecast's budget"
  actual = float(run["eval_loss"])
  band = forecast["loss_ci"]
  return {**out, "status": "scored", "run": run.get("name"), "matched": matched,
          "run_N": float(_n_of(run, params)), "run_D": float(run["D"]), "actual": actual,
          "error": actual / forecast["loss"] - 1,
          "inside": None if band is None else bool(band[0] <= actual <= band[1])}


def score_line(s: Mapping[str, Any]) -> str:
  """One sentence: `forecast 2.7587 [2.74, 2.78], actual 2.7581 (-0.02%): inside`."""
  if s["status"] != "scored":
    return f"forecast {s['forecast']:.4f} at C = {fmt.num(s['C'])}: not scored ({s['why']})"
  band = f" {fmt.interval(s['interval'], 4)}" if s["interval"] else ""
  verdict = ("no interval" if s["inside"] is None else
             f"inside its {fmt.percent(s['level'])} interval" if s["inside"] else
             f"OUTSIDE its {fmt.percent(s['level'])} interval")
  return (f"forecast {s['forecast']:.4f}{band} at C = {fmt.num(s['C'])}, actual "
          f"{s['actual']:.4f} ({100 * s['error']:+.2f}%; {s['run']}, {s['matched']}): "
          f"{verdict}")
