"""`chinchax eval`: held-out losses of a run's saved checkpoints, after the fact (probing).

    chinchax eval --workdir=DIR [--steps=all|last|best|S1,S2] [--data.corpus=PATH ...]
                  [--data.name=TFDS ...] [--eval_tokens=N]

Each selected checkpoint is evaluated on the run's validation set and on every extra corpus
or prepared TFDS dataset; the rows go to DIR/eval_probe.jsonl (sweeps/train/probe.py).
"""

from chinchax.cli import flags


def main(argv: list[str]) -> int:
  p = flags.ArgParser(prog="chinchax eval", description=__doc__.splitlines()[0])
  p.add_argument("--workdir", required=True, help="the run's folder (config.json, checkpoints/)")
  p.add_argument("--steps", default="last", help="all | last | best | comma list of steps")
  p.add_argument("--data.corpus", dest="corpus", action="append", default=[],
                 help="extra held-out corpus (directory or glob of text); repeatable")
  p.add_argument("--data.name", dest="name", action="append", default=[],
                 help="extra held-out prepared TFDS dataset; repeatable")
  p.add_argument("--eval_tokens", type=int, default=None, help="tokens per set (default: run's)")
  p.add_argument("--quiet", action="store_true")
  args = p.parse_args(argv)
  from chinchax.sweeps.train import probe  # pylint: disable=g-import-not-at-top  (jax: after the flags)
  from chinchax.sweeps.hosts import distributed  # pylint: disable=g-import-not-at-top
  distributed.join()  # a multi-host job: every process runs this, with the same flags
  distributed.same_on_every_process(flags=repr(sorted(vars(args).items())))
  rows = probe.probe(args.workdir, args.steps,
                     corpora=[x for arg in args.corpus for x in arg.split(",") if x],
                     names=[x for arg in args.name for x in arg.split(",") if x],
                     eval_tokens=args.eval_tokens)
  if not args.quiet:
    for r in rows:
      print(f"step {r['step']} ({r['checkpoint']}) | {r['set']}: {r['eval_loss']:.4f} nats/token")
  return 0
