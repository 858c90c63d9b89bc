"""The planner: from a law and what the user knows, the model and token count to train.

Inputs are any of C (training FLOPs), N (parameters), D (tokens), with C = 6·N·D:
  * C alone        → the compute-optimal N*(C), D*(C).
  * N alone        → the budget C at which N is compute-optimal, so D = D*(C);
    D alone likewise.
  * two of N, D, C → the third, then how far that pair is from the optimum at the same C:
    N/N*, and for a law that predicts losses the loss L(N, D) with its interval, the gap
    L(N, D) - L(N*, D*) and the *compute-equivalent* budget C_eq at which the optimal model
    reaches L(N, D) (C_eq/C is the pair's compute efficiency).
  * all three      → N and D rule; if C is more than 10% away from 6ND it is replaced by 6ND.
Optional: U unique tokens (scaling.constrained.law, with the law's fitted R_D*, R_N* when it
has them, else the published ones) and T inference tokens (scaling.plan.inference); both need a
law that predicts losses. Intervals are percentile bands of the law's bootstrap draws at
`level` (default: the law's). Every plan reports how far it lies outside the fitted ranges
(scaling.plan.extrapolation), and warns when N lies outside SENSIBLE_N or D/N outside
SENSIBLE_TOKENS_PER_PARAM (a plan for 1 FLOP is no model anyone trains).

`plan` returns a `Plan`: one JSON-ready dict (`to_dict()`), printed by `str(plan)`.
"""

import dataclasses
import json
import math
from typing import Any

import numpy as np

from chinchax.scaling.runs import conventions
from chinchax.scaling.constrained import law as data_constrained
from chinchax.scaling.constrained import bounds as dc_bounds
from chinchax.scaling.plan import extrapolation as extrapolation_lib
from chinchax.scaling.numerics import fmt
from chinchax.scaling.plan import inference
from chinchax.scaling.numerics import optimum as opt
from chinchax.errors import UserError
from chinchax.scaling.law.artifact import ScalingLaw
from chinchax.scaling.numerics import intervals

MAX_EPOCHS = 4.0  # Muennighoff et al.: up to ~4 epochs cost about as little as fresh data
# A plan outside these ranges is no language model anyone trains: warned about, not refused.
SENSIBLE_N = (1e3, 1e13)
SENSIBLE_TOKENS_PER_PARAM = (1.0, 1000.0)


def _check_positive(name: str, x: float | None) -> None:
  if x is not None and not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
    raise UserError(f"{name} must be a positive finite number, got {x!r}")


def _band(pair) -> list[float] | None:
  return None if pair is None else [float(pair[0]), float(pair[1])]


def resolve_budget(law: ScalingLaw, C=None, N=None, D=None) -> tuple[dict[str, Any], list[str]]:
  """Complete (N, D, C) from what was given; returns (budget dict, warnings)."""
  warnings = []
  if N is not None and D is not None:
    C6 = conventions.six_nd(N, D)
    if C is not None and not conventions.is_close_to_6nd(N, D, C, rtol=0.1):
      warnings.append(f"--flops={fmt.num(C, 4)} differs from 6·N·D = {fmt.num(C6, 4)} by "
                      f"{abs(C / C6 - 1):.0%}; using the consistent value C = {fmt.num(C6, 4)}")
    return {"C": C6, "N": N, "D": D, "source": "params,tokens"}, warnings
  if C is not None and N is not None:
    return {"C": C, "N": N, "D": C / (6.0 * N), "source": "flops,params"}, warnings
  if C is not None and D is not None:
    return {"C": C, "N": C / (6.0 * D), "D": D, "source": "flops,tokens"}, warnings
  if C is not None:
    return {"C": C, "N": None, "D": None, "source": "flops"}, warnings
  if N is not None:
    return {"C": law.budget_for_params(N), "N": None, "D": None, "source": "params"}, warnings
  if D is not None:
    return {"C": law.budget_for_tokens(D), "N": None, "D": None, "source": "tokens"}, warnings
  raise UserError("nothing to plan: give --flops=C, or --params/--tokens (one alone, or two "
                  "of --params/--tokens/--flops)")


def sanity(N: float, D: float) -> list[str]:
  """One warning each for N, and D/N, outside the ranges any trained model falls in."""
  out = []
  lo, hi = SENSIBLE_N
  if not lo <= N <= hi:
    out.append(f"N = {fmt.num(N)} parameters is outside any sensible model size "
               f"[{fmt.num(lo)}, {fmt.num(hi)}]; check the budget and its units (FLOPs)")
  lo, hi = SENSIBLE_TOKENS_PER_PARAM
  if not lo <= D / N <= hi:
    out.append(f"D/N = {fmt.num(D / N)} tokens per parameter is outside the sensible "
               f"[{lo:g}, {hi:g}] of trained models (Chinchilla's compute-optimal models "
               "train ~20); check N, D and C, and the law's exponents")
  return out


