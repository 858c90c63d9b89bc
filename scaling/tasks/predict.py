"""A task's loss and accuracy at (N, D) from its block of tasks.json: step 1's law, then step
2's sigmoid, each bootstrap draw through both (one draw is one consistent pair of laws), the
percentile interval of each (scaling.numerics.intervals), and the flags a reader needs:
`extrapolated` when the predicted loss lies outside the losses step 2 was fitted on (the
accuracy then comes from the sigmoid's form, not from evaluations), `beyond` how many times
N and D lie outside step 1's runs."""

import math

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.numerics import intervals
from chinchax.scaling.tasks import link


def _law(step1: dict, N, D):
  return step1["E"] + step1["A"] / N**step1["alpha"] + step1["B"] / D**step1["beta"]


def at(entry: dict, N: float, D: float, level: float) -> dict:
  """{loss, loss_interval, accuracy, accuracy_interval, extrapolated, loss_range, beyond}."""
  for name, x in (("N", N), ("D", D)):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not (
        math.isfinite(x) and x > 0):
      raise UserError(f"{name} must be a positive finite number, got {x!r}")
  s1, s2 = entry["step1"], entry["step2"]
  L = float(_law(s1, N, D))
  sig = np.array([s2[k] for k in link.COLUMNS], np.float64)
  acc = float(link.predict(sig[None], L)[0])
  out = {"loss": L, "loss_interval": None, "accuracy": acc, "accuracy_interval": None}
  boot = entry["bootstrap"]
  if boot is not None and boot["samples"]:
    d = np.asarray(boot["samples"], np.float64)
    with np.errstate(over="ignore"):
      L_S = d[:, 0] + d[:, 1] / N**d[:, 3] + d[:, 2] / D**d[:, 4]
    acc_S = link.each(d[:, 5:], L_S)
    out["loss_interval"] = intervals.holding(intervals.interval(L_S, level), L)
    out["accuracy_interval"] = intervals.holding(intervals.interval(acc_S, level), acc)
  lo, hi = s2["loss_range"]
  out["extrapolated"] = not lo <= L <= hi
  out["loss_range"] = [lo, hi]
  beyond = {}
  for name, x in (("N", N), ("D", D)):
    a, b = s1["data"][name]
    if not a <= x <= b:
      beyond[name] = round(float(max(a / x, x / b)), 3)
  out["beyond"] = beyond
  return out

