"""Runs from a known law, for the fit pipeline's tests: IsoFLOP grids and data-constrained
runs, as arrays or as the CSV and runs.jsonl files `chinchax fit` reads. The one home of the
law's closed forms in the tests (`loss`, `N_opt`, `a_true`), written here independently of
chinchax: tests/scaling/synthetic.py, tests/helpers/truths.py and the approaches' tests draw
their truths from them."""

import json

import numpy as np

from chinchax.scaling.constrained import law as dc

HOFFMANN = (1.69, 406.4, 410.7, 0.34, 0.28)  # E, A, B, alpha, beta


def loss(N, D, theta=HOFFMANN):
  E, A, B, alpha, beta = theta
  return E + A / N**alpha + B / D**beta


def N_opt(C, theta=HOFFMANN):
  """argmin over N of the law at C = 6ND, in closed form (Hoffmann et al. eq. 4)."""
  _, A, B, alpha, beta = theta
  G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
  return G * (C / 6) ** (beta / (alpha + beta))


def a_true(theta=HOFFMANN):
  return theta[4] / (theta[3] + theta[4])


def isoflop(budgets=(1e18, 3e18, 1e19, 3e19, 1e20), sizes=9, spread=10.0, noise=0.0, seed=0,
            theta=HOFFMANN) -> dict:
  """`sizes` models per budget, log-spaced over [N*/spread, N*·spread]; loss × exp(noise·z)."""
  rng = np.random.default_rng(seed)
  N = np.concatenate([N_opt(C, theta) * np.geomspace(1 / spread, spread, sizes)
                      for C in budgets])
  C = np.repeat(np.asarray(budgets, np.float64), sizes)
  D = C / (6 * N)
  L = loss(N, D, theta) * np.exp(noise * rng.standard_normal(len(N)))
  return {"N": N, "D": D, "C": C, "loss": L, "budget": C}


def repeated(R_D, R_N, noise=0.0, seed=0, theta=HOFFMANN,
             epochs=(0.5, 1, 2, 4, 8, 16, 40)) -> dict:
  """Runs of 5 sizes on 2 unique pools at several epochs, from Muennighoff et al.'s law."""
  rng = np.random.default_rng(seed)
  N, D, U = [], [], []
  for n in np.logspace(7, 9, 5):
    for u in (3e8, 3e9):
      for e in epochs:
        N.append(n), D.append(e * u), U.append(u)
  N, D, U = map(np.array, (N, D, U))
  L = dc.loss(N, D, U, np.asarray(theta), R_D, R_N) * np.exp(
      noise * rng.standard_normal(len(N)))
  return {"N": N, "D": D, "U": U, "loss": L}


def write_csv(path, runs: dict) -> str:
  keys = [k for k in ("N", "D", "C", "loss", "budget", "U") if k in runs]
  rows = [",".join(keys)] + [",".join(f"{runs[k][i]:.10g}" for k in keys)
                             for i in range(len(runs["N"]))]
  path.write_text("\n".join(rows) + "\n")
  return str(path)


def write_workdir(folder, runs: dict) -> str:
  """A sweep workdir whose runs.jsonl holds `runs` as the trainer's records."""
  folder.mkdir(parents=True, exist_ok=True)
  lines = []
  for i in range(len(runs["N"])):
    N, D = float(runs["N"][i]), float(runs["D"][i])
    lines.append(json.dumps({
        "schema": "chinchax/run/v1", "name": f"run{i}", "status": "done", "reason": None,
        "budget": float(runs["budget"][i]) if "budget" in runs else None, "N_total": N,
        "N_non_embedding": N, "D": D, "flops_6ND": 6 * N * D, "flops_chinchilla": 6 * N * D,
        "eval_loss": float(runs["loss"][i]), "curve": None, "schedule": "cosine",
        "shape": {"d_model": 64, "n_layers": 2}, "steps": 100, "wall_s": 1.0}))
  (folder / "runs.jsonl").write_text("\n".join(lines) + "\n")
  return str(folder)


def muennighoff_design(R_D, R_N, noise=0.005, seed=0, theta=HOFFMANN) -> dict:
  """A design like Muennighoff et al.'s 2023 study: 7 sizes (10M-3B) trained for 1-64 epochs
  of 3 unique pools (1e8, 1e9, 1e10 tokens), plus single-epoch runs of each size at 20-1000
  tokens per parameter (those at or above the optimum are stage 1's base runs): 189 runs. R_N = inf: no
  excess-parameter penalty."""
  rng = np.random.default_rng(seed)
  N, D, U = [], [], []
  for n in np.geomspace(1e7, 3e9, 7):
    for u in (1e8, 1e9, 1e10):
      for e in (1, 2, 4, 8, 16, 32, 64):
        N.append(n), D.append(e * u), U.append(u)
    for ratio in (20, 50, 100, 200, 500, 1000):
      N.append(n), D.append(ratio * n), U.append(ratio * n)
  N, D, U = map(np.array, (N, D, U))
  R_N = min(R_N, 1e15)  # N' = N to 1e-12 for every run here
  L = dc.loss(N, D, U, np.asarray(theta), R_D, R_N) * np.exp(noise * rng.standard_normal(len(N)))
  return {"N": N, "D": D, "U": U, "loss": L}
