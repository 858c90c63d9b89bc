"""Power laws of the optimal peak LR and batch across (N, D) points, with bootstrap intervals.

    ln h* = ln c + Σ_v e_v · ln v,     v in the chosen variables (N, D, or C = 6ND)

fitted by least squares to the points whose optimum was located (hparams_local: no `edge`,
no `flat`). The default forms: η* = c·N^p·D^q (StepLaw, Li et al. 2025) and B* = c·D^q in
tokens (StepLaw's batch law); `C` gives DeepSeek LLM's (Bi et al. 2024) forms.

Intervals: a residual bootstrap within each point. Each replicate refits every point's window
to its fitted losses plus its own residuals drawn with replacement (scaled by sqrt(n/(n-p)),
the least-squares residuals being smaller than the noise), so that a replicate's optima move as
much as the grid's noise moves them; the law is refitted to the replicate's optima; the
interval of each exponent and coefficient is the percentile interval of the replicates
(`scaling.numerics.intervals`). The replicates' (ln c, exponents) are kept (`draws`), so a
prediction at any (N, D) gets its own interval. No jax here.
"""

import math

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.hparams import local as hparams_local
from chinchax.scaling.numerics import fmt
from chinchax.scaling.numerics import intervals

VARS = {"N,D": ("N", "D"), "D,N": ("N", "D"), "N": ("N",), "D": ("D",), "C": ("C",)}


def variables(text: str, flag: str) -> tuple[str, ...]:
  key = text.replace(" ", "")
  if key not in VARS:
    raise UserError(f"{flag}={text!r} is not one of N,D | C | N | D")
  return VARS[key]


def form(name: str, vs: tuple[str, ...], unit: str = "") -> str:
  powers = " * ".join(f"{v}^{chr(ord('p') + i)}" for i, v in enumerate(vs))
  return f"{name} = c * {powers}" + (f"  ({unit})" if unit else "")


def _logs(fits, vs) -> np.ndarray:
  cols = {"N": [math.log(f.N) for f in fits], "D": [math.log(f.D) for f in fits],
          "C": [math.log(6 * f.N * f.D) for f in fits]}
  return np.column_stack([np.ones(len(fits))] + [cols[v] for v in vs])


def solve(X: np.ndarray, y: np.ndarray) -> np.ndarray | None:
  """(ln c, exponents) by least squares; None when the design does not determine them."""
  if len(y) < X.shape[1] or np.linalg.matrix_rank(X) < X.shape[1]:
    return None
  return np.linalg.lstsq(X, y, rcond=None)[0]


def needs(vs) -> str:
  if len(vs) == 1:
    return "points at 2 or more values of " + vs[0]
  return f"3 or more points that vary {' and '.join(vs)} independently"


def fit(fits, which: str, vs, *, bootstrap: int, ci: float, rng) -> dict:
  """The law of `which` ('lr' or 'batch') over the point fits, as hparams.json holds it."""
  axis = lambda f: f.lr if which == "lr" else f.batch
  used = [f for f in fits if axis(f).ok]
  warnings = []
  for f in fits:
    if not axis(f).ok:
      why = ", ".join(axis(f).flags) or "not located"
      warnings.append(f"{which} optimum at N={fmt.num(f.N)}, D={fmt.num(f.D)} left out of the "
                      f"law: {why}")
  X = _logs(used, vs)
  y = np.log([axis(f).opt for f in used]) if used else np.zeros(0)
  theta = solve(X, y) if used else None
  if theta is None:
    raise UserError(f"the {which} law {form('h*', vs)} needs {needs(vs)} whose optimum is "
                    f"located; {len(used)} of {len(fits)} points are ({'; '.join(warnings[:2])})")
  if len(used) == X.shape[1]:
    warnings.append(f"{which} law: {len(used)} points for {X.shape[1]} parameters, an exact "
                    "fit; nothing checks the form")
  draws = _bootstrap(used, which, X, bootstrap, rng)
  # A replicate whose optimum ran off to e^±700 (a window with almost no curvature) is no
  # law a float can hold: dropped, and counted in `bootstrap.replicates`.
  draws = draws[np.all(np.isfinite(draws), axis=1) & (np.abs(draws[:, 0]) < 700)]
  ci_of = {}
  if len(draws):
    vals = np.column_stack([np.exp(draws[:, 0]), draws[:, 1:]])
    for j, n in enumerate(["coef"] + list(vs)):
      ci_of[n] = intervals.interval(vals[:, j], ci)
  resid = y - X @ theta
  ranges = {v: [float(np.exp(X[:, 1 + i].min())), float(np.exp(X[:, 1 + i].max()))]
            for i, v in enumerate(vs)}
  return {
      "form": form("eta*" if which == "lr" else "B*", vs,
                   "peak LR" if which == "lr" else "tokens per batch"),
      "vars": list(vs), "coef": float(math.exp(theta[0])),
      "exponents": {v: float(theta[1 + i]) for i, v in enumerate(vs)},
      "ci": ci_of, "range": ranges, "points_used": len(used),
      "rms_log_residual": float(np.sqrt(np.mean(resid**2))),
      "bootstrap": {"replicates": int(len(draws)), "asked": int(bootstrap)},
      "draws": np.round(draws, 6).tolist(), "warnings": warnings,
  }


def _bootstrap(used, which: str, X: np.ndarray, n: int, rng) -> np.ndarray:
  out = []
  for _ in range(n):
    keep, y = [], []
    for i, f in enumerate(used):
      w = f.window
      dof = len(w.resid) - w.X.shape[1]
      scale = math.sqrt(len(w.resid) / dof) if dof > 0 else 0.0
      loss = w.fitted + scale * rng.choice(w.resid, size=len(w.resid), replace=True)
      off = hparams_local.refit(w, loss)[0 if which == "lr" else 1]
      if off is None:
        continue
      keep.append(i)
      y.append((w.x0 if which == "lr" else w.y0) + off)
    theta = solve(X[keep], np.array(y)) if keep else None
    if theta is not None:
      out.append(theta)
  return np.array(out).reshape(-1, X.shape[1])


def predict(law: dict, values: dict, ci: float | None = None) -> tuple[float, list | None]:
  """(the law's value at `values` {N, D, C}, its interval from the draws or None)."""
  vs = law["vars"]
  logs = np.array([1.0] + [math.log(values[v]) for v in vs])
  theta = np.array([math.log(law["coef"])] + [law["exponents"][v] for v in vs])
  log_value = float(logs @ theta)
  if not abs(log_value) < 700:
    raise UserError(f"the law {law['form']} gives e^{log_value:.4g} at "
                    + ", ".join(f"{v}={fmt.num(values[v])}" for v in vs) + ", beyond a float")
  value = math.exp(log_value)
  draws = np.asarray(law.get("draws") or [], float)
  if not len(draws):
    return value, None
  level = 0.9 if ci is None else ci
  log_preds = draws @ logs
  log_preds = log_preds[np.abs(log_preds) < 700]
  if not len(log_preds):
    return value, None
  return value, intervals.interval(np.exp(log_preds), level)
