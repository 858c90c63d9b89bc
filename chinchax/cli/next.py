"""`chinchax next`: the cells to train next, those expected to narrow the answer most per FLOP.

    chinchax next [RUNS...] --candidates=POOL.csv [--k=4] [--flops-left=F] [--target-flops=C]
                  [--target=N|a] [--width=W] [--json]
    chinchax next WORKDIR [--k=4] ...     (the pool: the workdir's sweep config's grid)

The answer is log N*(C) at --target-flops (default 10x the pool's largest budget), or the
exponent a of N* ∝ C^a with --target=a. How a cell is judged: Approach 3's law is fitted to
the runs with 200 bootstrap refits (seed 0). While that fit is poorly determined (it warns: E
at 0, A or B run off, a term not identified; or the answer's 90% interval is wider than 0.3
for a, 1.0 for log N*; or the draws are far from Gaussian: their interval over 1.5x wider or
narrower than a normal's with their robust sd) the cells are a D-optimal design per FLOP for
the law's five parameters at the draws' median, and no width is promised. Once it is well
determined, the answer and every candidate's log-loss are taken as jointly Gaussian over the
draws, and a cell's expected narrowing is the variance of the answer its observed loss would
remove (Cov(answer, log L_cell)^2 / (Var(log L_cell) + noise^2), the noise from the fit's
residuals), divided by its cost 6ND (the pool's C column where it gives one). K cells are
chosen greedily, each conditioned on those before, within --flops-left; cells with D/N < 1
only when no other fits. With fewer than 8 runs the cells are a space-filling first design
over the cheaper half of the pool's budgets (log C and each size's place among its budget's
sizes). Stop when the answer's 90% interval is at most --width wide (default 0.25 for log N*,
a factor 1.28; 0.05 for a) and the fit is well determined, or no cell not yet run fits in the
FLOPs left. An adaptive sweep's workdir offers its config's whole grid (adaptive_pool.csv),
not only the budgets chosen so far. POOL.csv has columns N and D
(or C) and optionally budget; RUNS are what `chinchax fit` reads. --json prints {"next": [...],
"stop": ..., "why": ..., "expected": {...}}; the text, one line per cell saying why."""

import argparse
import json
import os
import sys

import ml_collections

from chinchax import atomic
from chinchax.cli import argtypes
from chinchax.cli import plan as plan_cli
from chinchax.errors import UserError
from chinchax.scaling import api
from chinchax.scaling.select import answer, decide
from chinchax.scaling.select import pool as pool_lib
from chinchax.sweeps.adaptive import rounds


def _parser() -> argparse.ArgumentParser:
  p = argtypes.Parser(prog="chinchax next", description=__doc__.split("\n\n")[0],
                      allow_abbrev=False)
  p.add_argument("runs", nargs="*", metavar="RUNS",
                 help="runs so far (sweep workdir, runs.jsonl, CSV); none at the start")
  p.add_argument("--candidates", metavar="CSV",
                 help="the pool: columns N and D (or C), optionally budget (default: the "
                 "grid of the sweep config recorded in the workdir given as RUNS)")
  p.add_argument("--k", type=int, default=4, help="cells to choose (default 4)")
  p.add_argument("--flops-left", type=plan_cli._number, metavar="F",  # pylint: disable=protected-access
                 help="FLOPs the chosen cells may cost together (default: no limit)")
  p.add_argument("--target-flops", type=plan_cli._number, metavar="C",  # pylint: disable=protected-access
                 help="the budget whose N* is the answer (default 10x the pool's largest)")
  p.add_argument("--target", default="N", choices=answer.TARGETS,
                 help="N: log N*(C) at --target-flops (default); a: the exponent of N* ∝ C^a")
  p.add_argument("--width", type=float, metavar="W",
                 help="stop when the 90%% interval of the answer is at most this wide "
                 "(default 0.25 for log N*, 0.05 for a)")
  p.add_argument("--json", action="store_true", help="print one JSON object")
  return p


def _pool(args) -> pool_lib.Pool:
  if args.candidates:
    return pool_lib.read_pool(args.candidates)
  if len(args.runs) != 1:
    raise UserError("give --candidates=CSV (columns N, D, optionally budget), or one sweep "
                    "workdir as RUNS whose config's grid is the pool")
  return _grid_pool(args.runs[0])


def _grid_pool(workdir: str) -> pool_lib.Pool:
  """The pool of the sweep config a workdir recorded: an adaptive study's whole grid
  (WORKDIR/adaptive_pool.csv; its sweep.json holds only the budgets chosen so far), else the
  grid of WORKDIR/sweep.json, its budgets at every size of its shape family (sweeps/spec.py
  `pool_cells`)."""
  written = os.path.join(workdir, rounds.POOL)
  if atomic.isdir(workdir) and atomic.exists(written):
    return pool_lib.read_pool(written)
  path = os.path.join(workdir, "sweep.json")
  text = atomic.read_text(path) if atomic.isdir(workdir) else None
  if text is None:
    raise UserError(f"{workdir}: not a sweep workdir with a sweep.json; give the pool as "
                    "--candidates=CSV (columns N, D, optionally budget)")
  try:
    config = ml_collections.ConfigDict(json.loads(text))
  except (ValueError, TypeError) as e:
    raise UserError(f"{path}: cannot read it as a sweep config ({e}); give the pool as "
                    "--candidates=CSV") from None
  # Here, not at the top: the sweep's spec imports the trainer (jax), which --help, a refused
  # flag and a pool given as --candidates do without.
  from chinchax.sweeps import spec  # pylint: disable=g-import-not-at-top
  cells = spec.pool_cells(config)
  return pool_lib.make_pool(
      [c.N for c in cells], [c.D for c in cells], budget=[c.budget for c in cells],
      cost=[c.flops_6ND if c.flops == "6ND" else c.flops_chinchilla for c in cells],
      source=f"the grid of {path}")


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)
  decide.check_request(args.k, args.flops_left, args.width)
  pool = _pool(args)
  runs = api.as_runs(args.runs) if args.runs and _has_runs(args.runs) else None
  d = decide.choose(runs, pool, args.k, flops_left=args.flops_left,
                    C_target=args.target_flops, target=args.target, width=args.width)
  print(json.dumps(d.to_dict(), indent=2, allow_nan=False) if args.json else d.text())
  sys.stdout.flush()
  return 0


def _has_runs(paths: list[str]) -> bool:
  """False for a lone sweep workdir that has no runs.jsonl yet (a study not started)."""
  return not (len(paths) == 1 and atomic.isdir(paths[0]) and
              not atomic.exists(os.path.join(paths[0], "runs.jsonl")))
