"""How well a law forecasts: each approach refitted without the largest budget (and without
the largest two, where at least MIN_BUDGETS_LEFT budgets remain) predicts the largest one.

A law is used to extrapolate (a plan 10-1000x beyond the sweep), so every fit scores the one
extrapolation its own data can check, as Czech et al. (2026) score methods by leaving a
budget out and Marin pre-registers a forecast before a large run. The refits are point fits
(no bootstrap): the cost is one more fit per approach and hold-out.

The truth a forecast is scored against comes from the held-out budget alone, with no law: a
least-squares parabola in log N through its lowest measured run and up to HALF_WINDOW sizes
either side of it (the vertex: N* and the loss there; local, so a profile that is not a
parabola far from its minimum does not bend it). That minimum is itself uncertain: its
relative standard error (`N_rel_sd`, from the loss noise the budgets' local parabolas leave,
pooled) says how much of a miss is the reference's own noise. When the lowest run is the budget's smallest or largest,
the reference is that run and is flagged `at_edge` (the true minimum lies beyond it).
Errors are signed ratios, predicted / reference − 1. Approaches 1 and 2 are allocation laws
and forecast N* only; Approach 3 forecasts N* and the loss.
"""

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.envelope import fit as envelope
from chinchax.scaling.isoflop import fit as isoflop
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.numerics import optimum as opt
from chinchax.scaling.runs.table import Runs, budget_groups

MIN_BUDGETS_LEFT = 3  # a refit on fewer budgets has no slope worth scoring
HALF_WINDOW = 2  # the reference parabola: the lowest run and up to 2 sizes either side
# A forecast = (N*(C), loss at N*(C) or None) of a law refitted to some runs.
Refit = Callable[[Runs], Callable[[float], tuple[float, float | None]]]


def _window(N, loss) -> tuple[np.ndarray, np.ndarray, int]:
  """log N and loss of a budget's lowest run and up to HALF_WINDOW sizes either side, and
  where the lowest run sits among all the budget's sizes (0, inside, or -1 for the end)."""
  order = np.argsort(N)
  x, L = np.log(np.asarray(N, np.float64)[order]), np.asarray(loss, np.float64)[order]
  i = int(np.argmin(L))
  near = slice(max(i - HALF_WINDOW, 0), i + HALF_WINDOW + 1)
  return x[near], L[near], (0 if i == 0 else -1 if i == len(L) - 1 else 1)


def noise_sd(runs: Runs, groups) -> float | None:
  """The loss noise the budgets' local parabolas leave, pooled (None: no degrees left)."""
  ss, dof = 0.0, 0
  for g in groups:
    x, L, _ = _window(runs.N[g], runs.loss[g])
    if len(L) > 3:
      ss += float(np.sum((np.polyval(np.polyfit(x, L, 2), x) - L)**2))
      dof += len(L) - 3
  return float(np.sqrt(ss / dof)) if dof else None


def reference(N, loss, sd: float | None = None) -> dict[str, Any]:
  """The held-out budget's own minimum: N*, its loss, whether it lies at an end, and the
  relative standard error of that N* for loss noise `sd` (the delta method on the parabola)."""
  x, L, where = _window(N, loss)
  i = int(np.argmin(L))
  if where != 1 or len(L) < 3:
    return {"N": float(np.exp(x[i])), "loss": float(L[i]), "at_edge": True, "N_rel_sd": None}
  X = np.stack([x**2, x, np.ones_like(x)], axis=1)
  p2, p1, p0 = np.linalg.lstsq(X, L, rcond=None)[0]
  if p2 <= 0:  # noise bent the window's parabola over: the lowest run is the estimate
    return {"N": float(np.exp(x[i])), "loss": float(L[i]), "at_edge": False, "N_rel_sd": None}
  x_star = -p1 / (2 * p2)
  rel_sd = None
  if sd is not None:
    grad = np.array([p1 / (2 * p2**2), -1 / (2 * p2), 0.0])  # of x* = -p1/(2 p2)
    rel_sd = float(sd * np.sqrt(grad @ np.linalg.pinv(X.T @ X) @ grad))  # sd of log N*
  return {"N": float(np.exp(x_star)), "loss": float(p0 + p1 * x_star + p2 * x_star**2),
          "at_edge": False, "N_rel_sd": rel_sd}


def _score(predict, C: float, ref: dict) -> dict[str, Any]:
  N, L = predict(C)
  return {"N": float(N), "loss": None if L is None else float(L),
          "N_error": float(N / ref["N"] - 1),
          "loss_error": None if L is None else float(L / ref["loss"] - 1)}


def backtest(runs: Runs, refits: Mapping[str, Refit]) -> dict[str, Any] | None:
  """law.json's `backtest` block; None when the runs have fewer than MIN_BUDGETS_LEFT + 1
  budgets. `refits`: per approach, how to fit it to a subset of the runs."""
  groups = budget_groups(runs)
  if len(groups) < MIN_BUDGETS_LEFT + 1:
    return None
  C_K = [float(np.exp(np.mean(np.log(runs.C[g])))) for g in groups]
  ref = reference(runs.N[groups[-1]], runs.loss[groups[-1]], noise_sd(runs, groups))
  holdouts = []
  for dropped in (1, 2):
    if len(groups) - dropped < MIN_BUDGETS_LEFT:
      break
    keep = np.ones(len(runs), bool)
    for g in groups[-dropped:]:
      keep[g] = False
    entry = {"dropped": dropped, "fitted_on": [C_K[0], C_K[-1 - dropped]], "C": C_K[-1],
             "reference": ref, "approaches": {}}
    for name, refit in refits.items():
      try:
        entry["approaches"][name] = _score(refit(runs.subset(keep)), C_K[-1], ref)
      except (UserError, ValueError, FloatingPointError, np.linalg.LinAlgError) as e:
        entry["approaches"][name] = {"error": str(e)}
    holdouts.append(entry)
  return {"fitted": [C_K[0], C_K[-1]], "budgets": len(groups), "holdouts": holdouts}


def only(bt: dict[str, Any] | None, approaches: Sequence[str]) -> dict[str, Any] | None:
  """`bt` (a `backtest` block) with only `approaches`' scores: refits made for approaches the
  fit then skipped drop out, as if `backtest` had been given the others alone."""
  if bt is None:
    return None
  return {**bt, "holdouts": [
      {**h, "approaches": {k: v for k, v in h["approaches"].items() if k in approaches}}
      for h in bt["holdouts"]]}


def refits(approaches: Sequence[str], delta: float,
           approach2_method: str = "auto") -> dict[str, Refit]:
  """The point fit of each approach, as the pipeline fits it (Approach 2 by the method the
  fit used), for `backtest`."""
  def three(r: Runs):
    f = parametric.fit_parametric(r.N, r.D, r.loss, delta=delta)
    th = np.array([f.E, f.A, f.B, f.alpha, f.beta])

    def at(C):
      with np.errstate(invalid="ignore", over="ignore"):  # no law (alpha < 0): nan, no miss
        return float(opt.optimum(C, th)[0]), float(opt.optimal_loss(C, th))
    return at

  def allocation(fit_fn):
    def refit(r: Runs):
      with warnings.catch_warnings():  # the full fit's entry already carries its warnings
        warnings.simplefilter("ignore")
        f = fit_fn(r)
      return lambda C: (float(f.N_star(C)), None)
    return refit

  every = {"3": three,
           "2": allocation(lambda r: isoflop.fit_isoflop(r, method=approach2_method)),
           "1": allocation(envelope.fit_envelope)}
  return {k: every[k] for k in approaches}
