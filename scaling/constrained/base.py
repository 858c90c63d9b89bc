"""Stage 1 of the data-constrained fit: the base law E + A/N^alpha + B/D^beta from the runs
the decay constants do not touch (Muennighoff et al. 2023, §A).

A run is a *base run* when it neither repeats data (D ≤ U) nor exceeds the compute-optimal
size for its unique tokens (N ≤ N*(min(D, U)) under the base law): its effective N' and D'
are N and D whatever R_D*, R_N*, so the Chinchilla law alone explains it. Which runs those
are depends on the base law's N*(·), so the selection and the fit alternate until the
selection no longer changes (from all non-repeating runs; it settles in 2-3 rounds).

`refit` fits the base law again to bootstrap resamples given as run counts, all at once
(scaling.parametric.huber's batched Newton, from the full fit and with its exponents scaled, as
scaling.parametric.fit's bootstrap does).
"""

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.numerics import optimum as opt
from chinchax.scaling.parametric import fit as parametric

MIN_BASE_RUNS = 10  # twice the base law's 5 numbers (as caveats.MIN_RUNS)
MAX_ROUNDS = 8


def is_base(N, D, U, theta) -> np.ndarray:
  """Runs whose effective sizes are their own under `theta`: D ≤ U and N ≤ N*(D)."""
  N, D, U = (np.asarray(x, np.float64) for x in (N, D, U))
  U = np.nan_to_num(U, nan=np.inf)
  return (D <= U) & (N <= opt.optimal_params_for_tokens(np.minimum(D, U), theta))


def _theta(fit3: parametric.ParametricFit) -> np.ndarray:
  return np.array([fit3.E, fit3.A, fit3.B, fit3.alpha, fit3.beta])


def fit_base(N, D, U, loss, delta: float) -> tuple[parametric.ParametricFit, np.ndarray]:
  """(Approach 3's fit to the base runs, the base runs' mask); a UserError naming the runs
  when fewer than MIN_BASE_RUNS remain.

  From all non-repeating runs, select and refit until the selection reproduces itself. A
  few base runs leave the law loose enough that the selection can cycle; then the visited
  selection closest to reproducing itself (fewest runs that its own law would move in or
  out; the larger on a tie) is kept.
  """
  N, D, U, loss = (np.asarray(x, np.float64) for x in (N, D, U, loss))
  mask = D <= np.nan_to_num(U, nan=np.inf)
  visited = []  # (runs its own law moves, -runs, round, mask, fit)
  for i in range(MAX_ROUNDS):
    if mask.sum() < MIN_BASE_RUNS or any(np.array_equal(mask, v[3]) for v in visited):
      break
    fit3 = parametric.fit_parametric(N[mask], D[mask], loss[mask], delta=delta)
    new = is_base(N, D, U, _theta(fit3))
    visited.append((int(np.sum(new != mask)), -int(mask.sum()), i, mask, fit3))
    if visited[-1][0] == 0:
      break
    mask = new
  # The first selection (every non-repeating run) counts only if its own law keeps it.
  candidates = [v for v in visited if v[2] > 0 or v[0] == 0]
  if not candidates:
    raise UserError(
        f"data-constrained fit: only {int(mask.sum())} runs neither repeat data nor exceed "
        f"the compute-optimal size for their unique tokens; the base law needs at least "
        f"{MIN_BASE_RUNS} such runs (single-epoch runs at or below N*(D)): add them, or give "
        "a base law fitted elsewhere (--base-law=law.json)")
  _, _, _, mask, fit3 = min(candidates, key=lambda v: v[:3])
  return fit3, mask


def refit(N, D, loss, counts_Rxn: np.ndarray, fit3: parametric.ParametricFit,
          delta: float) -> np.ndarray:
  """(R, 5) base laws [E, A, B, alpha, beta], one per row of run counts (a resample): the
  Approach-3 bootstrap's own batched refit (scaling.parametric.fit.refit)."""
  return parametric.refit(N, D, loss, counts_Rxn, fit3, delta)
