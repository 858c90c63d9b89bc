"""`chinchax plan`: N, D, loss and intervals for a budget, from a law.json or a preset.

    chinchax plan (--law=law.json | --preset=NAME) [--flops=C] [--params=N] [--tokens=D]
                  [--unique-tokens=U] [--inference-tokens=T] [--ci=LEVEL] [--json]
                  [--params-convention=total|non_embedding] [--flops-convention=6ND|chinchilla]
                  [--hparams=hparams.json]

`--tasks=tasks.json` (from `chinchax fit-tasks`) adds each task's predicted loss and accuracy
with their intervals at --params and --tokens, or, with --flops and a law, at the law's N*, D*;
each is flagged `extrapolated` when its loss lies outside the losses the task's sigmoid was
fitted on (`tasks` in the JSON). Without a law, --params and --tokens alone.
`--hparams` adds the peak LR and batch of the planned N, D from a law of `chinchax fit-hparams`,
with their intervals (`hparams` in the JSON). Numbers take float syntax (1e21) or a k/M/B/T suffix (70B, 1.4T). Intervals are at --ci
(default: the level the law was fitted at, 0.9 unless `chinchax fit --ci` said otherwise).
Every plan says how far it lies outside the fitted ranges of N, D and C, and warns beyond
3x. The plan is chinchax.plan (scaling.api); this module parses flags and prints its table,
or one JSON object with --json.
"""

import argparse
import json
import math
import sys

from chinchax.scaling import api
from chinchax.scaling.hparams import file as hparams_file
from chinchax.scaling.hparams import plan as hparams_plan
from chinchax.scaling.law import coefficients
from chinchax.scaling.law import presets
from chinchax.scaling.runs.conventions import FLOPS_CONVENTIONS, PARAMS_CONVENTIONS
from chinchax.scaling.tasks import fit as tasks_fit
from chinchax.scaling.tasks import text as tasks_text
from chinchax.errors import UserError
from chinchax.cli import argtypes
from chinchax.scaling.law.artifact import ScalingLaw

_SUFFIXES = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _number(text: str) -> float:
  scale = _SUFFIXES.get(text[-1:], 1.0)
  body = text[:-1] if text[-1:] in _SUFFIXES else text
  if scale != 1.0 and "e" in body.lower():  # 1e22B: 1e31, or a typo for 1e22?
    raise argparse.ArgumentTypeError(f"{text!r} has both an exponent and a suffix; write one "
                                     f"(e.g. {body} or 70B)")
  try:
    x = float(body) * scale
  except ValueError:
    raise argparse.ArgumentTypeError(f"not a number: {text!r} (use e.g. 1e21 or 70B)") from None
  if not (math.isfinite(x) and x > 0):
    raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
  return x


def _parser() -> argparse.ArgumentParser:
  p = argtypes.Parser(prog="chinchax plan", description=__doc__.split("\n\n")[0],
                      allow_abbrev=False)
  p.add_argument("--law", help="law.json written by `chinchax fit` or `chinchax law`, or a "
                 "JSON object of E, A, B, alpha, beta alone")
  p.add_argument("--preset", help=f"a published law: {', '.join(presets.names())}")
  p.add_argument("--flops", type=_number, metavar="C", help="training FLOPs (C = 6ND)")
  p.add_argument("--params", type=_number, metavar="N", help="model parameters")
  p.add_argument("--tokens", type=_number, metavar="D", help="training tokens")
  p.add_argument("--unique-tokens", type=_number, metavar="U",
                 help="unique tokens available (data-constrained plan)")
  p.add_argument("--inference-tokens", type=_number, metavar="T",
                 help="tokens the model will serve (inference-aware plan)")
  p.add_argument("--ci", type=argtypes.interval_level, metavar="LEVEL",
                 help="interval level in (0, 1) (default: the law's, 0.9 from chinchax fit)")
  p.add_argument("--params-convention", choices=PARAMS_CONVENTIONS,
                 help="the N you mean (as in chinchax fit); refused if the law counts otherwise")
  p.add_argument("--flops-convention", choices=FLOPS_CONVENTIONS,
                 help="the C you mean (as in chinchax fit); refused if the law counts otherwise")
  p.add_argument("--hparams", metavar="hparams.json",
                 help="print the peak LR and batch of the planned N, D from this fitted law")
  p.add_argument("--tasks", metavar="tasks.json",
                 help="print each task's predicted loss and accuracy at the planned N, D from "
                      "this file of `chinchax fit-tasks`")
  p.add_argument("--json", action="store_true", help="print one JSON object")
  return p


