"""Assembling a law.json dict (scaling.law.schema) from fitted numbers.

`build_law` takes Approach 3's parametric law (or its nesting form, with gamma), `build_power_law` an allocation law
N* = k_N·C^a, D* = k_D·C^b (Approach 1 or 2). Both store the point fit, percentile intervals
at `ci_level` (`ci`), the allocation table from the smallest fitted budget to 10x the
largest, each row flagged `extrapolated` with `beyond_fit` (how many times outside the fitted
budgets) (`optimal`; TABLE_BUDGETS when the fitted range is unknown), and
the bootstrap draws rounded to 7 significant digits, so that an interval of N*(C), D*(C) or
the loss can be computed at *any* budget and any level later (`bootstrap`).
"""

import datetime
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from chinchax import versions
from chinchax.scaling.law import schema
from chinchax.scaling.numerics import optimum as opt
from chinchax.scaling.numerics import intervals, power

# Budgets at which `optimal.tokens_per_param` is tabulated (tokens/param drifts with C when
# a != b, so one number would mislead).
TABLE_BUDGETS: tuple[float, ...] = (1e18, 1e20, 1e22, 1e24)
DEFAULT_CI = 0.9


def _round7(x: float) -> float:
  return float(f"{x:.7g}")


def _range(x) -> list[float] | None:
  if x is None:
    return None
  x = np.asarray(x, np.float64).ravel()
  return [float(x.min()), float(x.max())] if x.size else None


def plain(x: Any) -> Any:
  """JSON-ready copy of free-form results: numpy → Python, non-finite floats → None."""
  if isinstance(x, Mapping):
    return {str(k): plain(v) for k, v in x.items()}
  if isinstance(x, (list, tuple, np.ndarray)):
    return [plain(v) for v in x]
  if isinstance(x, np.generic):
    x = x.item()
  if isinstance(x, float) and not math.isfinite(x):
    return None
  return x


def _usable(samples, form: str) -> tuple[np.ndarray, int]:
  """Rows that are a law (finite; A, B, alpha, beta > 0, or a, b > 0), and how many were not."""
  k = len(schema.COLUMNS[form])
  samples_Sxk = np.asarray(samples, np.float64)
  if samples_Sxk.ndim != 2 or samples_Sxk.shape[1] != k:
    raise ValueError(f"samples must have shape (n, {k}), got {samples_Sxk.shape}")
  positive = samples_Sxk[:, 1:] if form in schema.LOSS_FORMS else samples_Sxk[:, :2]
  keep = np.all(np.isfinite(samples_Sxk), axis=1) & np.all(positive > 0, axis=1)
  rows = samples_Sxk[keep]
  if len(rows):
    rows = np.reshape([_round7(x) for x in rows.ravel().tolist()], rows.shape)
  return rows, int((~keep).sum())


def table_budgets(C_range) -> tuple[float, ...]:
  """The allocation table's budgets: the fitted range's ends and one decade past it (a plan
  further out is the planner's, with its warning); TABLE_BUDGETS when the range is unknown."""
  if not C_range:
    return TABLE_BUDGETS
  # The ends as fitted, not rounded: a sweep's largest runs fall a step short of its nominal
  # budget (4.99994e11 for 5e11), and a rounded end would read as past the fit.
  lo, hi = (float(c) for c in C_range)
  return tuple(sorted({lo, hi, float(f"{10 * hi:.2g}")}))


def beyond(C: float, C_range) -> float | None:
  """How many times C lies outside the fitted range (1 inside it); None when unknown. A plan
  measures N and D against the runs' ranges with it too (scaling/plan/extrapolation.py)."""
  if not C_range:
    return None
  return float(max(1.0, C_range[0] / C, C / C_range[1]))


def _table(form: str, values: np.ndarray, rows, budgets, level, C_range=None) -> list[dict]:
  P = power.from_theta(values) if form in schema.LOSS_FORMS else values
  P_S = None
  if rows is not None and len(rows):
    P_S = power.from_theta(rows) if form in schema.LOSS_FORMS else rows
  table = []
  for c in budgets:
    N, D = (float(v) for v in power.optimum(c, P))
    row = {"C": float(c), "N": N, "D": D, "tokens_per_param": D / N, "loss": None}
    factor = beyond(c, C_range)  # 1.0: inside the fitted budgets; null: range unknown
    row["extrapolated"] = None if factor is None else factor > 1.0 + 1e-9
    row["beyond_fit"] = factor
    if form in schema.LOSS_FORMS:
      row["loss"] = float(opt.optimal_loss(c, values))
    if P_S is not None:
      N_S, D_S = power.optimum(c, P_S)
      row["N_ci"], row["D_ci"] = intervals.interval(N_S, level), intervals.interval(D_S, level)
      if form in schema.LOSS_FORMS:
        row["loss_ci"] = intervals.interval(opt.optimal_loss(c, rows), level)
    table.append(row)
  return table


