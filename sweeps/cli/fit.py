"""`chinchax fit RUNS... [--out=law.json] [--approach=1,2,3] [--bootstrap=N] [--plots=DIR]`.

Reads runs (a sweep workdir, a runs.jsonl or a CSV), fits the approaches asked for, writes
law.json and, optionally, the plots. Approach 3 always runs: its parametric law is the `law`
of law.json. Approaches 1 and 2 run when asked for; by default each runs when the data
support it (curves or fixed-N series for 1, at least two IsoFLOP budgets for 2) and is
skipped with a note otherwise.

    chinchax fit runs/smoke --out=law.json --bootstrap=1000 --plots=plots/
"""

import argparse
import sys

import numpy as np

from chinchax.scaling import atomic
from chinchax.scaling import bootstrap as bootstrap_lib
from chinchax.scaling import envelope, isoflop, law as law_lib, optimum, parametric, plots, runs as runs_lib
from chinchax.scaling.errors import UserError

CI_LEVEL = 0.9
DECADES_TO_SHOW = (0, 1, 2, 3, 4)  # the table's budgets: the largest fitted C × 10^k


def parse_args(argv: list[str]) -> argparse.Namespace:
  p = argparse.ArgumentParser(prog="chinchax fit", description=__doc__.splitlines()[0])
  p.add_argument("runs", nargs="+", help="sweep workdir, runs.jsonl or CSV (N, D or C, loss)")
  p.add_argument("--out", default="law.json", help="where to write law.json")
  p.add_argument("--approach", default=None,
                 help="comma list of 1,2,3 (default: every approach the data support)")
  p.add_argument("--bootstrap", type=int, default=1000, help="resamples (0: no intervals)")
  p.add_argument("--plots", default=None, help="folder for PNG and SVG plots")
  p.add_argument("--params", default="total", choices=("total", "non_embedding"))
  p.add_argument("--flops", default="6ND", choices=("6ND", "chinchilla"))
  p.add_argument("--schedule", default="all", choices=runs_lib.SCHEDULES,
                 help="fit cosine runs, WSD cooldown branches, or all")
  p.add_argument("--delta", type=float, default=parametric.DEFAULT_DELTA, help="Huber delta")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--quiet", action="store_true")
  args = p.parse_args(argv)
  if args.bootstrap < 0:
    raise UserError(f"--bootstrap must be >= 0, got {args.bootstrap}")
  if not args.delta > 0:
    raise UserError(f"--delta must be positive, got {args.delta}")
  for path in args.runs:  # gs:// without gcsfs: one line before anything is read
    atomic.check_backend(path, None)
  atomic.check_backend(args.out, "--out")
  if args.plots:
    atomic.check_backend(args.plots, "--plots")
  return args


def parse_approaches(spec: str | None) -> tuple[set[str], bool]:
  """Returns (approaches, explicit). Approach 3 is always in."""
  if spec is None:
    return {"1", "2", "3"}, False
  chosen = {s.strip() for s in spec.split(",") if s.strip()}
  bad = chosen - {"1", "2", "3"}
  if bad or not chosen:
    raise UserError(f"--approach takes a comma list of 1, 2, 3; got {spec!r}")
  return chosen | {"3"}, True


def percentile_ci(samples: np.ndarray) -> list[float]:
  lo, hi = np.nanpercentile(samples, [50 * (1 - CI_LEVEL), 50 * (1 + CI_LEVEL)])
  return [float(lo), float(hi)]


def power_law(theta) -> dict:
  """Approach 3's optimum as N* = k_N·C^a, D* = k_D·C^b (the form Approaches 1 and 2 give)."""
  a, b = optimum.exponents(theta)
  with np.errstate(all="ignore"):  # degenerate bootstrap rows give inf/nan, dropped later
    log_G = np.log(optimum.G(theta))
  out = {"a": a, "b": b, "log_kN": log_G - a * np.log(6.0), "log_kD": -log_G - b * np.log(6.0)}
  return {k: float(v) if np.ndim(v) == 0 else np.asarray(v) for k, v in out.items()}


