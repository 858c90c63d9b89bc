"""A sweep that measures its hyperparameters: every cell trained on an LR x batch grid.

With `hparams.lr_factors` (and optionally `hparams.batch_factors`) set, each cell of the grid
becomes one cell per (LR factor, batch factor): peak LR = factor · the recipe's LR of that
cell, batch = factor · the recipe's batch (whole multiples of `recipe.batch_multiple`, the
steps recomputed so that D stays as close as the new batch allows). The recipe's guess is the
centre of the grid, so `recipe.lr_rule='law:PATH'` aims a second grid with a first one's law.

Names carry the LR and batch (`N1.01e4-T20-lr1.7e-2-B8`), and a fixed-N series carries them
too, so that with `fixed_n.schedule='wsd'` each (size, LR, batch) is one WSD run whose
cooldown branches are the grid's D values. The sweep ends with `chinchax fit-hparams` on its
runs instead of the IsoFLOP fit (sweeps/hparams_adapter.py). No jax here.
"""

import dataclasses

from chinchax.errors import UserError
from chinchax.sweeps import grid_checks


def active(cfg) -> bool:
  """Whether the sweep config asks for an LR x batch grid."""
  return bool(cfg.hparams.lr_factors) or bool(cfg.hparams.batch_factors)


def factors(cfg) -> tuple[list[float], list[float]]:
  lr = grid_checks.numbers(list(cfg.hparams.lr_factors), "hparams.lr_factors") or [1.0]
  batch = grid_checks.numbers(list(cfg.hparams.batch_factors), "hparams.batch_factors") or [1.0]
  for name, xs in (("lr_factors", lr), ("batch_factors", batch)):
    if len(set(xs)) != len(xs):
      raise UserError(f"hparams.{name} has repeats: {xs}; list each factor once")
  return sorted(lr), sorted(batch)


def _num(x: float) -> str:
  mant, _, exp = f"{x:.3g}".partition("e")
  return mant + (f"e{int(exp)}" if exp else "")


def expand(cells, cfg, rec) -> tuple[list, list[str]]:
  """(cells, refusals): every cell at every (LR factor, batch factor) of `cfg.hparams`."""
  if not active(cfg):
    return list(cells), []
  lr_f, batch_f = factors(cfg)
  k, out, refusals = rec.batch_multiple, [], []
  for cell in cells:
    seen = set()
    for g in batch_f:
      bs = max(k, k * round(cell.batch_size * g / k))
      if bs in seen:
        refusals.append(f"{cell.name}: refused: batch factor {g:g} rounds to {bs} sequences, "
                        "as another factor does; spread hparams.batch_factors")
        continue
      seen.add(bs)
      steps = round(cell.D / (bs * cell.seq_len))
      for f in lr_f:
        lr = cell.peak_lr * f
        tag = f"-lr{_num(lr)}-B{bs}"
        if steps < cfg.min_steps:
          refusals.append(f"{cell.name}{tag}: refused: {steps} steps < min_steps="
                          f"{cfg.min_steps} at batch {bs}x{cell.seq_len}; drop the batch "
                          "factor or raise D")
          continue
        D = float(steps * bs * cell.seq_len)
        scale = D / cell.D
        out.append(dataclasses.replace(
            cell, name=cell.name + tag, series=cell.series and cell.series + tag, D=D,
            tokens_per_param=D / cell.N, steps=steps, batch_size=bs, peak_lr=lr,
            warmup_steps=rec.warmup_steps(steps), flops_6ND=cell.flops_6ND * scale,
            flops_chinchilla=cell.flops_chinchilla * scale))
  return out, refusals
