"""Inference-aware sizing (Sardana & Frankle 2023, "Beyond Chinchilla-Optimal").

A model that will serve T inference tokens costs 6·N·D training FLOPs plus 2·N·T inference
FLOPs. For the quality of the Chinchilla-optimal model at budget C, ℓ = L(N*(C), D*(C)),
the inference-aware model solves

    minimise 6·N·D + 2·N·T   subject to   E + A/N^alpha + B/D^beta = ℓ.

Write the reducible loss r = ℓ - E as a share s ∈ (0, 1) spent on parameters:
A/N^alpha = s·r and B/D^beta = (1 - s)·r, so

    N(s) = (A / (s·r))^(1/alpha),        D(s) = (B / ((1 - s)·r))^(1/beta),

which keeps every candidate exactly on the iso-loss curve. The nesting form
E + (A/N^alpha + B/D^beta)^gamma has the same iso-loss curves, at r = (ℓ - E)^(1/gamma). The total is smooth in
z = logit(s); a grid over z then bounded Brent (scaling.numerics.optimum.argmin_1d) finds the minimum.
With T = 0 it is the Chinchilla optimum itself; with T > 0 the model shrinks and trains longer.
"""

import math

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.scaling.numerics import optimum as opt

_LOGIT_BRACKET = 30.0  # s from 1e-13 to 1 - 1e-13


def _costs(N: float, D: float, T: float) -> dict[str, float]:
  train, infer = 6.0 * N * D, 2.0 * N * T
  return {"N": N, "D": D, "tokens_per_param": D / N, "train_flops": train,
          "inference_flops": infer, "total_flops": train + infer}


def optimum(C: float, T: float, theta) -> dict[str, object]:
  """Chinchilla-optimal vs inference-aware model for budget C and T inference tokens.

  Computed in logs: with extreme exponents the reducible loss r falls below E's rounding
  (ℓ - E is 0) and (A/(s·r))^(1/alpha) leaves the float range, yet log N(s) stays finite.
  """
  theta = np.asarray(theta, np.float64)
  E, A, B, alpha, beta = (float(v) for v in theta[:5])
  g = float(opt.gamma(theta))
  N0, D0 = (float(v) for v in opt.optimum(C, theta))
  log_rN = math.log(A) - alpha * math.log(N0)  # log A/N0^alpha
  log_rD = math.log(B) - beta * math.log(D0)
  log_r = float(np.logaddexp(log_rN, log_rD))
  target = E + math.exp(g * log_r)

  def log_on_curve(z: float) -> tuple[float, float]:
    log_s, log_1ms = -float(np.logaddexp(0.0, -z)), -float(np.logaddexp(0.0, z))
    return (math.log(A) - log_s - log_r) / alpha, (math.log(B) - log_1ms - log_r) / beta

  def log_total(z: float) -> float:
    log_N, log_D = log_on_curve(z)
    log_train = math.log(6.0) + log_D
    if T > 0:
      return log_N + float(np.logaddexp(log_train, math.log(2.0 * T)))
    return log_N + log_train

  z0 = log_rN - log_rD  # logit of the parameters' share at the Chinchilla point, as a start
  lo, hi = min(-_LOGIT_BRACKET, z0 - 1.0), max(_LOGIT_BRACKET, z0 + 1.0)
  z, at_edge = opt.argmin_1d(log_total, lo, hi)
  log_N, log_D = log_on_curve(z)
  if max(log_N, log_D) > 700.0:  # exp would overflow: no finite model holds that loss
    raise UserError(f"the inference-aware model for this law (alpha={fmt.num(alpha)}, "
                    f"beta={fmt.num(beta)}) at C={fmt.num(C)} lies beyond 1e300 parameters or "
                    "tokens; "
                    "check the law's exponents")
  chinchilla = _costs(N0, D0, T)
  aware = _costs(math.exp(log_N), math.exp(log_D), T)
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
