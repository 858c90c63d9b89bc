"""Synthetic task evaluations of a model ladder with a known two-step truth, for the task-law
tests and bench/tasks_coverage.py.

The ladder is OLMo's shape (Bhagia et al. 2024): 5 sizes from 150M to 1.3B parameters, each
trained to 20, 40, 100 and 200 tokens per parameter, each run evaluated at 6 checkpoints
(10% to 100% of its tokens). Step 1's truth is a task loss in bits per byte,
L = E + A/N^alpha + B/D^beta, with multiplicative noise on each evaluation; step 2's maps it
to accuracy, with binomial noise of a task of `items` questions. The link is the sigmoid the
fit assumes (`link="sigmoid"`) or, out of its family, a Gompertz curve (`link="gompertz"`:
asymmetric, its turn sharper on the high-accuracy side)."""

import numpy as np

SIZES = np.geomspace(150e6, 1.3e9, 5)
TOKENS_PER_PARAM = (20.0, 40.0, 100.0, 200.0)
CHECKPOINTS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
STEP1 = dict(E=0.5, A=210.0, B=135.0, alpha=0.34, beta=0.28)
STEP2 = dict(floor=0.25, ceiling=0.9, k=8.0, L0=0.85)


def task_loss(N, D, step1=None):
  p = {**STEP1, **(step1 or {})}
  return p["E"] + p["A"] / np.asarray(N, float)**p["alpha"] + p["B"] / np.asarray(
      D, float)**p["beta"]


def accuracy(L, link="sigmoid", step2=None):
  p = {**STEP2, **(step2 or {})}
  L = np.asarray(L, float)
  if link == "sigmoid":
    s = 1.0 / (1.0 + np.exp(p["k"] * (L - p["L0"])))
  elif link == "gompertz":  # s(L0) = 1/2 as the sigmoid's, a different shape around it
    s = np.exp(-np.log(2.0) * np.exp(p["k"] * (L - p["L0"])))
  else:
    raise ValueError(link)
  return p["floor"] + (p["ceiling"] - p["floor"]) * s


def target(scale: float = 10.0):
  """(N, D) at `scale` x the largest run's compute, N and D each up by sqrt(scale)."""
  N, D = SIZES[-1], SIZES[-1] * TOKENS_PER_PARAM[-1]
  return N * np.sqrt(scale), D * np.sqrt(scale)


def ladder(seed: int, *, link: str = "sigmoid", loss_noise: float = 0.005, items: int = 1000,
           step1=None, step2=None, chance: bool = True) -> dict:
  """Columns run, N, D, task, loss, accuracy (and chance) of one noisy ladder, task 'synth'."""
  rng = np.random.default_rng(seed)
  cols = {k: [] for k in ("run", "N", "D", "task", "loss", "accuracy")}
  for N in SIZES:
    for tpp in TOKENS_PER_PARAM:
      for frac in CHECKPOINTS:
        D = N * tpp * frac
        L = task_loss(N, D, step1) * np.exp(rng.normal(0.0, loss_noise))
        p = float(np.clip(accuracy(L, link, step2), 0.0, 1.0))
        cols["run"].append(f"N{N:.3g}-x{tpp:g}")
        cols["N"].append(float(N))
        cols["D"].append(float(D))
        cols["task"].append("synth")
        cols["loss"].append(float(L))
        cols["accuracy"].append(rng.binomial(items, p) / items)
  if chance:
    cols["chance"] = [STEP2["floor"] if step2 is None else step2.get("floor", STEP2["floor"])
                      ] * len(cols["run"])
  return cols
