"""The refusals of a sweep config that cannot make a grid (sweeps/grid.py): one UserError
naming the key, before anything is opened or compiled."""

import math

import ml_collections

from chinchax.scaling import conventions
from chinchax.errors import UserError


def numbers(x, where: str) -> list[float]:
  if not isinstance(x, (list, tuple)):
    raise UserError(f"{where} must be a list of numbers, got {x!r}")
  out = []
  for v in x:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
        math.isfinite(v) and v > 0):
      raise UserError(f"{where} must hold positive finite numbers, got {v!r}")
    out.append(float(v))
  return out


SIZES = (1e2, 1e15)  # parameters: beyond these no shape exists (and the recipe overflows)


def _sizes(x, where: str) -> list[float]:
  out = numbers(x, where)
  for v in out:
    if not SIZES[0] <= v <= SIZES[1]:
      raise UserError(f"{where} holds {v!r} parameters; sizes must lie in "
                      f"[{SIZES[0]:g}, {SIZES[1]:g}]")
  return out


def sizes_per_budget(cfg, budgets: list[float]) -> list[list[float] | None]:
  """Explicit sizes for each budget, or None where the prior picks them."""
  sizes = cfg.sizes
  if not sizes:
    return [None] * len(budgets)
  if all(isinstance(s, (list, tuple)) for s in sizes):
    if len(sizes) != len(budgets):
      raise UserError(f"sizes has {len(sizes)} lists for {len(budgets)} budgets; give one "
                      "list per budget, or one flat list used at every budget")
    return [_sizes(s, f"sizes[{i}]") or None for i, s in enumerate(sizes)]
  flat = _sizes(list(sizes), "sizes")
  return [flat] * len(budgets)


def check_config(cfg: ml_collections.ConfigDict) -> None:
  """Refuse a sweep config that cannot make a grid (UserError naming the key)."""
  budgets, fixed = cfg.budgets, cfg.fixed_n
  if not budgets and not fixed.sizes:
    raise UserError("budgets is empty: give the compute budgets C in FLOPs, "
                    "e.g. --config.budgets='(1e12,3e12)'")
  budgets = numbers(list(budgets), "budgets")
  if len(set(budgets)) != len(budgets):
    raise UserError(f"budgets has repeats: {budgets}; list each budget once")
  if cfg.flops not in conventions.FLOPS_CONVENTIONS:
    raise UserError(f"flops={cfg.flops!r} is not one of "
                    f"{', '.join(conventions.FLOPS_CONVENTIONS)}")
  if not (isinstance(cfg.n_per_budget, int) and cfg.n_per_budget >= 1):
    raise UserError(f"n_per_budget must be an integer >= 1, got {cfg.n_per_budget!r}")
  if not (cfg.span >= 0 and math.isfinite(cfg.span)) or (cfg.span == 0 and
                                                          cfg.n_per_budget > 1):
    raise UserError(f"span={cfg.span!r} must be a positive number of decades either side of "
                    "the prior optimum (0 only with n_per_budget=1)")
  if not (isinstance(cfg.min_steps, int) and cfg.min_steps >= 1):
    raise UserError(f"min_steps must be an integer >= 1, got {cfg.min_steps!r}")
  if not (isinstance(cfg.vocab_size, int) and cfg.vocab_size > 0):
    raise UserError(f"vocab_size must be a positive integer (the tokenizer's), "
                    f"got {cfg.vocab_size!r}")
  if not cfg.train.seq_len > 0:
    raise UserError(f"train.seq_len must be positive, got {cfg.train.seq_len}")
  sizes = sizes_per_budget(cfg, budgets)
  if any(s is None for s in sizes) and not cfg.prior:
    raise UserError("prior is empty and some budgets have no explicit sizes: set prior to "
                    "'preset:NAME', 'tokens_per_param:R' or a law.json path")
  _sizes(list(fixed.sizes), "fixed_n.sizes")
  numbers(list(fixed.tokens_per_param), "fixed_n.tokens_per_param")
  if bool(fixed.sizes) != bool(fixed.tokens_per_param):
    raise UserError("fixed_n needs both sizes and tokens_per_param (or neither)")
  if fixed.schedule not in ("cosine", "wsd"):
    raise UserError(f"fixed_n.schedule={fixed.schedule!r} is not cosine or wsd")
  if cfg.schedule not in ("cosine", "wsd"):
    raise UserError(f"schedule={cfg.schedule!r} (of the IsoFLOP cells) is not cosine or wsd")