def write_plots(runs: runs_lib.Runs, result: dict, law_dict: dict, folder: str) -> list[str]:
  import os
  written = []
  if "fit2" in result:
    written += plots.plot_isoflops(runs, result["fit2"], os.path.join(folder, "isoflops"))
  labels = {"1": "Approach 1", "2": "Approach 2", "3": "Approach 3"}
  lines = {labels[k]: v for k, v in result["approaches"].items()}
  boot = {labels[k]: v for k, v in result["boot"].items()}
  C_range = (float(runs.C.min()) / 10, float(runs.C.max()) * 1e4)
  written += plots.plot_optimal(lines, os.path.join(folder, "optimal"), samples=boot,
                                level=CI_LEVEL, C_range=C_range)
  law = law_dict["law"]
  written += plots.plot_law(os.path.join(folder, "law"), E=law["E"], A=law["A"], B=law["B"],
                            alpha=law["alpha"], beta=law["beta"], N=runs.N, D=runs.D,
                            budgets=sorted({float(runs.C[g].mean()) for g in
                                            runs_lib.budget_groups(runs)}))
  return written


def fit_all(runs: runs_lib.Runs, args, approaches: set[str], explicit: bool, log) -> dict:
  """Runs every approach asked for; returns the pieces law.json is built from."""
  out = {"approaches": {}, "notes": [], "samples": None, "boot": {}}

  fit3 = parametric.fit_parametric(runs.N, runs.D, runs.loss, delta=args.delta)
  out["fit3"] = fit3
  if len(runs) < 15:
    out["notes"].append(
        f"Approach 3 fits 5 parameters to {len(runs)} runs: its law, and the table below, are "
        "poorly determined; read the exponents of Approach 2 and train more runs")
  theta3 = np.array([fit3.E, fit3.A, fit3.B, fit3.alpha, fit3.beta])
  entry3 = {"E": fit3.E, "A": fit3.A, "B": fit3.B, "alpha": fit3.alpha, "beta": fit3.beta,
            **power_law(theta3), "objective": fit3.objective, "warnings": list(fit3.warnings)}
  if args.bootstrap:
    log(f"bootstrap: {args.bootstrap} resamples of Approach 3 ...")
    samples = bootstrap_lib.bootstrap_parametric(
        runs.N, runs.D, runs.loss, n_resamples=args.bootstrap, seed=args.seed,
        delta=args.delta, fit=fit3)
    out["samples"] = samples
    out["boot"]["3"] = power_law(samples)
    entry3["ci"] = {k: percentile_ci(out["boot"]["3"][k]) for k in ("a", "b")}
  out["approaches"]["3"] = entry3

  for name, fit_fn, boot_fn in (("2", isoflop.fit_isoflop, isoflop.bootstrap_isoflop),
                                ("1", envelope.fit_envelope, envelope.bootstrap_envelope)):
    if name not in approaches:
      continue
    try:
      fit = fit_fn(runs)
    except UserError as e:
      if explicit:
        raise
      out["notes"].append(f"Approach {name} skipped: {e}")
      continue
    entry = fit.to_dict()
    if args.bootstrap:
      try:
        boot = boot_fn(runs, n_resamples=args.bootstrap, seed=args.seed)
        if boot["n_failed"] > boot["n_resamples"] / 2:
          # The survivors of a mostly failed bootstrap are the resamples closest to the
          # original fit: their spread would understate the uncertainty.
          raise UserError(f"{boot['n_failed']} of {boot['n_resamples']} bootstrap resamples "
                          "could not be fitted; sample more sizes per budget")
        out["boot"][name] = boot
        entry["ci"] = {k: percentile_ci(np.asarray(boot[k])) for k in ("a", "b")}
      except UserError as e:
        out["notes"].append(f"Approach {name} has no interval: {e}")
    out["approaches"][name] = entry
    out[f"fit{name}"] = fit
  return out


