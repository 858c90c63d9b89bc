"""The planner: from a law and what the user knows, the model and token count to train.

Inputs are any of C (training FLOPs), N (parameters), D (tokens), with C = 6·N·D:
  * C alone        → the compute-optimal N*(C), D*(C) (scaling.optimum).
  * N alone        → the budget C at which N is compute-optimal, so D = D*(C);
    D alone likewise.
  * two of N, D, C → the third, then how far that pair is from the optimum at the same C:
    the loss gap L(N, D) - L(N*, D*) and the *compute-equivalent* budget C_eq at which the
    optimal model reaches L(N, D) (C_eq/C is the pair's compute efficiency).
  * all three      → N and D rule; if C is more than 10% away from 6ND it is replaced by 6ND.
Optional: U unique tokens (scaling.data_constrained) and T inference tokens
(scaling.inference). Intervals are percentile bootstrap bands from the law's samples.

`plan` returns one JSON-ready dict; `warnings` holds what a user must not miss.
"""

import math
from typing import Any

from chinchax.scaling import conventions
from chinchax.scaling import data_constrained
from chinchax.scaling import inference
from chinchax.scaling import optimum as opt
from chinchax.scaling.errors import UserError
from chinchax.scaling.law import ScalingLaw

MAX_EPOCHS = 4.0  # Muennighoff et al.: up to ~4 epochs cost about as little as fresh data
EXTRAPOLATION_WARN = 100.0  # × the largest fitted budget


def _check_positive(name: str, x: float | None) -> None:
  if x is not None and not (math.isfinite(x) and x > 0):
    raise UserError(f"{name} must be a positive finite number, got {x!r}")


def _band(pair) -> list[float] | None:
  return None if pair is None else [float(pair[0]), float(pair[1])]


def resolve_budget(law: ScalingLaw, C=None, N=None, D=None) -> tuple[dict[str, Any], list[str]]:
  """Complete (N, D, C) from what was given; returns (budget dict, warnings)."""
  warnings = []
  if N is not None and D is not None:
    C6 = conventions.six_nd(N, D)
    if C is not None and not conventions.is_close_to_6nd(N, D, C, rtol=0.1):
      warnings.append(f"--flops={C:.4g} differs from 6·N·D = {C6:.4g} by "
                      f"{abs(C / C6 - 1):.0%}; using the consistent value C = {C6:.4g}")
    return {"C": C6, "N": N, "D": D, "source": "params,tokens"}, warnings
  if C is not None and N is not None:
    return {"C": C, "N": N, "D": C / (6.0 * N), "source": "flops,params"}, warnings
  if C is not None and D is not None:
    return {"C": C, "N": C / (6.0 * D), "D": D, "source": "flops,tokens"}, warnings
  if C is not None:
    return {"C": C, "N": None, "D": None, "source": "flops"}, warnings
  if N is not None:
    C = float(opt.budget_for_params(N, law.theta))
    return {"C": C, "N": None, "D": None, "source": "params"}, warnings
  if D is not None:
    C = float(opt.budget_for_tokens(D, law.theta))
    return {"C": C, "N": None, "D": None, "source": "tokens"}, warnings
  raise UserError("nothing to plan: give --flops=C, or --params/--tokens (one alone, or two "
                  "of --params/--tokens/--flops)")


def compute_optimal(law: ScalingLaw, C: float) -> dict[str, Any]:
  N, D = law.optimum(C)
  out = {"N": N, "D": D, "tokens_per_param": D / N, "loss": law.optimal_loss(C),
         "interval": None}
  if law.samples is not None:
    out["interval"] = {"level": law.ci_level}
    for q in ("N", "D", "tokens_per_param", "loss"):
      out["interval"][q] = _band(law.interval(q, C))
  return out


def gap(law: ScalingLaw, N: float, D: float) -> dict[str, Any]:
  """How far (N, D) is from the compute-optimal pair at the same C = 6ND."""
  C = conventions.six_nd(N, D)
  N_opt, _ = law.optimum(C)
  L, L_opt = law.predict(N, D), law.optimal_loss(C)
  C_eq = opt.budget_for_loss(L, law.theta)
  finite = math.isfinite(C_eq)
  return {"N": N, "D": D, "C": C, "tokens_per_param": D / N, "loss": L,
          "loss_gap": L - L_opt, "N_over_N_opt": N / N_opt,
          "compute_equivalent": C_eq if finite else None,
          "compute_efficiency": min(C_eq / C, 1.0) if finite else None}