def compute_optimal(law: ScalingLaw, C: float, level: float | None = None) -> dict[str, Any]:
  """N*, D*, D*/N* and (when the law predicts losses) the loss at C, with intervals."""
  with np.errstate(all="ignore"):
    N, D = law.optimum(C)
  if not all(math.isfinite(x) and 0 < x < math.inf for x in (N, D)):
    raise UserError(f"the law puts the optimum at C = {fmt.num(C)} at N = {fmt.num(N)}, "
                    f"D = {fmt.num(D)}, "
                    "not a model anyone can train: its k_N or k_D is out of range (a damaged "
                    "law.json?); refit with `chinchax fit`")
  out = {"N": N, "D": D, "tokens_per_param": D / N,
         "loss": law.optimal_loss(C) if law.predicts_loss else None, "interval": None}
  if law.samples is not None:
    out["interval"] = {"level": law.ci_level if level is None else level}
    for q in ("N", "D", "tokens_per_param") + (("loss",) if law.predicts_loss else ()):
      out["interval"][q] = _band(law.interval(q, C, level))
  return out


def gap(law: ScalingLaw, N: float, D: float, level: float | None = None) -> dict[str, Any]:
  """How far (N, D) is from the compute-optimal pair at the same C = 6ND."""
  C = conventions.six_nd(N, D)
  N_opt, _ = law.optimum(C)
  out = {"N": N, "D": D, "C": C, "tokens_per_param": D / N, "N_over_N_opt": N / N_opt,
         "loss": None, "loss_interval": None, "loss_gap": None, "compute_equivalent": None,
         "compute_efficiency": None}
  if not law.predicts_loss:
    return out
  L, L_opt = law.predict(N, D), law.optimal_loss(C)
  C_eq = opt.budget_for_loss(L, law.theta)
  finite = math.isfinite(C_eq)
  out.update(loss=L, loss_interval=_band(law.predict_interval(N, D, level)),
             loss_gap=L - L_opt, compute_equivalent=C_eq if finite else None,
             compute_efficiency=min(C_eq / C, 1.0) if finite else None)
  return out


def data_constrained_plan(law: ScalingLaw, C: float, U: float,
                          pair: tuple[float, float] | None) -> tuple[dict[str, Any], list[str]]:
  warnings = []
  fitted = law.data_constrained
  if fitted:
    theta = [fitted["base"][k] for k in opt.PARAM_NAMES]
    R_D, R_N, source = fitted["R_D_star"], fitted["R_N_star"], "fitted"
    ci = fitted["ci"] or {}
    (R_D, how_D), (R_N, how_N) = (dc_bounds.as_number(R_D, ci.get("R_D_star")),
                                  dc_bounds.as_number(R_N, ci.get("R_N_star")))
    warnings += [f"{k} is {how}" for k, how in (("R_D*", how_D), ("R_N*", how_N)) if how]
  else:
    theta = law.theta
    R_D, R_N, source = data_constrained.R_D_STAR, data_constrained.R_N_STAR, "published"
  best = data_constrained.optimum(C, U, theta, R_D, R_N)
  N0, D0 = (float(v) for v in opt.optimum(C, theta))
  out = {
      "unique_tokens": U,
      "R_D_star": R_D,
      "R_N_star": R_N,
      "source": source,
      "ci": fitted["ci"] if fitted else None,
      "statements": (fitted or {}).get("statements"),
      "optimal": best,
      "chinchilla": {"N": N0, "D": D0, "epochs": D0 / U,
                     "loss": float(data_constrained.loss(N0, D0, U, theta, R_D, R_N))},
      "given": None,
  }
  if best["at_edge"]:
    warnings.append("the data-constrained optimum sits on the edge of the search bracket "
                    f"(N = {fmt.num(best['N'])}); treat it as a bound")
  if pair is not None:
    N, D = pair
    out["given"] = {"N": N, "D": D, "epochs": D / U,
                    "loss": float(data_constrained.loss(N, D, U, theta, R_D, R_N))}
    if D / U > MAX_EPOCHS:
      warnings.append(f"D = {fmt.num(D)} is {D / U:.1f} epochs of {fmt.num(U)} unique tokens; "
                      f"beyond ~{MAX_EPOCHS:g} epochs repeated data loses value "
                      "(Muennighoff et al. 2023)")
  else:
    if D0 / U > MAX_EPOCHS:
      warnings.append(f"the compute-optimal D* = {fmt.num(D0)} is {D0 / U:.1f} epochs of "
                      f"{fmt.num(U)} unique tokens; beyond ~{MAX_EPOCHS:g} epochs repeated data "
                      "loses value")
    if best["epochs"] > MAX_EPOCHS:
      warnings.append(f"the data-constrained optimum trains {best['epochs']:.1f} epochs of "
                      f"{fmt.num(U)} unique tokens (its loss already discounts the repeats); "
                      "more unique data would lower the loss")
  return out, warnings


