"""Synthetic IsoFLOP sweeps of a known law L = E + A/N^alpha + B/D^beta under C = 6ND."""

import numpy as np

from chinchax.scaling.runs.table import make_runs
from tests.helpers import synthetic_law

BUDGETS = np.logspace(18, 22, 5)

# (alpha, beta): Chinchilla-like, both asymmetric directions of the issue, and symmetric.
EXPONENTS = {"chinchilla": (0.34, 0.28), "alpha<beta": (0.2, 0.4),
             "alpha>beta": (0.7, 0.35), "symmetric": (0.3, 0.3)}


def law(alpha, beta, E=1.8, N1=1e9, C1=1e20, share=0.3) -> dict:
  """The law whose optimum at C1 is N1, with its N-term worth `share` nats there."""
  D1 = C1 / (6 * N1)
  A = share * N1**alpha
  B = alpha * A * N1**-alpha * D1**beta / beta  # d/dN of the loss along C1 vanishes at N1
  a = beta / (alpha + beta)
  return dict(E=E, A=A, B=B, alpha=alpha, beta=beta, a=a, b=1 - a, G=N1 / (C1 / 6)**a)


def theta(p: dict) -> tuple:
  return p["E"], p["A"], p["B"], p["alpha"], p["beta"]


def N_opt(p: dict, C):
  return synthetic_law.N_opt(np.asarray(C), theta(p))


def loss(p: dict, N, D):
  return synthetic_law.loss(np.asarray(N), np.asarray(D), theta(p))


def sizes(p: dict, n=5, spread=4.0, drift=1.0, budgets=BUDGETS) -> np.ndarray:
  """n sizes per budget, log-spaced over [centre/spread, centre·spread]; the centre moves
  from the optimum at the smallest budget to `drift` times it at the largest."""
  K = len(budgets)
  centre = drift**(np.arange(K) / max(K - 1, 1))
  return np.concatenate([N_opt(p, C) * c * np.geomspace(1 / spread, spread, n)
                         for C, c in zip(budgets, centre)])


def isoflop_runs(p: dict, n=5, spread=4.0, drift=1.0, noise=0.0, seed=0, budgets=BUDGETS):
  """Runs of the sweep `sizes` describes, losses plus Gaussian noise of sd `noise`."""
  N = sizes(p, n, spread, drift, budgets)
  C = np.repeat(budgets, n)
  D = C / (6 * N)
  eps = np.random.default_rng(seed).standard_normal(len(N))
  return make_runs(N, D, loss(p, N, D) + noise * eps, budget=C)


def parametric_sweep(p: dict, budgets=5, per=8, noise=0.0, seed=0):
  """(N, D, L) over 0.1x..10x the optimum at budgets 1e18..1e21, noise multiplicative."""
  C = np.repeat(np.logspace(18, 21, budgets), per)
  N = N_opt(p, C) * np.tile(np.logspace(-1, 1, per), budgets)
  D = C / (6 * N)
  L = loss(p, N, D) * np.exp(noise * np.random.default_rng(seed).standard_normal(len(N)))
  return N, D, L
