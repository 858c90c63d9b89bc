"""The cells of a sweep: IsoFLOP groups of (N, D) per budget C, and optional fixed-N series.

IsoFLOP cells (Hoffmann et al. 2022, Approach 2). At each budget C the sizes are either
explicit (`sizes`) or `n_per_budget` targets log-spaced over ±`span` decades around the prior
optimum N*(C):

    N_i = N*(C) · 10^(span · u_i),   u_i = linspace(−1, 1, n_per_budget)

so N*(C) is inside the span (it is the middle size when n is odd). The prior is
`preset:NAME` (a published law, `scaling.law.presets`), `tokens_per_param:R` (D = R·N, hence
N* = sqrt(C / (6R))) or the path of a `law.json` from an earlier sweep, which is how a second,
larger sweep is aimed. Each target becomes a shape through the shape recipe (exact N by
`scaling.runs.conventions.params`, total parameters), and

    D = C / (training FLOPs per token of that shape, under `flops` = 6ND | chinchilla)
    steps = round(D / tokens_per_batch);  D is then steps · tokens_per_batch

so every cell spends its budget to within half a batch, and the trainer, which runs
ceil(tokens / tokens_per_batch) steps, trains exactly those D tokens.

Fixed-N cells (Approach 1): each size in `fixed_n.sizes` trained for D = R·N tokens for each R
in `fixed_n.tokens_per_param`. They carry no IsoFLOP budget (their train config has budget 0,
so the fit does not group them).

Cells that cannot work are refused, with the reason, before any run: no shape for the target
or a shape below the recipe's floor, a shape already used at the budget, or fewer than
`min_steps` steps; and, once the data is opened (`beyond_data`), D beyond the corpus's unique
tokens when `allow_repeats` is false. Cell names ("C1e15-N3.16e5", "N3.16e5-T20") depend only
on the config, so a rerun finds its cells' workdirs again. No jax here: a grid is decided
before anything is compiled."""

from collections.abc import Callable
import dataclasses
import math
import os

import ml_collections
import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps import hparams, recipe as recipe_lib
from chinchax.sweeps.configs import sweep as sweep_config


def prior_optimum(spec: str) -> Callable[[float], float]:
  """N*(C) of a prior: 'preset:NAME', 'tokens_per_param:R' or a path to a law.json."""
  # Imported here: the fits' numerics (scipy) are only needed by a law-based prior.
  from chinchax.scaling.law import artifact as law_lib  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.law import presets  # pylint: disable=g-import-not-at-top

  spec = str(spec).strip()
  if spec.startswith("preset:"):
    law = presets.preset(spec.removeprefix("preset:"))
  elif spec.startswith("tokens_per_param:"):
    text = spec.removeprefix("tokens_per_param:")
    try:
      R = float(text)
    except ValueError:
      R = float("nan")
    if not (R > 0 and math.isfinite(R)):
      raise UserError(f"prior {spec!r}: tokens_per_param must be a positive number, "
                      f"e.g. 'tokens_per_param:20'")
    return lambda C: math.sqrt(C / (6.0 * R))
  elif spec.endswith(".json") or os.path.exists(spec):
    law = law_lib.ScalingLaw.load(spec)
  else:
    raise UserError(f"unknown prior {spec!r}: use 'preset:NAME' (one of "
                    f"{', '.join(presets.names())}), 'tokens_per_param:R' or the path of a "
                    "law.json")
  if law.conventions["params"] != "total":
    raise UserError(f"prior {spec!r} counts {law.conventions['params']} parameters; the grid "
                    "sizes total parameters, so refit it with the total convention")
  return lambda C: law.optimum(C)[0]


ShapeFn = Callable[..., Shape]


