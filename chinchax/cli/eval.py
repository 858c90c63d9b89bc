"""`chinchax eval`: held-out losses of a run's saved checkpoints, after the fact (probing).

    chinchax eval --workdir=DIR [--steps=all|last|best|S1,S2] [--data.corpus=PATH ...]
                  [--data.name=TFDS ...] [--split=validation|train|all] [--eval_tokens=N|all]
                  [--tasks=NAME|FILE.jsonl,...|none]

Each selected checkpoint is evaluated on the run's validation set and on every extra corpus
or prepared TFDS dataset; the rows go to DIR/eval_probe.jsonl (sweeps/train/probe.py).
--split scores another split of each: `train` (the train split), or `all` (every file of a
text corpus, read from the files, so a corpus too small for a validation split is scored too;
a TFDS dataset's train and validation splits). Each set's size (files, tokens) is printed
first. The validation split is the ~5% of files picked by a hash of each file's path and
bytes (sweeps/data/text_builder.py), the files training never reads. A run that scored
multiple-choice tasks (`config.tasks`) has them scored at each checkpoint too, as the run
scored them; --tasks names others (built-in names or .jsonl files), or none.
"""

import argparse
import math

from chinchax.cli import flags


def main(argv: list[str]) -> int:
  p = flags.ArgParser(prog="chinchax eval", description=__doc__.splitlines()[0])
  p.add_argument("--workdir", required=True, help="the run's folder (config.json, checkpoints/)")
  p.add_argument("--steps", default="last", help="all | last | best | comma list of steps")
  p.add_argument("--data.corpus", dest="corpus", action="append", default=[],
                 help="extra held-out corpus (directory or glob of text); repeatable")
  p.add_argument("--data.name", dest="name", action="append", default=[],
                 help="extra held-out prepared TFDS dataset; repeatable")
  p.add_argument("--split", default="validation", choices=("validation", "train", "all"),
                 help="the split of each set to score (default validation)")
  p.add_argument("--eval_tokens", type=_tokens, default=None,
                 help="tokens per set (default: the run's); all: every whole batch")
  p.add_argument("--tasks", default=None,
                 help="multiple-choice tasks to score, comma list of built-in names or .jsonl "
                      "files, or none (default: the run's config.tasks)")
  p.add_argument("--quiet", action="store_true")
  args = p.parse_args(argv)
  tasks = None if args.tasks is None else tuple(
      t for t in args.tasks.split(",") if t.strip() and args.tasks.strip() != "none")
  from chinchax.sweeps.train import probe  # pylint: disable=g-import-not-at-top  (jax: after the flags)
  from chinchax.sweeps.hosts import distributed  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps import console  # pylint: disable=g-import-not-at-top
  distributed.join()  # a multi-host job: every process runs this, with the same flags
  distributed.same_on_every_process(flags=repr(sorted(vars(args).items())))
  with console.quiet_libraries():  # TFDS's notices on stderr would bury a one-line refusal
    rows = probe.probe(args.workdir, args.steps,
                       corpora=[x for arg in args.corpus for x in arg.split(",") if x],
                       names=[x for arg in args.name for x in arg.split(",") if x],
                       eval_tokens=args.eval_tokens, split=args.split,
                       say=None if args.quiet else print, tasks=tasks)
  if not args.quiet:
    for r in rows:
      where = f"step {r['step']} ({r['checkpoint']})"
      if "task" in r:
        print(f"{where} | task {r['task']}: {r['loss']:.4f} bits/byte, accuracy "
              f"{r['accuracy']:.3f} ({r['items']} items)")
      else:
        print(f"{where} | {r['set']}: {r['eval_loss']:.4f} nats/token")
  return 0


def _tokens(text: str) -> int | str:
  """--eval_tokens: a positive whole number (4096, 1e4) or "all"."""
  if text == "all":
    return text
  try:
    n = float(text)
  except ValueError:
    n = 0.0
  if not (math.isfinite(n) and n >= 1 and n == int(n)):
    raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens, nor 'all'")
  return int(n)
