"""Inference-aware sizing (Sardana & Frankle 2023, "Beyond Chinchilla-Optimal").

A model that will serve T inference tokens costs 6·N·D training FLOPs plus 2·N·T inference
FLOPs. For the quality of the Chinchilla-optimal model at budget C, ℓ = L(N*(C), D*(C)),
the inference-aware model solves

    minimise 6·N·D + 2·N·T   subject to   E + A/N^alpha + B/D^beta = ℓ.

Write the reducible loss r = ℓ - E as a share s ∈ (0, 1) spent on parameters:
A/N^alpha = s·r and B/D^beta = (1 - s)·r, so

    N(s) = (A / (s·r))^(1/alpha),        D(s) = (B / ((1 - s)·r))^(1/beta),

which keeps every candidate exactly on the iso-loss curve. The total is smooth in
z = logit(s); a grid over z then bounded Brent (scaling.optimum.argmin_1d) finds the minimum.
With T = 0 it is the Chinchilla optimum itself; with T > 0 the model shrinks and trains longer.
"""

import numpy as np
from scipy import special

from chinchax.scaling import optimum as opt

_LOGIT_BRACKET = 30.0  # s from 1e-13 to 1 - 1e-13


def _costs(N: float, D: float, T: float) -> dict[str, float]:
  train, infer = 6.0 * N * D, 2.0 * N * T
  return {"N": N, "D": D, "tokens_per_param": D / N, "train_flops": train,
          "inference_flops": infer, "total_flops": train + infer}


def optimum(C: float, T: float, theta) -> dict[str, object]:
  """Chinchilla-optimal vs inference-aware model for budget C and T inference tokens."""
  theta = np.asarray(theta, np.float64)
  E, A, B, alpha, beta = (float(v) for v in theta)
  N0, D0 = (float(v) for v in opt.optimum(C, theta))
  target = float(opt.optimal_loss(C, theta))
  r = target - E

  def on_curve(z: float) -> tuple[float, float]:
    s = float(special.expit(z))
    return (A / (s * r))**(1.0 / alpha), (B / ((1.0 - s) * r))**(1.0 / beta)

  def log_total(z: float) -> float:
    N, D = on_curve(z)
    return float(np.log(6.0 * N * D + 2.0 * N * T))

  z0 = float(special.logit((A / N0**alpha) / r))  # the Chinchilla point, as a start
  lo, hi = min(-_LOGIT_BRACKET, z0 - 1.0), max(_LOGIT_BRACKET, z0 + 1.0)
  z, at_edge = opt.argmin_1d(log_total, lo, hi)
  chinchilla = _costs(N0, D0, T)
  aware = _costs(*on_curve(z), T)
  saving = chinchilla["total_flops"] - aware["total_flops"]
  return {
      "inference_tokens": float(T),
      "loss": target,
      "chinchilla": chinchilla,
      "inference_optimal": aware,
      "saving_flops": saving,
      "saving_fraction": saving / chinchilla["total_flops"],
      "at_edge": bool(at_edge),
  }
