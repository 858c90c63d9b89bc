"""Synthetic truths outside the model family E + A/N^alpha + B/D^beta, as IsoFLOP sweeps.

Every estimator is tested on these, not only on data drawn from the law it fits:

* "undertrained": Hoffmann et al.'s law plus 0.003·(N/D)², a term that only matters for
  badly undertrained runs (D/N < 1), far from the minimum;
* "kaplan": Kaplan et al.'s (2020) L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D, no
  irreducible term;
* "constant_lr": the law plus the loss a constant-LR run keeps for lack of a cooldown,
  0.02·ln(1 + D/(20N)): it grows with tokens per parameter, so profiles rise faster toward
  small N than a cosine run's do (asymmetric);
* "broken": a data term whose exponent bends from 0.22 to 0.36 around D = 3e10 (smoothly
  broken power law, Caballero et al. 2023), so the compute-optimal exponent changes across
  budgets.

Checkpoint suites (one run per size, evaluated along D) of schedules that end at each model's
last checkpoint, whose loss sits above a run trained to its D by an excess proportional to the
learning rate still to decay at the checkpoint's place f = D / D_end in its run (`SCHEDULES`):
"cosine", 0.04·(1 + cos(pi f))/2 nats; "linear" (a linear decay to zero), 0.04·(1 - f);
"cosine_by_N", the cosine excess times (N/3.9e8)^-0.05, so mildly larger for small models;
"wsd", 0.04 through a warmup-stable-decay run's stable phase, decaying linearly to 0 over its
last fifth (the cooldown).
The law they stand for, the one a fit is after, is Hoffmann et al.'s of runs trained to each D.

Sweeps have heavy-tailed noise (Student t, 3 degrees of freedom) and a few diverged runs
(their loss stuck 0.5-2 nats above where it should be). The true compute-optimal exponent is
computed independently of any estimator: the true loss is minimised numerically along each
budget's IsoFLOP curve (C = 6ND), then a is the least-squares slope of log N* on log C over
the budgets (`a_true`).
"""

import dataclasses
from collections.abc import Callable

import numpy as np
from scipy import optimize

from chinchax.scaling.runs.table import Runs, make_runs

from tests.helpers.synthetic_law import HOFFMANN  # E, A, B, alpha, beta
from tests.helpers.synthetic_law import loss as chinchilla

BUDGETS = np.logspace(18, 21, 6)


def undertrained(N, D):
  return chinchilla(N, D) + 0.003 * (N / D)**2


def kaplan(N, D, N_c=8.8e13, D_c=5.4e13, alpha_N=0.076, alpha_D=0.095):
  return ((N_c / N)**(alpha_N / alpha_D) + D_c / D)**alpha_D


def constant_lr(N, D):
  return chinchilla(N, D) + 0.02 * np.log1p(D / (20 * N))


def broken(N, D, D_b=3e10, beta_1=0.22, beta_2=0.36, s=2.0):
  E, A, _, alpha, _ = HOFFMANN
  data = 120.0 * D**-beta_1 * (1 + (D / D_b)**(1 / s))**(-(beta_2 - beta_1) * s)
  return E + A / N**alpha + data


def place_in_run(N, D):
  """Each checkpoint's place in its model's run: D over the largest D of its size (N equal
  to the bit), the run's end."""
  _, of = np.unique(N, return_inverse=True)
  end = np.zeros(of.max() + 1)
  np.maximum.at(end, of, D)
  return D / end[of]


def cosine_checkpoints(N, D):
  return chinchilla(N, D) + 0.04 * (1 + np.cos(np.pi * place_in_run(N, D))) / 2


def linear_checkpoints(N, D):
  return chinchilla(N, D) + 0.04 * (1 - place_in_run(N, D))


def cosine_by_N_checkpoints(N, D):
  return (chinchilla(N, D)
          + 0.04 * (N / 3.9e8)**-0.05 * (1 + np.cos(np.pi * place_in_run(N, D))) / 2)


def wsd_checkpoints(N, D, cooldown=0.2):
  """Checkpoints of warmup-stable-decay runs: the stable phase's excess until the last
  `cooldown` of each run, which decays it linearly to zero at the run's end."""
  return chinchilla(N, D) + 0.04 * np.minimum(1.0, (1 - place_in_run(N, D)) / cooldown)


# A checkpoint suite's loss, called with the whole suite's N and D: the runs' ends are read
# from them. The law each stands for is `chinchilla`.
SCHEDULES = {"cosine": cosine_checkpoints, "linear": linear_checkpoints,
             "cosine_by_N": cosine_by_N_checkpoints, "wsd": wsd_checkpoints}


def N_star(loss: Callable, C: float) -> float:
  """argmin over N of loss(N, C/6N), numerically, to a relative 1e-9 in N."""
  f = lambda x: float(loss(np.exp(x), C / (6 * np.exp(x))))
  x = np.linspace(np.log(C) / 2 - 14, np.log(C) / 2 + 4, 4001)  # N from 1e-6 to 50·sqrt(C)
  i = int(np.argmin([f(v) for v in x]))
  res = optimize.minimize_scalar(f, bracket=(x[i - 1], x[i], x[i + 1]),
                                 options={"xtol": 1e-12})
  return float(np.exp(res.x))


def a_true(loss: Callable, budgets) -> float:
  """The least-squares slope of log N* on log C over `budgets`."""
  log_C = np.log(np.asarray(budgets, np.float64))
  log_N = np.log([N_star(loss, C) for C in budgets])
  return float(np.polyfit(log_C, log_N, 1)[0])


@dataclasses.dataclass(frozen=True)
class Truth:
  name: str
  loss: Callable
  below: float = 6.0  # each budget's sizes span N*_k/below .. N*_k·above
  above: float = 6.0

  def a(self, budgets=BUDGETS) -> float:
    return a_true(self.loss, budgets)


TRUTHS = {
    # Sizes reach D/N ~ 0.05 at the top of each budget, where the extra term is a few nats.
    "undertrained": Truth("undertrained", undertrained, below=8.0, above=24.0),
    "kaplan": Truth("kaplan", kaplan),
    "constant_lr": Truth("constant_lr", constant_lr),
    "broken": Truth("broken", broken),
}


def sweep(truth: Truth, sizes: int = 9, noise: float = 0.005, n_diverged: int = 2,
          seed: int = 0, budgets=BUDGETS, drift: float = 0.3) -> Runs:
  """An IsoFLOP sweep of `truth`: `sizes` log-spaced models per budget around its true N*
  (the grid's centre wanders up to ±drift in log N, as a real grid's does), losses plus
  noise·t₃/√3 nats (sd `noise`), and `n_diverged` runs whose loss is 0.5-2 nats too high."""
  rng = np.random.default_rng(seed)
  N, C = [], []
  for k, c in enumerate(budgets):
    centre = np.log(N_star(truth.loss, c)) + drift * np.sin(1.7 * k + seed)
    N.append(np.exp(centre + np.linspace(-np.log(truth.below), np.log(truth.above), sizes)))
    C.append(np.full(sizes, c))
  N, C = np.concatenate(N), np.concatenate(C)
  D = C / (6 * N)
  loss = truth.loss(N, D) + noise * rng.standard_t(3, len(N)) / np.sqrt(3)
  bad = rng.choice(len(N), n_diverged, replace=False)
  loss[bad] += rng.uniform(0.5, 2.0, n_diverged)
  return make_runs(N, D, loss, budget=C)
