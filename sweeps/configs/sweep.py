"""Every key of a sweep config, with its default and its meaning, declared once (`KEYS`);
`base_config` builds the config every sweep config in this folder starts from, and
`check_config` refuses one that cannot make a grid: one UserError naming the key, before
anything is opened or compiled.

    from chinchax.sweeps.configs import sweep, train
    c = sweep.base_config(train.get_config())   # then set what differs

`train` is the train config each cell copies (sweeps/configs/train.py declares its keys; a
sweep lists them under `train.`). The grid reads the keys (sweeps/grid.py; the recipe's are
checked by sweeps/recipe.py), the executors theirs (sweeps/executors.py)."""

import math

import ml_collections

from chinchax.errors import UserError
from chinchax.scaling.runs import conventions
from chinchax import json_checks
from chinchax.sweeps.configs import keys


K = keys.Key
FREE, GRID = dict(role=keys.FREE), dict(role=keys.GRID)

# A key's role in a workdir's identity (sweeps/configs/identity.py): GRID keys choose the
# cells (a rerun that changes them adds cells to the study), FREE keys change nothing a cell
# measures (where cells run, the fit's resamples), any other is the study's identity.
KEYS = (
    K("name", "sweep", "the sweep's name (its study's: another name is another study)"),
    K("budgets", (), "compute budgets C in FLOPs, one IsoFLOP group each", **GRID),
    K("flops", "6ND", "the convention the budgets are spent in: 6ND | chinchilla"),
    K("prior", "preset:hoffmann2022",
      "N*(C) the sizes centre on: preset:NAME | tokens_per_param:R | law.json path", **GRID),
    K("n_per_budget", 5, "sizes per budget, log-spaced over +-span decades around N*(C)", **GRID),
    K("span", 0.5, "decades either side of N*(C)", **GRID),
    K("sizes", (), "explicit sizes instead: one flat list, or one list per budget", **GRID),
    K("fixed_n.sizes", (), "Approach 1: model sizes trained at several D", **GRID),
    K("fixed_n.tokens_per_param", (), "Approach 1: the D/N ratios of each size", **GRID),
    K("fixed_n.schedule", "cosine", "cosine (one run per D) | wsd (one run, cooldown branches)"),
    K("schedule", "cosine",
      "cosine (one run per IsoFLOP cell) | wsd (one WSD run per shape and batch, a cooldown "
      "branch at each budget's D; give a fixed batch rule, or the budgets of one size get "
      "batches of their own and so runs of their own)"),
    K("min_steps", 100, "cells with fewer planned steps are refused", **GRID),
    K("allow_repeats", False, "False: refuse cells whose D exceeds the corpus's unique tokens",
      **GRID),
    K("vocab_size", 258, "the tokenizer's vocabulary (shapes and N depend on it)"),
    # Each cell's peak LR and batch (sweeps/recipe.py) and the shape recipe's floor.
    K("recipe.lr_rule", "size", "size (peak LR from N) | deepseek (from C) | fixed | law:PATH "
      "(a fitted hparams.json: chinchax fit-hparams)"),
    K("recipe.lr_ref", 6e-4, "size rule: the peak LR at lr_N_ref"),
    K("recipe.lr_N_ref", 1.25e8, "size rule: the reference N"),
    K("recipe.lr_exponent", 1 / 3, "size rule: LR ∝ (N / lr_N_ref)^-lr_exponent"),
    K("recipe.lr_max", 1e-2, "size rule: the LR cap"),
    K("recipe.peak_lr", 3e-3, "fixed rule: the peak LR of every cell"),
    K("recipe.batch_rule", "deepseek", "deepseek (batch from C) | fixed | law:PATH (a fitted "
      "hparams.json)"),
    K("recipe.batch_tokens", 0, "fixed rule: tokens per batch"),
    K("recipe.batch_multiple", 1, "sequences per batch are a multiple of this"),
    K("recipe.warmup_fraction", 0.05, "warmup steps as a fraction of each cell's steps"),
    K("recipe.min_d_model", 32, "the smallest width the shape recipe uses"),
    K("recipe.min_layers", 1, "the fewest layers the shape recipe uses"),
    # Where the cells run (sweeps/executors.py) and how the fit is done.
    K("executor", "local", "where cells run: local | packed | ray", **FREE),
    K("devices_per_cell", 1, "packed: devices of each cell's sub-mesh", **FREE),
    K("cpu_devices", 0, "a CPU host split into this many jax devices, so that the packed "
      "executor runs that many cells at once (0: jax's default of one; no effect on "
      "accelerators)", **FREE),
    K("ray_address", "", "ray: the cluster to join; empty starts a local one", **FREE),
    K("ray_num_cpus", 1.0, "ray: CPUs each cell's task holds", **FREE),
    K("ray_num_gpus", 0.0, "ray: GPUs each cell's task holds", **FREE),
    K("ray_tpus", 0, "ray: TPU chips each cell's task holds", **FREE),
    K("bootstrap", 1000, "resamples of the fit's intervals (0: none)", **FREE),
    # An LR x batch grid around the recipe's guess at every cell (sweeps/hparams.py): the
    # sweep then measures the hyperparameters (`chinchax fit-hparams`) instead of a scaling law.
    K("hparams.lr_factors", (), "an LR grid: each cell trained at these multiples of the "
      "recipe's LR (then the sweep fits hparams.json, not law.json)"),
    K("hparams.batch_factors", (), "a batch grid: each cell trained at these multiples of the "
      "recipe's batch"),
    # An adaptive study (sweeps/adaptive/rounds.py): rounds of `chinchax next` over the grid's
    # budgets at every size of its shape family, each round trained and fitted, until its stop.
    K("adaptive.round_cells", 0, "cells each adaptive round adds (0: no rounds, the grid is "
      "trained as it is)", **GRID),
    K("adaptive.first_cells", 10, "cells of the adaptive study's space-filling first round",
      **GRID),
    K("adaptive.target", "a", "the answer the rounds narrow: a | N (N* at 10x the largest "
      "budget)", **GRID),
    K("adaptive.width", 0.0, "stop when the answer's 90% interval is this wide (0: 0.05 for a, "
      "0.25 for log N*)", **GRID),
    K("adaptive.max_flops", 0.0, "stop before the cells' FLOPs pass this (0: no limit)",
      **GRID),
    K("forecast", "", "a forecast record (`chinchax forecast --out=...`) scored against the runs "
      "when the sweep finishes, in report.md (empty: none)", **FREE),
    K("target", "", "the TPU slice the dry run compiles for (--compile), or a GPU node "
      "(h100:8) whose peak prices the dry run's time column", **FREE),
)

