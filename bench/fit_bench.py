"""Fit benchmark: Approach 3 against a plain scipy loop; Approach 2's bias and coverage.

Approach 3 (default). Synthetic sweep: IsoFLOP budgets log-spaced over 1e18..1e21 FLOPs,
model sizes log-spaced over 0.1x..10x the compute-optimal N at each budget, D = C / 6N,
losses from L = 1.69 + 406.4/N^0.34 + 410.7/D^0.28 (Hoffmann et al.) times
exp(noise x standard normal). Prints, from one run, side by side:

* `fit_parametric` (method "vp") plus `bootstrap_parametric` with 4,000 resamples;
* `fit_parametric(method="multistart")` over the paper's 4,500 starts (the reference);
* the plain way: `scipy.optimize.minimize(method="L-BFGS-B")` with the analytic gradient
  from each of the same 4,500 starts, one after the other;

their times, the ratio scipy loop / (vp fit + bootstrap), and the objectives.

--approach2: Approach 2's a on synthetic laws (alpha/beta = 0.34/0.28, 0.2/0.4, 0.7/0.35,
0.3/0.3), 5 budgets 1e18..1e22, 5 sizes over 4x either side of a centre that is the optimum
(centred) or moves to 3x it across the budgets (drifting): truth, parabola, profile fit
("vp"), noise-free and the mean over --seeds noisy sweeps (noise sd 0.002 on the loss), and
the parabola's error on N* at the largest budget (noise-free);
with --coverage R, the share of R noisy sweeps (3 sizes, noise 0.005) whose 90% bootstrap
interval of a holds the truth.

  python -m bench.fit_bench [--points 240] [--budgets 10] [--resamples 4000] [--noise 0.01]
                            [--skip-scipy] [--skip-multistart] [--seed 0]
  python -m bench.fit_bench --approach2 [--seeds 20] [--coverage 200]
  python -m bench.fit_bench --command [--repeats 3]

--command: the whole `chinchax fit --approach=3 --bootstrap=4000` of the sweep written as a
CSV (process start to exit) beside the scipy loop, alternating: --repeats rounds of the command,
the loop, the command, each round's ratio, and their median; then --repeats back-to-back pairs
with --plots (the figures drawn in the command's process, then by its workers).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import scipy.optimize
import scipy.special

from chinchax.scaling.isoflop import fit as isoflop
from chinchax.scaling.isoflop import bootstrap as isoflop_bootstrap
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.plots import workers as plot_workers
from chinchax.scaling.runs.table import make_runs

LAW = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
EXPONENTS = ((0.34, 0.28), (0.2, 0.4), (0.7, 0.35), (0.3, 0.3))


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


def _vp_fit_and_bootstrap(N, D, L, resamples):
  t = time.perf_counter()
  fit = parametric.fit_parametric(N, D, L)
  t_fit = time.perf_counter() - t
  t = time.perf_counter()
  samples = parametric.bootstrap_parametric(N, D, L, n_resamples=resamples, fit=fit)
  return fit, samples, t_fit, time.perf_counter() - t


def approach3(args) -> None:
  N, D, L = synthetic_sweep(args.points, args.budgets, args.noise, args.seed)
  starts = parametric.paper_grid()
  print(f"data: {len(N)} points at {args.budgets} budgets, noise {args.noise}; "
        f"{len(starts)} paper starts")
  fit, samples, t_fit, t_boot = _vp_fit_and_bootstrap(N, D, L, args.resamples)
  print(f"vp fit:                {t_fit:8.2f} s  objective {fit.objective:.15e}")
  print(f"  E={fit.E:.4f} A={fit.A:.1f} B={fit.B:.1f} alpha={fit.alpha:.4f} "
        f"beta={fit.beta:.4f}  warnings={list(fit.warnings)}")
  print(f"bootstrap ({args.resamples} resamples): {t_boot:8.2f} s")
  lo, hi = np.percentile(samples, [5, 95], axis=0)
  for k, name in enumerate(parametric.COLUMNS):
    print(f"  {name:5s} 90% [{lo[k]:.4g}, {hi[k]:.4g}]  truth {LAW[name]}")
  print(f"vp fit + bootstrap:    {t_fit + t_boot:8.2f} s")
  if not args.skip_multistart:
    t = time.perf_counter()
    ref = parametric.fit_parametric(N, D, L, method="multistart")
    t_ref = time.perf_counter() - t
    print(f"multistart fit ({len(starts)} starts, batched Newton): {t_ref:8.2f} s  objective "
          f"{ref.objective:.15e}  at best {ref.n_at_best}/{ref.n_starts}")
    print(f"  (vp - multistart) / multistart objective = "
          f"{(fit.objective - ref.objective) / ref.objective:.2e}")
  if not args.skip_scipy:
    t = time.perf_counter()
    f_scipy, _ = scipy_loop(N, D, L, starts, fit.delta)
    t_scipy = time.perf_counter() - t
    print(f"scipy L-BFGS-B loop ({len(starts)} starts): {t_scipy:8.2f} s  objective "
          f"{f_scipy:.15e}")
    # The load may change over the long loop: time the vp path again after it and take
    # the slower of the two runs, so the ratio does not flatter the fast path.
    _, _, t_fit2, t_boot2 = _vp_fit_and_bootstrap(N, D, L, args.resamples)
    t_vp = max(t_fit + t_boot, t_fit2 + t_boot2)
    print(f"vp fit + bootstrap again after the loop: {t_fit2 + t_boot2:8.2f} s")
    print(f"speed-up: scipy loop / (vp fit + {args.resamples}-resample bootstrap, slower run) "
          f"= {t_scipy:.1f} / {t_vp:.2f} = {t_scipy / t_vp:.1f}x")
    print(f"objectives: vp {fit.objective:.15e}, scipy {f_scipy:.15e}; "
          f"(scipy - vp) / scipy = {(f_scipy - fit.objective) / f_scipy:.2e} (>= 0: vp no worse)")


def command(args) -> None:
  """The whole `chinchax fit --approach=3 --bootstrap=R` of the sweep as a CSV (process start
  to exit) and the scipy loop, alternating in --repeats rounds, then pairs with --plots."""
  N, D, L = synthetic_sweep(args.points, args.budgets, args.noise, args.seed)
  with tempfile.TemporaryDirectory() as tmp:
    csv = os.path.join(tmp, "runs.csv")
    with open(csv, "w") as f:
      f.write("N,D,loss\n" + "".join(f"{float(n)!r},{float(d)!r},{float(l)!r}\n"
                                      for n, d, l in zip(N, D, L)))
    argv = [sys.executable, "-m", "chinchax.cli", "fit", csv, "--approach=3",
            f"--bootstrap={args.resamples}", f"--out={os.path.join(tmp, 'law.json')}", "--quiet"]

    # As an installed chinchax runs: its modules' bytecode cached (an environment that says
    # PYTHONDONTWRITEBYTECODE would have every run compile them, ~0.08 s), written by a first
    # run that is not timed.
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def timed(extra=(), env=None):
      t = time.perf_counter()
      subprocess.run(argv + list(extra), check=True, cwd=tmp, env={**base_env, **(env or {})})
      return time.perf_counter() - t

    timed()
    # The scipy loop runs on one core and the command on all of them, and this host's speed
    # drifts by half within minutes (one scipy loop took 11.4 s, and 20.0 s a few minutes
    # before): so the two alternate, --repeats rounds of the command, the loop, the command,
    # and each round's ratio is the loop over the median of its two commands.
    starts = parametric.paper_grid()
    rounds = []
    for _ in range(args.repeats):
      before = timed()
      t = time.perf_counter()
      scipy_loop(N, D, L, starts, 1e-3)  # the Huber delta of `chinchax fit`
      t_scipy = time.perf_counter() - t
      rounds.append((before, t_scipy, timed()))
    plots = [f"--plots={os.path.join(tmp, 'plots')}"]
    # Back to back: the figures drawn in the command's process (CHINCHAX_PLOT_WORKERS=0, as
    # before scaling/plots/workers.py), then by the workers, started during the fit.
    # The workers the command starts are its own choice (none where the load average is at
    # least the CPUs): what it chose is read here the same way, just before.
    pairs, chosen = [], []
    for _ in range(args.repeats):
      pairs.append((timed(plots, {"CHINCHAX_PLOT_WORKERS": "0"}), None))
      chosen.append(plot_workers.processes())
      pairs[-1] = (pairs[-1][0], timed(plots))
  t_plots = float(np.median([w for _, w in pairs]))
  times = [t for before, _, after in rounds for t in (before, after)]
  t_cmd, t_scipy = float(np.median(times)), float(np.median([s for _, s, _ in rounds]))
  ratios = [s / np.median([b, a]) for b, s, a in rounds]
  print(f"data: {len(N)} points at {args.budgets} budgets, noise {args.noise}; load average "
        f"{os.getloadavg()[0]:.2f}")
  print(f"chinchax fit --approach=3 --bootstrap={args.resamples}, whole process: median "
        f"{t_cmd:.2f} s of {len(times)} ({', '.join(f'{x:.2f}' for x in times)})")
  print(f"  the same with --plots: median {t_plots:.2f} s; pairs drawn in the command's "
        f"process / as the command chose (workers): "
        + ", ".join(f"{a:.2f} / {b:.2f} ({n})" for (a, b), n in zip(pairs, chosen))
        + f" (medians {np.median([a for a, _ in pairs]):.2f} / {t_plots:.2f})")
  print(f"scipy L-BFGS-B loop ({len(starts)} starts), one per round: median {t_scipy:.2f} s "
        f"({', '.join(f'{s:.2f}' for _, s, _ in rounds)})")
  print("rounds (command, scipy loop, command): "
        + "; ".join(f"{b:.2f}, {s:.2f}, {a:.2f} -> {r:.1f}x"
                    for (b, s, a), r in zip(rounds, ratios)))
  print(f"speed-up: median of the rounds' ratios {np.median(ratios):.1f}x "
        f"(medians {t_scipy:.1f} / {t_cmd:.2f} = {t_scipy / t_cmd:.1f}x; "
        f"with plots {t_scipy / t_plots:.1f}x)")


def _law(alpha, beta, E=1.8, N1=1e9, C1=1e20, share=0.3) -> dict:
  """The law whose optimum at C1 is N1, with its N-term worth `share` nats there."""
  A = share * N1**alpha
  B = alpha * share * (C1 / (6 * N1))**beta / beta
  a = beta / (alpha + beta)
  return dict(E=E, A=A, B=B, alpha=alpha, beta=beta, a=a, G=N1 / (C1 / 6)**a)


def _runs(p, n, drift, noise, seed):
  budgets = np.logspace(18, 22, 5)
  centre = drift**(np.arange(5) / 4)
  N = np.concatenate([p["G"] * (C / 6)**p["a"] * c * np.geomspace(0.25, 4, n)
                      for C, c in zip(budgets, centre)])
  C = np.repeat(budgets, n)
  D = C / (6 * N)
  L = p["E"] + p["A"] * N**-p["alpha"] + p["B"] * D**-p["beta"]
  return make_runs(N, D, L + noise * np.random.default_rng(seed).standard_normal(len(N)),
                   budget=C)


def approach2(args) -> None:
  warnings.simplefilter("ignore")  # dropped budgets are counted by the coverage columns
  print(f"Approach 2: a by method; noisy = mean over {args.seeds} sweeps, noise sd 0.002")
  print(f"{'alpha/beta':>10} {'grid':>9} {'truth':>7} {'parabola':>9} {'vp':>9} "
        f"{'parabola noisy':>15} {'vp noisy':>9} {'parabola N* at 1e22':>20}")
  for alpha, beta in EXPONENTS:
    p = _law(alpha, beta)
    for drift, grid in ((1.0, "centred"), (3.0, "drifting")):
      fits = [isoflop.fit_isoflop(_runs(p, 5, drift, 0.0, 0), method=m)
              for m in ("parabola", "vp")]
      row = [f.a for f in fits]
      N_err = fits[0].N_opt[-1] / (p["G"] * (1e22 / 6)**p["a"]) - 1
      noisy = [np.mean([isoflop.fit_isoflop(_runs(p, 5, drift, 0.002, s), method=m).a
                        for s in range(args.seeds)]) for m in ("parabola", "vp")]
      print(f"{alpha:>4}/{beta:<5} {grid:>9} {p['a']:7.4f} {row[0]:9.4f} {row[1]:9.4f} "
            f"{noisy[0]:15.4f} {noisy[1]:9.4f} {N_err:+20.1%}")
  if not args.coverage:
    return
  print(f"coverage of 90% intervals of a (vp, parametric bootstrap, 400 resamples), "
        f"{args.coverage} sweeps each, noise sd 0.005")
  for alpha, beta in EXPONENTS[1:3]:
    p = _law(alpha, beta)
    for n, drift in ((3, 3.0), (5, 3.0), (5, 1.0)):
      hits = 0
      for s in range(args.coverage):
        a = isoflop_bootstrap.bootstrap_isoflop(_runs(p, n, drift, 0.005, 1000 + s), 400, seed=s)["a"]
        lo, hi = np.percentile(a, [5, 95])
        hits += lo < p["a"] < hi
      print(f"  alpha/beta {alpha}/{beta}, {n} sizes, drift {drift}: {hits}/{args.coverage} "
            f"= {hits / args.coverage:.1%}")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--points", type=int, default=240)
  parser.add_argument("--budgets", type=int, default=10)
  parser.add_argument("--resamples", type=int, default=4000)
  parser.add_argument("--noise", type=float, default=0.01)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--skip-scipy", action="store_true")
  parser.add_argument("--skip-multistart", action="store_true")
  parser.add_argument("--approach2", action="store_true")
  parser.add_argument("--seeds", type=int, default=20)
  parser.add_argument("--coverage", type=int, default=0)
  parser.add_argument("--command", action="store_true",
                      help="time the whole `chinchax fit` process against the scipy loop")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  if args.command:
    command(args)
  elif args.approach2:
    approach2(args)
  else:
    approach3(args)


if __name__ == "__main__":
  main()