def _law_summary(law: ScalingLaw) -> dict[str, Any]:
  out = {"source": law.source, "form": law.form, "approach": law.approach,
         **dict(zip(("a", "b", "log_kN", "log_kD"), map(float, law.P))),
         "conventions": dict(law.conventions), "recommended": dict(law.recommended),
         "warnings": law.warnings, "reference": law.doc.get("reference")}
  if law.predicts_loss:
    out.update({k: float(v) for k, v in zip(opt.NESTED_NAMES, law.theta)}, G=law.G)
  return out


def plan(law: ScalingLaw, *, C: float | None = None, N: float | None = None,
         D: float | None = None, U: float | None = None, T: float | None = None,
         level: float | None = None) -> "Plan":
  """Everything `chinchax plan` prints, as a Plan."""
  for name, x in (("--flops", C), ("--params", N), ("--tokens", D),
                  ("--unique-tokens", U), ("--inference-tokens", T)):
    _check_positive(name, x)
  if level is not None:
    intervals.check_level(level, "--ci")
  for what, x, ok in (("--unique-tokens", U, law.predicts_loss or law.data_constrained),
                      ("--inference-tokens", T, law.predicts_loss)):
    if x is not None and not ok:
      raise UserError(f"{what} needs a law that predicts losses; {law.source or 'this law'} "
                      f"comes from Approach {law.approach} (N and D only): fit Approach 3")
  budget, warnings = resolve_budget(law, C=C, N=N, D=D)
  C = budget["C"]
  pair = (budget["N"], budget["D"]) if budget["N"] is not None else None
  best = compute_optimal(law, C, level)
  notes = [law.doc["plan_note"]] if law.doc.get("plan_note") else []
  if not law.predicts_loss:
    notes.append(f"this law comes from Approach {law.approach}: it plans N and D and predicts "
                 "no loss (fit Approach 3 for losses)")
  result: dict[str, Any] = {
      "law": _law_summary(law),
      "budget": budget,
      "level": law.ci_level if level is None else level,
      "optimum": best,
      "given": gap(law, *pair, level) if pair else None,
      "data_constrained": None,
      "inference": None,
  }
  N_q, D_q = pair if pair else (best["N"], best["D"])
  result["extrapolation"], more = extrapolation_lib.extrapolation(law, N_q, D_q, C, level)
  warnings += more
  warnings += sanity(N_q, D_q)
  if U is not None:
    result["data_constrained"], more = data_constrained_plan(law, C, U, pair)
    warnings += more
    if result["data_constrained"]["source"] == "published":
      notes.append("R_D* and R_N* are the published values of Muennighoff et al. 2023 (C4): "
                   "this law has no fitted ones (fit runs with a unique-tokens column U)")
  if T is not None:
    result["inference"] = inference.optimum(C, T, law.theta)
  result["notes"] = notes
  result["warnings"] = warnings
  return Plan(result)


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
  """A plan: `to_dict()` is its JSON (what `chinchax plan --json` prints), `str()` its table."""

  doc: dict[str, Any]

  def __getitem__(self, key: str):
    return self.doc[key]

  @property
  def N(self) -> float:
    return (self.doc["given"] or self.doc["optimum"])["N"]

  @property
  def D(self) -> float:
    return (self.doc["given"] or self.doc["optimum"])["D"]

  @property
  def C(self) -> float:
    return self.doc["budget"]["C"]

  @property
  def loss(self) -> float | None:
    return (self.doc["given"] or self.doc["optimum"])["loss"]

  @property
  def warnings(self) -> list[str]:
    return list(self.doc["warnings"])

  def to_dict(self) -> dict[str, Any]:
    return json.loads(json.dumps(self.doc))

  def to_json(self) -> str:
    return json.dumps(self.doc, indent=2, allow_nan=False)

  def __str__(self) -> str:
    from chinchax.scaling.plan import text as plan_text  # pylint: disable=g-import-not-at-top
    return plan_text.render(self.doc)
