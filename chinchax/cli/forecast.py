"""`chinchax forecast`: write down what a law says a run will reach, before the run; score it
after.

    chinchax forecast --law=law.json --flops=C [--params=N | --tokens=D] [--ci=LEVEL]
                      [--out=forecast.json]
    chinchax forecast --law=law.json --params=N --tokens=D [--out=forecast.json]
    chinchax forecast --score=forecast.json PATH       (a run or sweep workdir, or runs.jsonl)

A budget alone forecasts the law's compute-optimal model there. The record holds the loss
with its interval (the law's bootstrap), the law's hash and the time (scaling.plan.forecast). A
sweep config's `forecast` key names a record the sweep scores when it finishes (report.md);
--score does the same for any finished run or sweep and prints forecast, actual and whether
the actual fell inside the interval.
"""

import argparse

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.scaling.plan import forecast as forecast_lib
from chinchax.scaling.law.artifact import ScalingLaw
from chinchax.sweeps import forecast_score
from chinchax.cli import argtypes
from chinchax.cli.plan import _number


def _parser() -> argparse.ArgumentParser:
  p = argtypes.Parser(prog="chinchax forecast", description=__doc__.split("\n\n")[0],
              allow_abbrev=False)
  p.add_argument("path", nargs="?", help="with --score: a run or sweep workdir, or runs.jsonl")
  p.add_argument("--law", help="law.json written by `chinchax fit` (Approach 3: it predicts "
                               "losses)")
  p.add_argument("--flops", type=_number, metavar="C", help="training FLOPs of the run")
  p.add_argument("--params", type=_number, metavar="N", help="the run's parameters")
  p.add_argument("--tokens", type=_number, metavar="D", help="the run's training tokens")
  p.add_argument("--ci", type=argtypes.interval_level, metavar="LEVEL",
                 help="interval level (default: the law's)")
  p.add_argument("--out", default=None,
                 help="write the record (or, with --score, the score) there as JSON")
  p.add_argument("--score", metavar="FORECAST", help="score this forecast record against "
                                                     "the runs at PATH")
  return p


def _forecast(args) -> int:
  if args.path:
    raise UserError(f"unexpected argument {args.path!r}; a path is read only with --score")
  if not args.law:
    raise UserError("no law: give --law=law.json (or --score=forecast.json PATH to score one)")
  if args.out:
    atomic.check_writable(args.out, "out")
  law = ScalingLaw.load(args.law)
  record = forecast_lib.make(law, C=args.flops, N=args.params, D=args.tokens, level=args.ci)
  band = record["loss_ci"]
  print(f"forecast ({record['what']}): N = {fmt.count(record['N'])}, D = "
        f"{fmt.count(record['D'])}, C = {fmt.num(record['C'])}: loss {record['loss']:.4f}"
        + (f" {fmt.interval(band, 4)} ({fmt.percent(record['level'])})" if band else
           " (no interval: the law has no bootstrap draws)"))
  print(f"law {args.law} (sha256 {record['law']['sha256'][:12]}...), {record['created']}")
  for w in record["warnings"]:
    print(f"warning: {w}")
  if args.out:
    atomic.write_json(args.out, record)
    print(f"wrote {args.out}")
  return 0


def _score(args) -> int:
  if not args.path:
    raise UserError("--score needs the runs to score against: a run or sweep workdir, or a "
                    "runs.jsonl")
  if args.law or args.flops or args.params or args.tokens:
    raise UserError("--score reads the budget and law from the forecast record; drop --law, "
                    "--flops, --params and --tokens")
  if args.out:
    atomic.check_writable(args.out, "out")
  score = forecast_lib.score(forecast_score.load(args.score),
                             forecast_score.records_of(args.path))
  print(forecast_lib.score_line(score))
  if args.out:
    atomic.write_json(args.out, score)
    print(f"wrote {args.out}")
  return 0


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)  # --help exits through the dispatcher (cli/__init__.py)
  return _score(args) if args.score else _forecast(args)

