"""The shape recipe: (d_model, n_layers, n_heads, d_ff) for a target parameter count N.

One rule: among the shapes

    n_layers L = 1, 2, ...
    d_model    = a multiple of head_dim between 16·L and 128·L  (depth-to-width ratio around
                 64, the middle of Chinchilla's 1B-70B family, 85-128, and Kaplan et al.'s
                 flat optimum 20-200)
    head_dim   = 16 while d_model < 32, 32 while d_model < 256, 64 while d_model < 2048,
                 else 128  (matmul tiles of 64/128 fill MXUs and tensor cores; 16 and 32 only
                 for the CPU-sized models of smoke sweeps, whose IsoFLOP minima sit at 1e4-1e5
                 parameters; n_heads = d_model / head_dim)
    d_ff       = the multiple of head_dim (of 16 below d_model 256) that brings N closest to
                 the target, solving the
                 linear N(d_ff) = N(d_ff=0) + L·m·d_model·d_ff  (m = 3 for SwiGLU, 2 plain)

whose N lands within 3% of the target, pick the one nearest the conventional proportions:
minimise |log(d_model / 64·L)| + |log(d_ff / (8/3·d_model))| (4·d_model for a plain MLP).
If none lands that close, the nearest N wins. N is counted by `scaling.conventions.params`
under `convention`, so the recipe and every run record agree by construction.

A `total` target below the embedding alone of the smallest model (V·16, twice untied) cannot
be met: with a 32000-token vocabulary that is ~1M parameters. Such a target is refused; use
`convention="non_embedding"` (Kaplan et al.) to size small models for large vocabularies.
"""

import math

from chinchax.scaling import conventions
from chinchax.scaling.conventions import ParamsConvention, Shape
from chinchax.scaling.errors import UserError

ASPECT = 64  # d_model / n_layers
LANDING = 0.05  # relative distance from the target that counts as "on target"
MAX_LAYERS = 1024


def _widths(n_layers: int):
  """(d_model, head_dim) candidates for a depth."""
  for head_dim in (16, 32, 64, 128):
    lo = max(1, math.ceil(ASPECT * n_layers / 4 / head_dim))
    for k in range(lo, 2 * ASPECT * n_layers // head_dim + 1):
      d = k * head_dim
      if head_dim == _head_dim(d):
        yield d, head_dim


def _head_dim(d_model: int) -> int:
  return 16 if d_model < 32 else 32 if d_model < 256 else 64 if d_model < 2048 else 128


def shape_for_params(
    N_target: float,
    *,
    vocab_size: int,
    seq_len: int,
    tied: bool = False,
    gated: bool = True,
    convention: ParamsConvention = "total",
) -> Shape:
  """The recipe's shape for `N_target` parameters (see the module docstring)."""
  if not (N_target > 0 and math.isfinite(N_target)):
    raise UserError(f"shape recipe: N_target must be a positive number, got {N_target}")
  if vocab_size <= 0 or seq_len <= 0:
    raise UserError(
        f"shape recipe: vocab_size and seq_len must be positive, got {vocab_size}, {seq_len}")
  if convention not in conventions.PARAMS_CONVENTIONS:
    raise UserError(f"shape recipe: convention {convention!r} is not one of "
                    f"{', '.join(conventions.PARAMS_CONVENTIONS)}")
  m = 3 if gated else 2
  ff_rule = 8 / 3 if gated else 4
  candidates = []  # (missed, |log N/N_target|, distance from the proportions, shape)
  for L in range(1, MAX_LAYERS + 1):
    smallest = None
    for d, head_dim in _widths(L):
      base = Shape(d, L, d // head_dim, 0, vocab_size, seq_len, tied=tied, gated=gated)
      fixed = conventions.params(base, convention)
      smallest = fixed + L * m * d * head_dim if smallest is None else smallest
      f_exact = (N_target - fixed) / (L * m * d)
      q = 16 if d < 256 else head_dim  # finer d_ff steps let tiny models land on target
      f = max(q, q * round(f_exact / q))
      s = Shape(d, L, d // head_dim, f, vocab_size, seq_len, tied=tied, gated=gated)
      miss = abs(math.log(conventions.params(s, convention) / N_target))
      off = abs(math.log(d / (ASPECT * L))) + abs(math.log(f / (ff_rule * d)))
      candidates.append((miss > math.log1p(LANDING), miss, off, s))
    if smallest > N_target * (1 + LANDING):
      break  # deeper models only overshoot more
  best = min(candidates, key=lambda c: (c[0], c[2] if not c[0] else c[1]))
  s = best[3]
  N = conventions.params(s, convention)
  if abs(N / N_target - 1) > 0.1:
    smallest = min(conventions.params(c[3], convention) for c in candidates)
    raise UserError(
        f"shape recipe: no decoder with vocab_size={vocab_size} has about {N_target:.3g} "
        f"{convention} parameters (the smallest has {smallest:.3g}); raise N_target or "
        "count non_embedding parameters")
  return s
