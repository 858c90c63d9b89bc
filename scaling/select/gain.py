"""Expected narrowing per FLOP: a Gaussian update over the current fit's bootstrap draws.

Over S draws theta_s of the law, the answer q_s (scaling/select/answer.py) and every
candidate's predicted log-loss f_sj = log L(N_j, D_j; theta_s) are treated as jointly
Gaussian with their empirical covariance Sigma (an ensemble, as in an ensemble Kalman
filter). Observing cell j's log-loss, with the runs' noise variance sigma^2 added, removes

    r_j = Sigma[q, j]^2 / (Sigma[j, j] + sigma^2)

from the variance of q: the linearised expected reduction. A batch is chosen greedily: the
cell with the largest r_j / cost_j that still fits the FLOPs left, then Sigma conditioned on
that cell's observation (Sigma -= Sigma[:, j] Sigma[j, :] / (Sigma[j, j] + sigma^2)), so a
second cell that would tell the same thing gains little, and so on. Draws whose answer lies
outside the central `TRIM` of the draws are left out of Sigma: one runaway refit would
otherwise be most of the variance."""

import dataclasses

import numpy as np

TRIM = 0.98  # the central fraction of the draws' answers Sigma is estimated from


@dataclasses.dataclass(frozen=True)
class Pick:
  index: int        # into the candidates
  reduction: float  # variance of the answer this cell removes, after the earlier picks
  cost: float


def covariance(q_S: np.ndarray, f_SxM: np.ndarray) -> np.ndarray:
  """(M + 1, M + 1) covariance of [q, f_1..f_M] over the draws kept (finite, central)."""
  q_S, f_SxM = np.asarray(q_S, np.float64), np.asarray(f_SxM, np.float64)
  ok = np.isfinite(q_S) & np.all(np.isfinite(f_SxM), axis=1)
  lo, hi = np.quantile(q_S[ok], [(1 - TRIM) / 2, (1 + TRIM) / 2])
  ok &= (q_S >= lo) & (q_S <= hi)
  Z = np.concatenate([q_S[ok, None], f_SxM[ok]], axis=1)
  Z -= Z.mean(axis=0)
  return Z.T @ Z / max(len(Z) - 1, 1)


def greedy(Sigma: np.ndarray, noise2: float, cost: np.ndarray, k: int,
           flops_left: float = np.inf, allowed: np.ndarray | None = None
           ) -> tuple[list[Pick], float]:
  """Up to k picks, best r_j/cost_j first within `flops_left`; and the variance of the answer
  left after all of them (Sigma[q, q] after the updates)."""
  S = np.array(Sigma, np.float64)
  cost = np.asarray(cost, np.float64)
  free = np.ones(len(cost), bool) if allowed is None else np.array(allowed, bool)
  picks, left = [], float(flops_left)
  for _ in range(k):
    denom = np.diag(S)[1:] + noise2
    r = S[0, 1:]**2 / denom
    ok = free & (cost <= left)
    if not ok.any():
      break
    score = np.where(ok, r / cost, -np.inf)
    j = int(np.argmax(score))
    picks.append(Pick(j, float(r[j]), float(cost[j])))
    free[j] = False
    left -= cost[j]
    s = S[:, j + 1].copy()
    S -= np.outer(s, s) / denom[j]
  return picks, float(S[0, 0])