def extrapolation(law: ScalingLaw, C: float) -> tuple[dict[str, Any] | None, list[str]]:
  if law.fitted_range is None:
    return None, []
  lo, hi = law.fitted_range
  out = {"fitted_C": [lo, hi], "beyond_largest": C / hi}
  warnings = []
  if C > EXTRAPOLATION_WARN * hi:
    band = law.interval("N", C)
    if band is None:
      width = "this law has no bootstrap samples, so no interval shows the uncertainty there"
    else:
      width = (f"the {law.ci_level:.0%} interval of N* there is {band[0]:.3g}–{band[1]:.3g} "
               f"(×{band[1] / band[0]:.2f} wide)")
      out["N_interval_ratio"] = band[1] / band[0]
    warnings.append(f"C = {C:.3g} is {C / hi:.3g}× beyond the largest fitted budget "
                    f"({hi:.3g} FLOPs): this is an extrapolation; {width}")
  return out, warnings


def data_constrained_plan(law: ScalingLaw, C: float, U: float,
                          pair: tuple[float, float] | None) -> tuple[dict[str, Any], list[str]]:
  warnings = []
  best = data_constrained.optimum(C, U, law.theta)
  N0, D0 = law.optimum(C)
  out = {
      "unique_tokens": U,
      "R_D_star": data_constrained.R_D_STAR,
      "R_N_star": data_constrained.R_N_STAR,
      "optimal": best,
      "chinchilla": {"N": N0, "D": D0, "epochs": D0 / U,
                     "loss": float(data_constrained.loss(N0, D0, U, law.theta))},
      "given": None,
  }
  if best["at_edge"]:
    warnings.append("the data-constrained optimum sits on the edge of the search bracket "
                    f"(N = {best['N']:.3g}); treat it as a bound")
  if pair is not None:
    N, D = pair
    out["given"] = {"N": N, "D": D, "epochs": D / U,
                    "loss": float(data_constrained.loss(N, D, U, law.theta))}
    if D / U > MAX_EPOCHS:
      warnings.append(f"D = {D:.3g} is {D / U:.1f} epochs of {U:.3g} unique tokens; "
                      f"beyond ~{MAX_EPOCHS:g} epochs repeated data loses value "
                      "(Muennighoff et al. 2023)")
  else:
    if D0 / U > MAX_EPOCHS:
      warnings.append(f"the compute-optimal D* = {D0:.3g} is {D0 / U:.1f} epochs of {U:.3g} "
                      f"unique tokens; beyond ~{MAX_EPOCHS:g} epochs repeated data loses value")
    if best["epochs"] > MAX_EPOCHS:
      warnings.append(f"the data-constrained optimum trains {best['epochs']:.1f} epochs of "
                      f"{U:.3g} unique tokens (its loss already discounts the repeats); "
                      "more unique data would lower the loss")
  return out, warnings


def plan(law: ScalingLaw, *, C: float | None = None, N: float | None = None,
         D: float | None = None, U: float | None = None,
         T: float | None = None) -> dict[str, Any]:
  """Everything `chinchax plan` prints, as one JSON-ready dict."""
  for name, x in (("--flops", C), ("--params", N), ("--tokens", D),
                  ("--unique-tokens", U), ("--inference-tokens", T)):
    _check_positive(name, x)
  budget, warnings = resolve_budget(law, C=C, N=N, D=D)
  C = budget["C"]
  pair = (budget["N"], budget["D"]) if budget["N"] is not None else None

  result: dict[str, Any] = {
      "law": {"source": law.source, "E": law.E, "A": law.A, "B": law.B,
              "alpha": law.alpha, "beta": law.beta, "a": law.a, "b": law.b, "G": law.G,
              "conventions": dict(law.conventions)},
      "budget": budget,
      "optimum": compute_optimal(law, C),
      "given": gap(law, *pair) if pair else None,
      "data_constrained": None,
      "inference": None,
  }
  result["extrapolation"], more = extrapolation(law, C)
  warnings += more
  if U is not None:
    result["data_constrained"], more = data_constrained_plan(law, C, U, pair)
    warnings += more
  if T is not None:
    result["inference"] = inference.optimum(C, T, law.theta)
  result["warnings"] = warnings
  return result
