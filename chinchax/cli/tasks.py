"""`chinchax fit-tasks RUNS.csv|WORKDIR [--out=tasks.json] [--bootstrap=N] [--ci=0.9]
[--plots=DIR] [--loss-unit=bpb|nats] [--last=K] [--chance=P] [--seed=S] [--quiet]`.

Fits each task's accuracy from N and D in two steps: step 1 the task's loss L(N, D) = E +
A/N^alpha + B/D^beta (Approach 3) on each run's final evaluations (the mean of its last K),
step 2 accuracy = floor + (ceiling - floor)·sigmoid(-k·(L - L0)) on every evaluation,
intermediate checkpoints included; intervals from one bootstrap over runs through both steps.
The sigmoid because it is bounded where accuracy is, each of its numbers means something
(floor: chance, held when the CSV's chance column or --chance gives it; ceiling; the loss
L0 at half-way; the turn's sharpness k), and it is the model ladders' form; its ceiling is
named as not identified when the evaluations never pass its midpoint.

RUNS.csv has one row per evaluation: run, N, D (tokens seen at that evaluation), task, loss
(the task's loss of the correct continuation, in --loss-unit), accuracy (in [0, 1]) and
optionally chance; or WORKDIR, a sweep workdir whose runs scored tasks (train.tasks): each
evaluation of its runs.jsonl's records, in bits per byte, N the runs' N_total. Writes
tasks.json; `chinchax plan --tasks=tasks.json --params=N --tokens=D` predicts from it.

    chinchax fit-tasks ladder.csv --out=tasks.json --plots=plots/

The fit is chinchax.fit_tasks (scaling.tasks.fit); this module parses flags and prints.
"""

import sys

from chinchax import atomic
from chinchax.cli import argtypes
from chinchax.errors import UserError
from chinchax.scaling.tasks import fit as tasks_fit
from chinchax.scaling.tasks import file as tasks_file
from chinchax.scaling.tasks import text


def _parser():
  p = argtypes.Parser(prog="chinchax fit-tasks", allow_abbrev=False,
                      description=" ".join(__doc__.split("\n\n")[1:3]).replace("\n", " "),
                      epilog="example: chinchax fit-tasks ladder.csv --out=tasks.json "
                             "--plots=plots/")
  p.add_argument("runs", help="CSV of task evaluations: run, N, D, task, loss, accuracy "
                 "[, chance]; or a sweep workdir whose runs scored tasks")
  p.add_argument("--out", default="tasks.json", help="where to write tasks.json (default: "
                 "./tasks.json)")
  p.add_argument("--bootstrap", type=argtypes.count, default=1000,
                 help="resamples of runs through both steps (0: no intervals; default: 1000)")
  p.add_argument("--ci", type=argtypes.interval_level, default=0.9,
                 help="interval level (default: 0.9)")
  p.add_argument("--plots", default=None, help="folder for each task's step 1 and step 2 "
                 "figure, PNG and SVG (default: none)")
  p.add_argument("--loss-unit", default="bpb", choices=tuple(tasks_file.LOSS_UNITS),
                 help="the loss column's unit: bits per byte or nats of the correct "
                      "continuation (default: bpb)")
  p.add_argument("--last", type=int, default=1,
                 help="step 1 reads the mean of each run's last K evaluations (default: 1, "
                      "the final one)")
  p.add_argument("--chance", type=float, default=None,
                 help="the floor step 2 holds for tasks without a chance column, e.g. 0.25 "
                      "for four choices (default: fitted)")
  p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default: 0)")
  p.add_argument("--quiet", action="store_true", help="print nothing")
  return p


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)
  if args.last < 1:
    raise UserError(f"--last must be a whole number >= 1, got {args.last}")
  if args.chance is not None and not 0 <= args.chance < 1:
    raise UserError(f"--chance must be in [0, 1) (0.25 for four choices), got {args.chance}")
  atomic.check_backend(args.runs, None)
  atomic.check_backend(args.out, "--out")
  log = (lambda *_: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
  laws = tasks_fit.fit_tasks(args.runs, out=args.out, bootstrap=args.bootstrap, ci=args.ci,
                             seed=args.seed, last=args.last, loss_unit=args.loss_unit,
                             chance=args.chance, plots=args.plots, log=log)
  if not args.quiet:
    print(text.summary(laws.doc))
    print("wrote " + ", ".join(laws.written))
  return 0
