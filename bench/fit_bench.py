"""Approach-3 fit benchmark: the batched fit and bootstrap against a plain scipy loop.

Synthetic sweep: IsoFLOP budgets log-spaced over 1e18..1e21 FLOPs, model sizes log-spaced
over 0.1x..10x the compute-optimal N at each budget, D = C / 6N, losses from
L = 1.69 + 406.4/N^0.34 + 410.7/D^0.28 (Hoffmann et al.) times exp(noise x standard normal).

Prints the time of `fit_parametric` over the 4,500 paper starts, of `bootstrap_parametric`,
and of the plain way: `scipy.optimize.minimize(method="L-BFGS-B")` with the analytic
gradient from each of the same 4,500 starts, one after the other, with the two objectives.

  python bench/fit_bench.py [--points 250] [--budgets 10] [--resamples 4000]
                            [--noise 0.01] [--skip-scipy] [--skip-bootstrap] [--seed 0]
"""

import argparse
import time

import numpy as np
import scipy.optimize
import scipy.special

from chinchax.scaling import bootstrap, parametric

LAW = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)


def synthetic_sweep(points: int, budgets: int, noise: float, seed: int):
  E, A, B, alpha, beta = (LAW[k] for k in ("E", "A", "B", "alpha", "beta"))
  rng = np.random.default_rng(seed)
  per = max(1, points // budgets)
  G = (alpha * A / (beta * B))**(1 / (alpha + beta))
  N = np.concatenate([G * (C / 6)**(beta / (alpha + beta)) * np.logspace(-1, 1, per)
                      for C in np.logspace(18, 21, budgets)])
  C = np.repeat(np.logspace(18, 21, budgets), per)
  D = C / (6 * N)
  L = (E + A / N**alpha + B / D**beta) * np.exp(noise * rng.standard_normal(len(N)))
  return N, D, L


def scipy_loop(N, D, L, starts, delta):
  """One L-BFGS-B run per start, analytic gradient: how Approach 3 is usually done."""
  x, y, l = np.log(N), np.log(D), np.log(L)

  def objective(th):
    a, b, e, alpha, beta = th
    u1, u2 = a - alpha * x, b - beta * y
    m = np.maximum(np.maximum(u1, u2), e)
    e1, e2, e3 = np.exp(u1 - m), np.exp(u2 - m), np.exp(e - m)
    s = e1 + e2 + e3
    r = m + np.log(s) - l
    h = np.clip(r, -delta, delta) / s
    grad = np.array([h @ e1, h @ e2, h @ e3, -(h * e1) @ x, -(h * e2) @ y])
    return scipy.special.huber(delta, r).sum(), grad

  best = (np.inf, None)
  for th0 in starts:
    res = scipy.optimize.minimize(objective, th0, jac=True, method="L-BFGS-B")
    if res.fun < best[0]:
      best = (float(res.fun), res.x)
  return best


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--points", type=int, default=250)
  parser.add_argument("--budgets", type=int, default=10)
  parser.add_argument("--resamples", type=int, default=4000)
  parser.add_argument("--noise", type=float, default=0.01)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--skip-scipy", action="store_true")
  parser.add_argument("--skip-bootstrap", action="store_true")
  args = parser.parse_args()

  N, D, L = synthetic_sweep(args.points, args.budgets, args.noise, args.seed)
  starts = parametric.paper_grid()
  print(f"data: {len(N)} points at {args.budgets} budgets, noise {args.noise}; "
        f"{len(starts)} starts")

  t = time.perf_counter()
  fit = parametric.fit_parametric(N, D, L)
  t_fit = time.perf_counter() - t
  print(f"fit_parametric:        {t_fit:8.2f} s  objective {fit.objective:.12e}  "
        f"at best {fit.n_at_best}/{fit.n_starts}")
  print(f"  E={fit.E:.4f} A={fit.A:.1f} B={fit.B:.1f} alpha={fit.alpha:.4f} "
        f"beta={fit.beta:.4f}  warnings={list(fit.warnings)}")

  if not args.skip_bootstrap:
    t = time.perf_counter()
    samples = bootstrap.bootstrap_parametric(N, D, L, n_resamples=args.resamples, fit=fit)
    t_boot = time.perf_counter() - t
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=0)
    print(f"bootstrap ({args.resamples} resamples): {t_boot:8.2f} s")
    for k, name in enumerate(("E", "A", "B", "alpha", "beta")):
      print(f"  {name:5s} 95% [{lo[k]:.4g}, {hi[k]:.4g}]  truth {LAW[name]}")

  if not args.skip_scipy:
    t = time.perf_counter()
    f_ref, _ = scipy_loop(N, D, L, starts, fit.delta)
    t_ref = time.perf_counter() - t
    rel = (f_ref - fit.objective) / f_ref
    print(f"scipy L-BFGS-B loop:   {t_ref:8.2f} s  objective {f_ref:.12e}")
    print(f"speed-up {t_ref / t_fit:.1f}x; objective relative difference "
          f"(scipy - fast) / scipy = {rel:.2e}")


if __name__ == "__main__":
  main()