def _check_conventions(law: ScalingLaw, args) -> None:
  """A budget counted one way is not a plan for a law fitted the other way: refused."""
  have = law.conventions
  for key, asked in (("params", args.params_convention), ("flops", args.flops_convention)):
    if asked and have.get(key) and asked != have[key]:
      raise UserError(f"--{key}-convention={asked}, but this law counts {key} as "
                      f"{have[key]!r}; refit the runs with `chinchax fit --{key}-convention="
                      f"{asked}` or drop the flag")


def _load(args) -> ScalingLaw:
  if args.law and args.preset:
    raise UserError("give either --law or --preset, not both")
  if args.preset:
    return presets.preset(args.preset)
  if args.law:  # a law.json, or a file of the five coefficients alone
    return coefficients.load(args.law)
  raise UserError(f"no law: give --law=law.json or --preset=NAME "
                  f"({', '.join(presets.names())})")


def _tasks_alone(args) -> int:
  """--tasks without a law: the tasks at the given N and D."""
  if args.flops is not None or args.params is None or args.tokens is None:
    raise UserError("--tasks without a law needs --params=N and --tokens=D; for a budget "
                    "--flops=C add --law=law.json (or --preset=NAME) to choose N*, D*")
  for flag in ("unique_tokens", "inference_tokens", "hparams"):
    if getattr(args, flag) is not None:
      raise UserError(f"--{flag.replace('_', '-')} needs a law: add --law=law.json or "
                      "--preset=NAME")
  laws = tasks_fit.TaskLaws.load(args.tasks)
  predictions = laws.at(args.params, args.tokens, args.ci)
  level = laws.doc["settings"]["ci"] if args.ci is None else args.ci
  print(json.dumps({"tasks": predictions}, indent=2, allow_nan=False) if args.json else
        tasks_text.plan_table(predictions, level, args.params, args.tokens))
  sys.stdout.flush()
  return 0


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)  # --help exits through the dispatcher (cli/__init__.py)
  if args.tasks and not (args.law or args.preset):
    return _tasks_alone(args)
  law = _load(args)
  _check_conventions(law, args)
  plan = api.plan(law, flops=args.flops, params=args.params, tokens=args.tokens,
                  unique_tokens=args.unique_tokens, inference_tokens=args.inference_tokens,
                  ci=args.ci)
  tasks = tasks_fit.TaskLaws.load(args.tasks) if args.tasks else None
  extra, text = {}, str(plan)
  if args.hparams:
    hp = hparams_plan.at(hparams_file.load(args.hparams), plan.N, plan.D, args.ci)
    extra["hparams"] = hp
    seq = hp["conventions"].get("seq_len")
    text += "\n\nfrom " + args.hparams + ":\n" + hparams_plan.text(
        hp, seq if isinstance(seq, int) else None)
  if tasks is not None:
    extra["tasks"] = tasks.at(plan.N, plan.D, args.ci)
    level = tasks.doc["settings"]["ci"] if args.ci is None else args.ci
    text += "\n\nfrom " + args.tasks + ":\n" + tasks_text.plan_table(
        extra["tasks"], level, plan.N, plan.D)
  print(json.dumps({**plan.to_dict(), **extra}, indent=2, allow_nan=False) if args.json
        else text)
  sys.stdout.flush()
  return 0
