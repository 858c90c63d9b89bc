"""While the fit is poorly determined: cells that spread the design, not the Gaussian update.

The Gaussian update (scaling/select/gain.py) linearises the law around its bootstrap draws.
When Approach 3 is poorly determined those draws are no posterior to linearise: E runs off to
0 or A to infinity in a flat valley the few runs leave open, and a cell that the draws say
would settle the answer only moves the valley. On the smoke's cheap budgets each round was
promised a's interval would narrow to 0.44-0.49 and the next fit gave 0.58-0.69. So the fit
is first judged (`problems`); it is *poorly determined* when any of these holds:

  * the Huber fit itself warns (a term not identified, E at 0, A or B run off, an exponent at
    a bound, a fragile minimum: scaling/parametric/fit.py);
  * the answer's interval is wider than LOOSE (a: 0.3, the width at which the fit's judgement
    calls Approach 3 poorly determined, judgement/caveats.MAX_A_WIDTH; log N*: 1.0, a factor
    2.7);
  * the draws of the answer are far from Gaussian: their percentile interval is more than
    NON_GAUSSIAN (1.5) times wider or narrower than a normal's with their robust sd
    (1.4826 x the median absolute deviation): heavy tails or a second cluster of draws, which
    a covariance cannot describe.

Then the cells are a D-optimal design for the law's five parameters (`design`): the Jacobian
of log L(N, D) in (log E, log A, log B, alpha, beta) at the median of the draws (robust where a
few draws run off), each candidate scored by the information it adds to the runs' (the log
determinant's gain, log(1 + j' M^-1 j)) per FLOP, chosen greedily with M updated by each pick.
Such cells separate E from A and B (they span log N and log D, and log C through both) rather
than chase the valley's current direction; no width after them is promised, since the
linearisation that would promise one is what is in doubt. Once the fit is well determined the
Gaussian update takes over."""

import numpy as np
# scipy is imported in the functions that use it: a fit needs none of it (0.5 s of import).

from chinchax.scaling.judgement import caveats

LOOSE = {"a": caveats.MAX_A_WIDTH, "N": 1.0}
NON_GAUSSIAN = 1.5
RIDGE = 1e-6  # relative to a candidate's information: a parameter no run informs yet


def problems(warnings, q: np.ndarray, lo: float, hi: float, level: float, target: str
             ) -> list[str]:
  """Why the fit is poorly determined for a selection (module docstring); empty when well."""
  from scipy import special
  out = [f"the fit warns: {w.split(':')[0]}" for w in warnings]
  if hi - lo > LOOSE[target]:
    out.append(f"the interval is wider than {LOOSE[target]:g}")
  q = np.asarray(q, np.float64)
  q = q[np.isfinite(q)]
  sd = 1.4826 * float(np.median(np.abs(q - np.median(q))))
  gauss = 2 * float(special.ndtri((1 + level) / 2)) * sd
  if gauss > 0 and not 1 / NON_GAUSSIAN <= (hi - lo) / gauss <= NON_GAUSSIAN:
    out.append(f"the draws are far from Gaussian (interval {(hi - lo) / gauss:.2f}x a "
               "normal's)")
  return out


def jacobian(N, D, theta) -> np.ndarray:
  """(M, 5) d log L / d(log E, log A, log B, alpha, beta) at the law theta = [E, A, B, alpha,
  beta]; log N and log D centred on their means (the determinant's gain does not change)."""
  N, D = np.asarray(N, np.float64), np.asarray(D, np.float64)
  E, A, B, alpha, beta = (float(v) for v in theta)
  tN, tD = A * N**-alpha, B * D**-beta
  L = E + tN + tD
  lN, lD = np.log(N), np.log(D)
  return np.stack([np.full_like(N, E), tN, tD, -(lN - lN.mean()) * tN,
                   -(lD - lD.mean()) * tD], axis=1) / L[:, None]


def design(theta, N_run, D_run, N, D, cost, k: int, flops_left: float = np.inf,
           allowed: np.ndarray | None = None) -> list[int]:
  """Up to k candidate indices, the greedy D-optimal design per FLOP (module docstring)."""
  lN = np.log(np.concatenate([np.asarray(N_run, np.float64), N]))
  lD = np.log(np.concatenate([np.asarray(D_run, np.float64), D]))
  J = jacobian(np.exp(lN), np.exp(lD), theta)
  J_run, J_c = J[:len(N_run)], J[len(N_run):]
  M = J_run.T @ J_run + RIDGE * np.einsum("mi,mi->", J_c, J_c) / len(J_c) * np.eye(5)
  free = np.ones(len(N), bool) if allowed is None else np.array(allowed, bool)
  cost = np.asarray(cost, np.float64)
  picks, left = [], float(flops_left)
  for _ in range(k):
    ok = free & (cost <= left)
    if not ok.any():
      break
    v = np.einsum("mi,mi->m", J_c, np.linalg.solve(M, J_c.T).T)
    score = np.where(ok, np.log1p(np.maximum(v, 0.0)) / cost, -np.inf)
    j = int(np.argmax(score))
    picks.append(j)
    free[j] = False
    left -= cost[j]
    M += np.outer(J_c[j], J_c[j])
  return picks
