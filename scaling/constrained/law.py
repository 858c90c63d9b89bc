"""Compute-optimal training when only U unique tokens exist (Muennighoff et al. 2023).

"Scaling Data-Constrained Language Models" replaces D and N in the Chinchilla law by their
effective values. With D training tokens drawn from U unique ones:

    U_D = min(D, U)                     R_D = D/U_D - 1          (repeated epochs)
    D'  = U_D + U_D·R_D*·(1 - exp(-R_D/R_D*))
    U_N = min(N, N*(U_D))               R_N = N/U_N - 1          (excess parameters)
    N'  = U_N + U_N·R_N*·(1 - exp(-R_N/R_N*))
    L   = E + A/N'^alpha + B/D'^beta

N*(U_D) is the compute-optimal model for U_D tokens under the same law
(scaling.numerics.optimum.optimal_params_for_tokens). Repeated tokens are worth less and less: D'
saturates at U_D·(1 + R_D*); parameters beyond N*(U_D) likewise saturate at U_N·(1 + R_N*).
R_D* = 15.387756 and R_N* = 5.309743 are the paper's fit (quoted as 15.4 and 5.3; the
digits are those of the authors' released fit). They were fitted together with the paper's own
E, A, B, alpha, beta on C4; reusing them with another law is the paper's recipe, not a refit.

The best (N, D) for a budget C = 6ND is a 1-D problem over log N with D = C/(6N). The loss
has kinks (at D = U and at N = N*(U_D)), so `optimum` scans a dense grid before polishing
with bounded Brent (scaling.numerics.optimum.argmin_1d).

`dc_fit.fit_data_constrained` refits R_D* and R_N* on one's own runs that vary the unique pool U,
holding the base law theta fixed (the paper's second stage); scaling.constrained.fit holds the fit,
the joint fit of all seven numbers and the bootstrap. R_D* is identified only by runs that
repeat data (D > U), R_N* only by runs with N > N*(U_D).
"""

import numpy as np


from chinchax.scaling.numerics import optimum as opt

R_D_STAR = 15.387756
R_N_STAR = 5.309743

# Half-width, in log N, of the bracket around the unconstrained N*(C): e^10 ≈ 2.2e4 either way.
_LOG_BRACKET = 10.0


def effective_tokens(D, U, R_D_star: float = R_D_STAR) -> np.ndarray:
  """D' for D tokens drawn from U unique ones."""
  D, U = np.asarray(D, np.float64), np.asarray(U, np.float64)
  U_D = np.minimum(D, U)
  R_D = D / U_D - 1.0
  return U_D + U_D * R_D_star * -np.expm1(-R_D / R_D_star)


def effective_params(N, D, U, theta, R_N_star: float = R_N_STAR) -> np.ndarray:
  """N' for an N-parameter model trained on D tokens from U unique ones (one law `theta`)."""
  N, D, U = (np.asarray(x, np.float64) for x in (N, D, U))
  U_N = np.minimum(N, opt.optimal_params_for_tokens(np.minimum(D, U), theta))
  R_N = N / U_N - 1.0
  return U_N + U_N * R_N_star * -np.expm1(-R_N / R_N_star)


def loss(N, D, U, theta, R_D_star: float = R_D_STAR, R_N_star: float = R_N_STAR):
  """Muennighoff et al.'s L(N, D, U) for one law `theta` (shape (5,), or (6,) with gamma)."""
  N_eff = effective_params(N, D, U, theta, R_N_star)
  D_eff = effective_tokens(D, U, R_D_star)
  return opt.loss(N_eff, D_eff, theta)


def optimum(C: float, U: float, theta, R_D_star: float = R_D_STAR,
            R_N_star: float = R_N_STAR) -> dict[str, float | bool]:
  """The (N, D) minimising the data-constrained loss at budget C = 6ND with U unique tokens.

  Returns N, D, epochs D/U, the effective N' and D', the loss, and `at_edge` (the minimum
  hit the search bracket: the answer is then a bound, not an optimum).
  """
  theta = np.asarray(theta, np.float64)
  log_N0 = float(np.log(opt.optimum(C, theta)[0]))

  def f(log_N: float) -> float:
    N = np.exp(log_N)
    return float(loss(N, C / (6.0 * N), U, theta, R_D_star, R_N_star))

  log_N, at_edge = opt.argmin_1d(f, log_N0 - _LOG_BRACKET, log_N0 + _LOG_BRACKET)
  N = float(np.exp(log_N))
  D = C / (6.0 * N)
  return {
      "N": N,
      "D": D,
      "epochs": D / U,
      "N_effective": float(effective_params(N, D, U, theta, R_N_star)),
      "D_effective": float(effective_tokens(D, U, R_D_star)),
      "loss": f(log_N),
      "at_edge": bool(at_edge),
  }