def assemble(form: str, values: Sequence[float], *, approach: str, samples=None,
             seed=None, ci_level: float = DEFAULT_CI, bootstrap_kind: str = "pairs",
             fit: Mapping[str, Any] | None = None,
             approaches: Mapping[str, Mapping[str, Any]] | None = None,
             recommended: Mapping[str, str] | None = None, warnings: Sequence[str] = (),
             notes: Sequence[str] = (), data_constrained: Mapping[str, Any] | None = None,
             params_convention: str = "total", flops_convention: str = "6ND",
             loss_unit: str = "nats/token", N=None, D=None, C=None,
             inputs: Sequence[str] = (), budgets: Sequence[float] | None = None,
             extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """The validated law.json dict of either form (the keys are scaling.law.schema's)."""
  names = schema.COLUMNS[form]
  values = np.asarray(values, np.float64)
  law = {"form": form, **{k: float(v) for k, v in zip(names, values)}, "approach": approach}
  if form in schema.LOSS_FORMS:
    a, b = (float(v) for v in opt.exponents(values))
    optimal = {"a": a, "b": b, "G": float(opt.G(values))}
  else:
    optimal = {"a": float(values[0]), "b": float(values[1])}

  bootstrap, ci, rows = None, None, None
  if samples is not None:
    rows, dropped = _usable(samples, form)
    if len(rows):
      ci = {"level": float(ci_level)}
      for i, name in enumerate(names):
        ci[name] = intervals.holding(intervals.interval(rows[:, i], ci_level), values[i])
      if form in schema.LOSS_FORMS:
        a_S, b_S = opt.exponents(rows)
        ci["a"] = intervals.holding(intervals.interval(a_S, ci_level), optimal["a"])
        ci["b"] = intervals.holding(intervals.interval(b_S, ci_level), optimal["b"])
    bootstrap = {"n": int(len(rows)), "dropped": dropped, "seed": plain(seed),
                 "kind": bootstrap_kind, "columns": list(names), "samples": rows.tolist()}
  if N is not None and D is not None and C is None:
    C = 6.0 * np.asarray(N, np.float64) * np.asarray(D, np.float64)
  C_range = _range(C)
  optimal["tokens_per_param"] = _table(form, values, rows, budgets or table_budgets(C_range),
                                       ci_level, C_range)
  points = None
  for x in (N, D, C):
    if x is not None:
      points = int(np.asarray(x).size)
  fit = dict(fit or {})
  fit_block = {k: plain(fit.get(k)) for k in ("delta", "starts", "objective", "starts_at_best")}
  fit_block["points"] = plain(fit["points"]) if fit.get("points") is not None else points
  fit_block["warnings"] = [str(w) for w in fit.get("warnings", ())]
  doc = {
      "schema": schema.SCHEMA,
      "law": law,
      "ci": ci,
      "optimal": optimal,
      "approaches": plain(approaches or {}),
      "recommended": dict(recommended or {"approach": approach,
                                          "why": f"the law of Approach {approach}"}),
      "warnings": [str(w) for w in warnings],
      "notes": [str(n) for n in notes],
      "data_constrained": plain(data_constrained),
      "conventions": {"params": params_convention, "flops": flops_convention,
                      "loss": loss_unit},
      "fit": fit_block,
      "data": {"points": points, "N": _range(N), "D": _range(D), "C": _range(C)},
      "bootstrap": bootstrap,
      "provenance": {
          "chinchax": versions.chinchax(),
          "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
              timespec="seconds"),
          "inputs": [os.fspath(p) for p in inputs],
      },
  }
  doc.update(plain(extra or {}))
  return schema.validate_law(doc)


def build_law(*, E: float, A: float, B: float, alpha: float, beta: float,
              gamma: float | None = None, delta: float | None = None, n_starts: int | None = None,
              objective: float | None = None, n_at_best: int | None = None,
              n_points: int | None = None, fit_warnings: Sequence[str] = (),
              **kw) -> dict[str, Any]:
  """The law.json dict of Approach 3's law (validated); keywords as `assemble`.

  gamma: the nesting form's outer power (law.form NESTED); None for the law itself.
  samples: bootstrap draws of [E, A, B, alpha, beta] (and gamma), shape (n, 5 or 6), or None. Rows that are no
    law (a non-finite value from a failed refit, or A, B, alpha or beta not positive: a
    resample whose points show no decrease in N or D) are dropped and counted in
    `bootstrap.dropped`; many dropped rows mean the data pin the law down poorly.
  N, D, C: the fitted points (C defaults to 6·N·D); only their count and ranges are stored.
  """
  fit = {"delta": delta, "starts": n_starts, "objective": objective,
         "starts_at_best": n_at_best, "points": n_points, "warnings": fit_warnings}
  kw.setdefault("approach", "3")
  if gamma is not None:
    return assemble(schema.NESTED, [E, A, B, alpha, beta, gamma], fit=fit, **kw)
  return assemble(schema.PARAMETRIC, [E, A, B, alpha, beta], fit=fit, **kw)


def build_power_law(*, a: float, b: float, log_kN: float, log_kD: float, approach: str = "2",
                    **kw) -> dict[str, Any]:
  """The law.json dict of an allocation law from Approach 1 or 2 (samples: (n, 4) rows of
  [a, b, log_kN, log_kD]); keywords as `assemble`."""
  return assemble(schema.POWER, [a, b, log_kN, log_kD], approach=approach, **kw)
