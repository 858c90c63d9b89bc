"""The hyperparameter recipe of a sweep cell: tokens per batch, peak LR and warmup.

Every rule is a closed form of the cell's (N, C, D), so a grid is decided before any run and a
rerun gets the same numbers. Each constant is a key of the sweep config's `recipe` block.

* **Peak LR per size** (`lr_rule='size'`, default):

      lr(N) = lr_ref · (N / lr_N_ref)^(−lr_exponent),   at most lr_max

  with lr_ref = 6e-4 at lr_N_ref = 1.25e8 (GPT-3 Small, Brown et al. 2020, Table 2.1) and
  lr_exponent = 1/3. A least-squares fit of log LR on log N over GPT-3's eight sizes
  (125M–175B) gives −0.31; with −1/3 every row of that table is within a factor 1.42. It is
  also Adam's 1/width rule of μP (Yang et al. 2022) for shapes whose width grows as N^(1/3).
  `lr_rule='deepseek'`: lr(C) = 0.3118 · C^(−0.1250), the fit of DeepSeek LLM (Bi et al.
  2024, eq. 1) against the budget, one LR for every size at a budget. `lr_rule='fixed'`:
  `peak_lr` for every cell.
* **Tokens per batch** (`batch_rule='deepseek'`, default): B(C) = 0.2920 · C^0.3271 tokens,
  DeepSeek LLM eq. 1 (fitted over 1e17–3e20 FLOPs with C counted as non-embedding FLOPs/token
  × D; here C is the cell's budget under the sweep's convention, close to it). `batch_rule=
  'fixed'`: `batch_tokens`. `batch_rule='law:PATH'`: the batch law of a fitted hparams.json
  at the cell's D (or N, C as the law has it). The batch is then whole sequences, a multiple of `batch_multiple`
  (data-parallel shards must be equal) and shrunk, never below one multiple, until the run
  has at least `min_steps` steps: an optimizer that takes a handful of steps measures the
  schedule, not the model. A cell that cannot reach `min_steps` is refused by the grid.
* **Warmup**: `warmup_fraction` of the steps (at least one), linear, as the optimizer's
  schedule expects (`sweeps.train.optimizer`).
* **Floor**: shapes with d_model < `min_d_model` or n_layers < `min_layers` are refused.
"""

import dataclasses
import math

import ml_collections

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.sweeps import hparams
from chinchax.sweeps.configs import sweep as sweep_config

LR_RULES = ("size", "deepseek", "fixed")
BATCH_RULES = ("deepseek", "fixed")