@dataclasses.dataclass(frozen=True)
class Cell:
  """One run of a sweep, decided before anything is compiled."""

  name: str
  budget: float            # the nominal C (IsoFLOP cells) or the C of the target D (fixed N)
  N: int                   # total parameters of `shape`
  shape: Shape
  D: float                 # realised training tokens: steps · batch_size · seq_len
  tokens_per_param: float
  steps: int
  batch_size: int          # sequences per batch
  seq_len: int
  peak_lr: float
  warmup_steps: int
  flops_6ND: float
  flops_chinchilla: float
  N_target: float = 0.0    # the size the shape recipe was asked for
  flops: str = "6ND"       # the convention the budget is spent in
  isoflop: bool = True     # False: a fixed-N series cell (Approach 1)
  series: str = ""         # fixed N: the name of its size's series ("N3.16e5")

  def train_config(self, sweep_cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The sweep's `train` config with this cell's shape, tokens, batch, LR and budget
    (`PER_CELL`)."""
    c = sweep_cfg.train.copy_and_resolve_references()
    c.name = self.name
    c.budget = float(self.budget) if self.isoflop else 0.0
    s = self.shape
    c.model.update(N=0, d_model=s.d_model, n_layers=s.n_layers, n_heads=s.n_heads,
                   d_ff=s.d_ff, tied=s.tied)
    c.seq_len = self.seq_len
    c.batch_size = self.batch_size
    c.tokens = float(self.D)
    c.optimizer.peak_lr = float(self.peak_lr)
    c.optimizer.warmup_steps = int(self.warmup_steps)
    return c


# The train keys each cell sets for itself (`Cell.train_config`): a sweep's `train.KEY` is
# overwritten, so a user's value would be ignored. What a sweep sets them with instead:
PER_CELL = {
    "name": "the cell's name", "budget": "budgets",
    **{f"model.{k}": "sizes and the shape recipe (recipe.*)"
       for k in ("N", "d_model", "n_layers", "n_heads", "d_ff")},
    "batch_size": "recipe.batch_rule and recipe.batch_tokens",
    "tokens": "budgets and sizes (D = C / 6N)",
    "optimizer.peak_lr": "recipe.lr_rule (recipe.lr_ref, recipe.peak_lr, ...)",
    "optimizer.warmup_steps": "recipe.warmup_fraction",
}


# --------------------------------------------------------------------------- the grid


def _num(x: float) -> str:
  """3 significant digits, no '+' or leading zeros in the exponent: 3.16e5, 1e15."""
  mant, _, exp = f"{x:.3g}".partition("e")
  return mant + (f"e{int(exp)}" if exp else "")


def shape_tag(s: Shape) -> str:
  """`d64L2H2F256`: what tells two cells of one N apart in their names."""
  return f"d{s.d_model}L{s.n_layers}H{s.n_heads}F{s.d_ff}"


def _default_shape_fn() -> ShapeFn:
  from chinchax.models import config  # pylint: disable=g-import-not-at-top
  return config.shape_for_params


@dataclasses.dataclass(frozen=True)
class _Target:
  name: str
  budget: float
  N_target: float
  isoflop: bool
  ratio: float = 0.0       # fixed N: tokens per parameter
  shape: Shape | None = None
  reason: str = ""
  series: str = ""


def _shapes(targets: list[_Target], cfg, shape_fn: ShapeFn,
            rec: recipe_lib.Recipe) -> list[_Target]:
  out = []
  for t in targets:
    try:
      s = shape_fn(t.N_target, vocab_size=cfg.vocab_size, seq_len=cfg.train.seq_len,
                   tied=bool(cfg.train.model.tied))
    except UserError as e:
      out.append(dataclasses.replace(t, reason=f"no shape for N≈{fmt.num(t.N_target)} ({e})"))
      continue
    why = rec.floor_violation(s.d_model, s.n_layers)
    if why:
      out.append(dataclasses.replace(t, shape=s, reason=f"shape below the recipe's floor: {why}"))
    else:
      out.append(dataclasses.replace(t, shape=s))
  return out


def _name(t: _Target, s: Shape | None) -> tuple[str, str]:
  """(the cell's name, its fixed-N series' name or "")."""
  n = _num(conventions.params(s) if s is not None else t.N_target)
  return (f"C{_num(t.budget)}-N{n}", "") if t.isoflop else (f"N{n}-T{t.ratio:g}", f"N{n}")


def _named(group: list[_Target]) -> list[_Target]:
  """Names for one budget's (or the fixed-N series') targets; duplicate shapes refused."""
  seen: dict[tuple, float] = {}  # (shape, tokens per parameter) -> the first target
  out = []
  for t in group:
    name, series = _name(t, t.shape)
    t = dataclasses.replace(t, name=name, series=series)
    if t.shape is not None and not t.reason:
      key = (t.shape, t.ratio)
      if key in seen:
        t = dataclasses.replace(t, name=_name(t, None)[0], reason=(
            f"duplicate shape: N≈{fmt.num(t.N_target)} maps to {shape_tag(t.shape)}, already "
            f"the shape of N≈{fmt.num(seen[key])} here; widen the span or use fewer sizes"))
      else:
        seen[key] = t.N_target
    out.append(t)
  counts: dict[str, int] = {}
  for t in out:
    if not t.reason:
      counts[t.name] = counts.get(t.name, 0) + 1
  return [dataclasses.replace(t, name=f"{t.name}-{shape_tag(t.shape)}",
                              series=t.series and f"{t.series}-{shape_tag(t.shape)}")
          if not t.reason and counts[t.name] > 1 else t for t in out]


def make_grid(sweep_cfg: ml_collections.ConfigDict,
              shape_fn: ShapeFn | None = None) -> tuple[list[Cell], list[str]]:
  """(cells, refusals): the runnable cells, and one line per refused cell with its reason.

  shape_fn(N_target, *, vocab_size, seq_len, tied) -> Shape; default the models' recipe.
  """
  cfg = sweep_cfg
  sweep_config.check_config(cfg)
  rec = recipe_lib.from_config(cfg.recipe)
  shape_fn = shape_fn or _default_shape_fn()
  budgets = sweep_config.numbers(list(cfg.budgets), "budgets")
  sizes = sweep_config.sizes_per_budget(cfg, budgets)
  prior = prior_optimum(cfg.prior) if cfg.prior else None

  groups: list[list[_Target]] = []
  for C, explicit in zip(budgets, sizes):
    if explicit is None:
      u = np.linspace(-1.0, 1.0, cfg.n_per_budget) if cfg.n_per_budget > 1 else np.zeros(1)
      explicit = [float(prior(C) * 10.0**(cfg.span * ui)) for ui in u]
    groups.append([_Target("", C, N, True) for N in sorted(explicit)])
  if cfg.fixed_n.sizes:
    groups.append([_Target("", 0.0, float(N), False, float(R)) for N in sorted(cfg.fixed_n.sizes)
                   for R in sorted(cfg.fixed_n.tokens_per_param)])

  cells, refusals = [], []
  for group in groups:
    for t in _named(_shapes(group, cfg, shape_fn, rec)):
      result = t.reason or _cell(t, cfg, rec)
      if isinstance(result, str):
        refusals.append(f"{t.name}: refused: {result}")
      else:
        cells.append(result)
  cells, more = hparams.expand(cells, cfg, rec)
  return cells, refusals + more


def _cell(t: _Target, cfg, rec: recipe_lib.Recipe) -> Cell | str:
  s, seq_len = t.shape, int(cfg.train.seq_len)
  N = conventions.params(s)
  per_token = conventions.flops_per_token(s, cfg.flops)
  if t.isoflop:
    budget, D_target = t.budget, t.budget / per_token
  else:
    D_target = t.ratio * N
    budget = per_token * D_target
  batch = rec.batch_size(budget, D_target, seq_len, cfg.min_steps, N=N)
  steps = round(D_target / (batch * seq_len))
  if steps < cfg.min_steps:
    return (f"{steps} steps < min_steps={cfg.min_steps} even at the smallest batch "
            f"({batch}x{seq_len} tokens); raise the budget or lower min_steps")
  D = float(steps * batch * seq_len)
  counts = conventions.counts(s, D)
  return Cell(
      name=t.name, budget=budget, N=N, shape=s, D=D, tokens_per_param=D / N, steps=steps,
      batch_size=batch, seq_len=seq_len, peak_lr=rec.lr(N, budget, D),
      warmup_steps=rec.warmup_steps(steps), flops_6ND=counts["flops_6ND"],
      flops_chinchilla=counts["flops_chinchilla"], N_target=t.N_target, flops=cfg.flops,
      isoflop=t.isoflop, series=t.series)


def beyond_data(cells: list[Cell], unique_tokens: float,
                allow_repeats: bool) -> tuple[list[Cell], list[str]]:
  """(the cells the data can serve, one refusal per cell whose D exceeds its unique tokens);
  with `allow_repeats` every cell is kept (the data repeats)."""
  if allow_repeats:
    return list(cells), []
  kept = [c for c in cells if c.D <= unique_tokens]
  return kept, [f"{c.name}: refused: D={fmt.num(c.D)} tokens exceeds the data's "
                f"{fmt.num(unique_tokens)} unique tokens; set allow_repeats=True to repeat data, "
                "or use a larger corpus"
                for c in cells if c.D > unique_tokens]
