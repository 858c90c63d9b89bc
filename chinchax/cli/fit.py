"""`chinchax fit RUNS... [--out=law.json] [--approach=1,2,3] [--bootstrap=N] [--ci=0.9]
[--plots=DIR] [--params-convention=total] [--flops-convention=6ND] [--base-law=law.json]
[--approach2-method=auto|local|vp|vp_levels|parabola]`.

Reads runs (a sweep workdir, a runs.jsonl or a CSV with N, D or C, loss and optionally
budget, U), fits every approach the data support (or those asked for), writes law.json and,
optionally, the plots, and prints first what the data support: each approach's exponents a
and b with their intervals, whether the approaches agree, and the law of the recommended
approach (Approach 3's parametric law only when it is well determined). Then every warning.
`--approach=2` writes Approach 2's allocation law. A CSV with a unique-tokens column U (or
runs.jsonl records with `unique_tokens`) whose runs repeat data also fits R_D* and R_N*.

    chinchax fit runs/smoke --out=law.json --bootstrap=1000 --plots=plots/

The fit is chinchax.fit (scaling.api); this module parses flags and prints.
"""

import argparse
import sys

from chinchax import atomic
from chinchax.cli import argtypes
from chinchax.errors import UserError
from chinchax.scaling import api
from chinchax.scaling.isoflop import fit as isoflop
from chinchax.scaling.law import artifact as law_artifact
from chinchax.scaling.numerics import forks
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.runs import table as runs_lib
from chinchax.scaling.runs.conventions import FLOPS_CONVENTIONS, PARAMS_CONVENTIONS

# Flags that mean something else here than in `chinchax plan` (or did before): one line.
_RENAMED = {
    "--flops": "--flops is a budget (chinchax plan); the FLOP counting convention of the runs "
               "is --flops-convention=6ND|chinchilla",
    "--params": "--params is a model size (chinchax plan); the parameter counting convention "
                "of the runs is --params-convention=total|non_embedding",
}


def _parser() -> argparse.ArgumentParser:
  p = argtypes.Parser(prog="chinchax fit", allow_abbrev=False,
              description=__doc__.split("\n\n")[1].replace("\n", " "),
              epilog="example: chinchax fit runs/smoke --out=law.json --bootstrap=1000 "
                     "--plots=plots/")
  p.add_argument("runs", nargs="+", help="sweep workdir, runs.jsonl or CSV (N, D or C, loss)")
  p.add_argument("--out", default="law.json",
                 help="where to write law.json (default: ./law.json; an existing file there "
                      "is replaced, and the output says so)")
  p.add_argument("--approach", default=None,
                 help="comma list of 1,2,3 (default: every approach the data support)")
  p.add_argument("--approach2-method", default="auto", choices=isoflop.METHODS,
                 help="how Approach 2 places each budget's minimum: auto (the joint profile "
                      "fit when it fits the runs, else local), local (the runs near the "
                      "lowest loss), vp, vp_levels, parabola (default: auto)")
  p.add_argument("--bootstrap", type=argtypes.count, default=1000,
                 help="resamples (0: no intervals; default: 1000)")
  p.add_argument("--ci", type=argtypes.interval_level, default=0.9,
                 help="interval level (default: 0.9)")
  p.add_argument("--plots", default=None, help="folder for PNG and SVG plots (default: none)")
  p.add_argument("--params-convention", default="total", choices=PARAMS_CONVENTIONS,
                 help="N counts every parameter (total) or not the embeddings (default: total)")
  p.add_argument("--flops-convention", default="6ND", choices=FLOPS_CONVENTIONS,
                 help="C = 6ND, or the full count of Hoffmann et al. App. F (chinchilla) "
                      "(default: 6ND)")
  p.add_argument("--schedule", default="all", choices=runs_lib.SCHEDULES,
                 help="fit cosine runs, WSD cooldown branches, or all (default: all)")
  p.add_argument("--base-law", default=None,
                 help="law.json whose E, A, B, alpha, beta the data-constrained fit keeps "
                      "(default: fitted jointly)")
  p.add_argument("--delta", type=float, default=parametric.DEFAULT_DELTA,
                 help=f"Huber delta (default: {parametric.DEFAULT_DELTA:g})")
  p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default: 0)")
  p.add_argument("--quiet", action="store_true", help="print nothing")
  return p


def parse_args(argv: list[str]) -> argparse.Namespace:
  for arg in argv:
    name = arg.split("=", 1)[0]
    if name in _RENAMED:
      raise UserError(_RENAMED[name])
  args = _parser().parse_args(argv)
  if not args.delta > 0:
    raise UserError(f"--delta must be positive, got {args.delta}")
  for path in args.runs:  # gs:// without gcsfs: one line before anything is read
    atomic.check_backend(path, None)
  atomic.check_backend(args.out, "--out")
  if args.plots:
    atomic.check_backend(args.plots, "--plots")
  return args


def main(argv: list[str]) -> int:
  args = parse_args(argv)  # --help exits through the dispatcher (cli/__init__.py)
  if args.plots:  # the figures' worker processes start (and import matplotlib) during the fit
    from chinchax.scaling.plots import workers  # pylint: disable=g-import-not-at-top
    workers.warm()
  log = (lambda *_: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
  replaced = law_artifact.replaced(args.out)
  try:
    with forks.allowed():  # the command's process runs no thread of its own beside the fit
      law, runs, written = api.fit_detailed(
          args.runs, approaches=args.approach, bootstrap=args.bootstrap, ci=args.ci,
          seed=args.seed, delta=args.delta, params_convention=args.params_convention,
          flops_convention=args.flops_convention, schedule=args.schedule,
          base_law=args.base_law, out=args.out, plots=args.plots, log=log,
          approach2_method=args.approach2_method)
  finally:
    if args.plots:  # none left behind where the command is a call (tests, a notebook)
      workers.close()
  if not args.quiet:
    print(api.summary(law, len(runs), args.out))
    print("wrote " + ", ".join(written) + (f" (replacing {replaced})" if replaced else ""))
  return 0
