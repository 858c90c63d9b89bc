"""`chinchax fit-hparams RUNS... [--out=hparams.json] [--json] [--lr-vars=N,D|C|N]
[--batch-vars=D|C|N,D] [--bootstrap=N] [--ci=0.9] [--plots=DIR] [--tol=0.01]`.

Reads the runs of an LR x batch grid at several (N, D) points (a sweep workdir, a runs.jsonl,
or a CSV with N, D, lr, batch_tokens, loss), locates each point's optimal peak LR and batch by
a local quadratic fit, fits power laws of the optima across points with bootstrap intervals,
writes hparams.json and prints each point's optimum and the laws (`--json`: one object).

    chinchax fit-hparams runs/hparams_smoke --out=hparams.json --plots=plots/

The fit is scaling.hparams.fit; this module parses flags and prints.
"""

import argparse
import json
import sys

from chinchax import atomic
from chinchax.scaling.hparams import fit as hparams_fit
from chinchax.scaling.hparams import law as hparams_law
from chinchax.scaling.hparams import text as hparams_text
from chinchax.cli import argtypes


def _tol(text: str) -> float:
  x = argtypes.interval_level(text)
  if x > 0.5:
    raise argparse.ArgumentTypeError(f"a relative loss tolerance, e.g. 0.01; got {text!r}")
  return x


def _parser() -> argparse.ArgumentParser:
  p = argtypes.Parser(prog="chinchax fit-hparams", allow_abbrev=False,
              description=__doc__.split("\n\n")[1].replace("\n", " "))
  p.add_argument("runs", nargs="+", help="sweep workdir, runs.jsonl, or CSV (N, D, lr, "
                 "batch_tokens, loss)")
  p.add_argument("--out", default="hparams.json", help="where to write hparams.json")
  p.add_argument("--json", action="store_true", help="print one JSON object")
  p.add_argument("--lr-vars", default="N,D", help="the LR law's variables: N,D | C | N")
  p.add_argument("--batch-vars", default="D", help="the batch law's variables: D | C | N,D")
  p.add_argument("--bootstrap", type=argtypes.count, default=1000,
                 help="resamples (0: no intervals)")
  p.add_argument("--ci", type=argtypes.interval_level, default=0.9, help="interval level")
  p.add_argument("--tol", type=_tol, default=0.01,
                 help="the loss tolerance of the reported LR and batch ranges (0.01: 1%%)")
  p.add_argument("--plots", default=None, help="folder for PNG and SVG plots")
  p.add_argument("--seed", type=int, default=0)
  return p


def public(doc: dict) -> dict:
  """The document as --json prints it: without the bootstrap draws."""
  out = dict(doc)
  for k in ("lr", "batch"):
    if out[k] is not None:
      out[k] = {kk: v for kk, v in out[k].items() if kk != "draws"}
  return out


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)  # --help exits through the dispatcher (cli/__init__.py)
  for path in args.runs:
    atomic.check_backend(path, None)
  atomic.check_backend(args.out, "--out")
  doc, written = hparams_fit.fit_and_write(
      args.runs, args.out, lr_vars=hparams_law.variables(args.lr_vars, "--lr-vars"),
      batch_vars=hparams_law.variables(args.batch_vars, "--batch-vars"),
      bootstrap=args.bootstrap, ci=args.ci, tol=args.tol, plots=args.plots, seed=args.seed)
  if args.json:
    print(json.dumps(public(doc)))
  else:
    print(hparams_text.summary(doc))
    print("wrote " + ", ".join(written))
  sys.stdout.flush()
  return 0