def summary(law: law_lib.ScalingLaw, result: dict, n_runs: int) -> str:
  """The fitted law, each approach's exponents, and the optimum from the fitted budgets up."""
  fit3 = result["fit3"]
  lines = [f"fitted {n_runs} runs: L(N, D) = {fit3.E:.4g} + {fit3.A:.4g}/N^{fit3.alpha:.4f}"
           f" + {fit3.B:.4g}/D^{fit3.beta:.4f}",
           f"  Huber objective {fit3.objective:.6g}; {fit3.n_at_best}/{fit3.n_starts} starts "
           f"reached it"]
  lines += [f"  warning: {w}" for w in fit3.warnings]
  for name in ("1", "2", "3"):
    entry = result["approaches"].get(name)
    if entry is None:
      continue
    ci = entry.get("ci")
    a_ci = f" [{ci['a'][0]:.3f}, {ci['a'][1]:.3f}]" if ci else ""
    b_ci = f" [{ci['b'][0]:.3f}, {ci['b'][1]:.3f}]" if ci else ""
    lines.append(f"  Approach {name}: a = {entry['a']:.3f}{a_ci}   b = {entry['b']:.3f}{b_ci}")
  lines += [f"  note: {n}" for n in result["notes"]]
  if "fit2" in result:
    lines += [f"  note: {d}" for d in result["fit2"].dropped]
  lines.append(f"  {'C (FLOPs)':>10}  {'N*':>10}  {'D*':>10}  {'D*/N*':>7}  {'loss':>7}")
  C_max = float(law.fitted_range[1])
  for k in DECADES_TO_SHOW:
    C = C_max * 10**k
    N, D = law.optimum(C)
    lines.append(f"  {C:10.1e}  {N:10.3e}  {D:10.3e}  {D / N:7.3g}  {float(law.predict(N, D)):7.4f}")
  return "\n".join(lines)


def main(argv: list[str]) -> int:
  args = parse_args(argv)
  approaches, explicit = parse_approaches(args.approach)
  log = (lambda *_: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))

  runs = runs_lib.load_runs(args.runs, params=args.params, flops=args.flops,
                            schedule=args.schedule)
  if runs.n_failed:
    log(f"skipped {runs.n_failed} failed runs")
  if len(runs) < 5:
    raise UserError(f"Approach 3 fits 5 parameters and needs at least 5 runs; got {len(runs)}")
  result = fit_all(runs, args, approaches, explicit, log)

  fit3 = result["fit3"]
  law_dict = law_lib.build_law(
      E=fit3.E, A=fit3.A, B=fit3.B, alpha=fit3.alpha, beta=fit3.beta,
      objective=fit3.objective, n_starts=fit3.n_starts, n_at_best=fit3.n_at_best,
      n_points=fit3.n_points, fit_warnings=fit3.warnings, delta=fit3.delta,
      samples=result["samples"], seed=args.seed if args.bootstrap else None, ci_level=CI_LEVEL,
      approaches=result["approaches"], params_convention=args.params, flops_convention=args.flops,
      N=runs.N, D=runs.D, C=runs.C, inputs=list(args.runs))
  dropped = (law_dict.get("bootstrap") or {}).get("dropped", 0)
  if dropped:
    result["notes"].append(
        f"{dropped} of {args.bootstrap} bootstrap refits gave no law (alpha, beta, A or B not "
        "positive) and were dropped: the intervals are optimistic; fit more budgets or sizes")
  law_lib.save_law(args.out, law_dict)
  law = law_lib.ScalingLaw.from_dict(law_dict)

  written = [args.out]
  if args.plots:
    written += write_plots(runs, result, law_dict, args.plots)
  if not args.quiet:
    print(summary(law, result, len(runs)))
    print("wrote " + ", ".join(written))
  return 0