@dataclasses.dataclass(frozen=True)
class Recipe:
  """Each cell's peak LR and batch, and the shape recipe's floor (the `recipe.` keys of
  sweeps/configs/sweep.py, which hold their defaults and meanings)."""
  lr_rule: str
  lr_ref: float
  lr_N_ref: float
  lr_exponent: float
  lr_max: float
  peak_lr: float                  # lr_rule='fixed'
  batch_rule: str
  batch_tokens: int               # batch_rule='fixed'
  batch_multiple: int             # sequences per batch are a multiple of this
  warmup_fraction: float
  min_d_model: int
  min_layers: int

  def validate(self) -> "Recipe":
    if self.lr_rule not in LR_RULES and not hparams.is_law(self.lr_rule):
      raise UserError(f"recipe.lr_rule={self.lr_rule!r} is not one of {', '.join(LR_RULES)} "
                      "or law:PATH (an hparams.json)")
    if self.batch_rule not in BATCH_RULES and not hparams.is_law(self.batch_rule):
      raise UserError(f"recipe.batch_rule={self.batch_rule!r} is not one of "
                      f"{', '.join(BATCH_RULES)} or law:PATH (an hparams.json)")
    for rule, which in ((self.lr_rule, "lr"), (self.batch_rule, "batch")):
      if hparams.is_law(rule):
        hparams.law(rule, which)  # a missing or damaged file: one line, before any run
    for key in ("lr_ref", "lr_N_ref", "lr_max", "peak_lr"):
      if not (getattr(self, key) > 0 and math.isfinite(getattr(self, key))):
        raise UserError(f"recipe.{key} must be a positive number, got {getattr(self, key)}")
    if not (math.isfinite(self.lr_exponent) and abs(self.lr_exponent) <= 2):
      # Beyond ±2 the LR moves by 10^4 per decade of N: no rule, and it overflows a float.
      raise UserError(f"recipe.lr_exponent must be in [-2, 2] (GPT-3's sizes give 1/3), "
                      f"got {self.lr_exponent}")
    if self.batch_rule == "fixed" and not self.batch_tokens > 0:
      raise UserError("recipe.batch_rule='fixed' needs recipe.batch_tokens > 0 "
                      f"(tokens per batch), got {self.batch_tokens}")
    if not self.batch_multiple >= 1:
      raise UserError(f"recipe.batch_multiple must be >= 1, got {self.batch_multiple}")
    if not 0 <= self.warmup_fraction < 1:
      raise UserError(
          f"recipe.warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
    return self

  # ------------------------------------------------------------------ rules

  def lr(self, N: float, C: float, D: float | None = None) -> float:
    """Peak learning rate for a model of N parameters at budget C (D tokens: C / 6N)."""
    if hparams.is_law(self.lr_rule):
      return hparams.value(self.lr_rule, "lr", N, C / (6 * N) if D is None else D)
    if self.lr_rule == "fixed":
      return self.peak_lr
    if self.lr_rule == "deepseek":
      value = 0.3118 * C**-0.1250
    else:
      value = self.lr_ref * (N / self.lr_N_ref)**-self.lr_exponent
    return min(value, self.lr_max)

  def ideal_batch_tokens(self, C: float, N: float | None = None,
                         D: float | None = None) -> float:
    if hparams.is_law(self.batch_rule):
      if N is None or D is None:
        raise UserError("recipe.batch_rule='law:...' needs each cell's N and D")
      return hparams.value(self.batch_rule, "batch", N, D)
    if self.batch_rule == "fixed":
      return float(self.batch_tokens)
    return 0.2920 * C**0.3271

  def batch_size(self, C: float, D: float, seq_len: int, min_steps: int,
                 N: float | None = None) -> int:
    """Sequences per batch for D tokens at budget C (a multiple of batch_multiple)."""
    k = self.batch_multiple
    seqs = max(k, k * round(self.ideal_batch_tokens(C, N, D) / seq_len / k))
    most = k * math.floor(D / (min_steps * seq_len) / k)  # largest batch keeping min_steps
    return max(k, min(seqs, most))

  def source(self) -> str | None:
    """Where the cells' LR and batch come from, when a fitted law gives either; else None."""
    if not (hparams.is_law(self.lr_rule) or hparams.is_law(self.batch_rule)):
      return None
    return ", ".join("law" if hparams.is_law(r) else r
                     for r in (self.lr_rule, self.batch_rule))

  def law_notes(self, cells) -> list[str]:
    """The laws in use, and a warning per cell outside a law's fitted range."""
    out = []
    for rule, which in ((self.lr_rule, "lr"), (self.batch_rule, "batch")):
      if not hparams.is_law(rule):
        continue
      lw = hparams.law(rule, which)
      exps = ", ".join(f"{v}^{e:+.3f}" for v, e in lw["exponents"].items())
      out.append(f"{'peak LR' if which == 'lr' else 'batch'} from {hparams.path_of(rule)}:"
                 f" {lw['form']}, c = {fmt.num(lw['coef'], 4)}, {exps}")
      for c in cells:
        why = hparams.outside(rule, which, c.N, c.D)
        if why:
          out.append(f"warning: {c.name}: {which} extrapolated: {'; '.join(why)}")
    return out

  def warmup_steps(self, steps: int) -> int:
    return max(1, round(self.warmup_fraction * steps))

  def floor_violation(self, d_model: int, n_layers: int) -> str | None:
    """Why a shape is below the recipe's floor, or None."""
    if d_model < self.min_d_model:
      return f"d_model={d_model} < recipe.min_d_model={self.min_d_model}"
    if n_layers < self.min_layers:
      return f"n_layers={n_layers} < recipe.min_layers={self.min_layers}"
    return None


def from_config(cfg: ml_collections.ConfigDict | dict | None) -> Recipe:
  """The recipe of a sweep config's `recipe` block (missing keys keep their defaults)."""
  values = {**sweep_config.RECIPE,
            **(cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg or {}))}
  known = {f.name for f in dataclasses.fields(Recipe)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise UserError(f"unknown recipe key{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(unknown)}; known: {', '.join(sorted(known))}")
  return Recipe(**values).validate()