RECIPE = {k.name[len("recipe."):]: k.default for k in KEYS if k.name.startswith("recipe.")}


def base_config(train: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A sweep config with every key at its default; `train` is the config each cell copies."""
  c = keys.config(KEYS)
  c.train = train
  return c


def numbers(x, where: str) -> list[float]:
  if not isinstance(x, (list, tuple)):
    raise UserError(f"{where} must be a list of numbers, got {x!r}")
  out = []
  for v in x:
    if not (json_checks.is_number(v) and v > 0):
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
  a = cfg.adaptive
  if not (isinstance(a.round_cells, int) and a.round_cells >= 0 and
          isinstance(a.first_cells, int) and a.first_cells >= 1):
    raise UserError(f"adaptive.round_cells ({a.round_cells!r}) must be a whole number >= 0 "
                    f"and adaptive.first_cells ({a.first_cells!r}) one >= 1")
  if a.round_cells and (cfg.schedule == "wsd" or fixed.sizes or cfg.hparams.lr_factors or
                        cfg.hparams.batch_factors):
    raise UserError("adaptive.round_cells: an adaptive study trains IsoFLOP cells one cosine "
                    "run each; set schedule='cosine' and no fixed_n or hparams grid")
  if a.target not in ("a", "N") or not (a.width >= 0 and a.max_flops >= 0):
    raise UserError(f"adaptive.target must be a or N (got {a.target!r}), adaptive.width and "
                    "adaptive.max_flops numbers >= 0")
