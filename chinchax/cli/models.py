"""`chinchax models`: the shape recipe's table over a log grid of parameter counts.

Each row: the target N, the recipe's shape, N in both conventions, training FLOPs per token
in both conventions (`6N` with N total, and Chinchilla's App. F count), then the proportions
the recipe holds (`models/config.py`): head_dim, d_model / n_layers and d_ff / d_model. A
target the vocabulary makes unreachable is shown as such rather than stopping the table.
"""

import sys

import numpy as np

from chinchax.cli import flags
from chinchax.errors import UserError
from chinchax.models.config import shape_for_params
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions

HEADER = ("N target", "d_model", "layers", "heads", "d_ff", "N total", "N non-emb",
          "FLOPs/tok 6N", "FLOPs/tok chinchilla", "head_dim", "d/L", "d_ff/d")


def _parser() -> flags.ArgParser:
  p = flags.ArgParser(prog="chinchax models", description=__doc__.splitlines()[0])
  p.add_argument("--vocab", type=int, default=32000, help="vocabulary size (default 32000)")
  p.add_argument("--seq-len", type=int, default=2048, help="sequence length (default 2048)")
  p.add_argument("--min", type=float, default=1e6, help="smallest N target (default 1e6)")
  p.add_argument("--max", type=float, default=1e10, help="largest N target (default 1e10)")
  p.add_argument("--per-decade", type=int, default=2, help="grid points per decade (default 2)")
  p.add_argument("--tied", action="store_true", help="tie the output head to the embedding")
  p.add_argument("--params-convention", dest="convention", default="total",
                 choices=conventions.PARAMS_CONVENTIONS,
                 help="which N the targets count (default total), as in chinchax fit")
  return p


# The old spelling still works, with a note: flags named as in `chinchax fit` and `plan`.
DEPRECATED = {"--convention": "--params-convention"}


def _renamed(argv: list[str]) -> list[str]:
  out = []
  for a in argv:
    name, eq, value = a.partition("=")
    if name in DEPRECATED:
      print(f"chinchax models: {name} is now {DEPRECATED[name]}", file=sys.stderr)
      a = DEPRECATED[name] + eq + value
    out.append(a)
  return out


def grid(N_min: float, N_max: float, per_decade: int) -> np.ndarray:
  if not 0 < N_min <= N_max:
    raise UserError(f"models: need 0 < --min <= --max, got --min={N_min:g} --max={N_max:g}")
  if per_decade < 1:
    raise UserError(f"models: --per-decade must be >= 1, got {per_decade}")
  n = int(np.floor(np.log10(N_max / N_min) * per_decade + 1e-9)) + 1
  return N_min * 10.0 ** (np.arange(n) / per_decade)


def rows(N_targets, *, vocab: int, seq_len: int, tied: bool,
         convention: str) -> list[tuple[str, ...]]:
  """One table row per target N: the recipe's shape and its counts."""
  out = []
  for N in N_targets:
    try:
      s = shape_for_params(N, vocab_size=vocab, seq_len=seq_len, tied=tied,
                           convention=convention)
    except UserError:
      out.append((fmt.num(N), "unreachable for this vocab") + ("",) * (len(HEADER) - 2))
      continue
    out.append((
        fmt.num(N), str(s.d_model), str(s.n_layers), str(s.n_heads), str(s.d_ff),
        f"{conventions.params(s, 'total'):,}", f"{conventions.params(s, 'non_embedding'):,}",
        fmt.num(conventions.flops_per_token(s, '6ND'), 4),
        fmt.num(conventions.flops_per_token(s, 'chinchilla'), 4), str(s.head_dim),
        f"{s.d_model / s.n_layers:.1f}", f"{s.d_ff / s.d_model:.2f}"))
  return out


def main(argv: list[str]) -> int:
  args = _parser().parse_args(_renamed(argv))
  if args.vocab <= 0 or args.seq_len <= 0:
    raise UserError(f"models: --vocab and --seq-len must be positive, got {args.vocab}, "
                    f"{args.seq_len}")
  table = [HEADER] + rows(grid(args.min, args.max, args.per_decade), vocab=args.vocab,
                          seq_len=args.seq_len, tied=args.tied, convention=args.convention)
  widths = [max(len(r[i]) for r in table if len(r[1]) < 20 or i != 1) for i in range(len(HEADER))]
  print(f"# vocab={args.vocab} seq_len={args.seq_len} tied={args.tied} "
        f"targets count {args.convention} parameters")
  for r in table:
    print("  ".join(c.rjust(w) if i != 1 or len(c) < 20 else c for i, (c, w) in
                    enumerate(zip(r, widths))).rstrip())
  return 0
